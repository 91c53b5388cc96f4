"""kv-share plan --from-log: the plan of a logged run takes the log's KV memory exactly (as
--memory), its release and the settings it shows; conflicting options are refused.

Logs: tests/kv/vllm_logs/lmcache-1739.log ("Available KV cache memory: 6.51 GiB", max_model_len
32,768 in its concurrency line) and tests/kv/gpu_logs/ (sources in PROVENANCE.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv import PlanRequest, plan_run

KV = Path(__file__).parent
LLAMA = KV / "gpu_logs" / "configs" / "meta-llama--Llama-3.1-8B-Instruct.subset.json"
V0_LOG = KV / "gpu_logs" / "v0-10517-20k.log"
runner = CliRunner()


def test_the_log_gives_the_memory_and_max_model_len_exactly_as_memory_would():
    """issue 10517: kv_cache_size=3.81GiB, max_model_len 20000 (its concurrency line)."""
    logged = plan_run(PlanRequest(str(LLAMA), from_log=str(V0_LOG)))
    given = plan_run(PlanRequest(str(LLAMA), memory="3.81GiB", max_model_len=20000))
    assert logged.to_json() == given.to_json()


def test_the_stored_lines_give_memory_and_max_model_len():
    """LMCache#1739: "Available KV cache memory: 6.51 GiB", "Maximum concurrency for 32,768
    tokens per request"; the stored lines name no release, so none is set."""
    request = PlanRequest(str(LLAMA), from_log=str(KV / "vllm_logs" / "lmcache-1739.log"))
    assert (request.memory, request.max_model_len) == ("6.51GiB", 32768)
    assert request.vllm_version is None


def test_the_release_comes_from_the_log():
    """The API server's first line (vLLM 0.10.1 vllm/entrypoints/openai/api_server.py:
    "vLLM API server version %s") names the release the plan takes."""
    from mmcli.kv.explain.vllm_log import parse_vllm_log
    from mmcli.kv.from_log import log_settings

    text = (
        "(APIServer pid=1) INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version "
        "0.10.1\n" + (KV / "vllm_logs" / "lmcache-1739.log").read_text()
    )
    assert log_settings(parse_vllm_log(text))["vllm_version"] == "0.10.1"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"max_model_len": 4096}, "--max-model-len"),
        ({"memory": "20GiB"}, "--memory"),
        ({"gpu": "H100"}, "--gpu"),
    ],
)
def test_a_conflicting_option_is_refused_naming_both(extra, named):
    with pytest.raises(InputError) as info:
        PlanRequest(str(LLAMA), from_log=str(V0_LOG), **extra)
    assert named in info.value.message
    assert "log" in info.value.message


def test_an_agreeing_option_is_accepted():
    request = PlanRequest(str(LLAMA), from_log=str(V0_LOG), max_model_len=20000)
    assert request.memory == "3.81GiB"


def test_another_engine_is_refused():
    with pytest.raises(InputError, match="--from-log is a vLLM option"):
        PlanRequest(str(LLAMA), from_log=str(V0_LOG), engine="sglang")


def test_cli_plans_from_the_log():
    out = runner.invoke(
        app,
        ["kv-share", "plan", str(LLAMA), "--from-log", str(V0_LOG), "--format", "json"],
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    given = runner.invoke(
        app,
        [
            "kv-share",
            "plan",
            str(LLAMA),
            "--memory",
            "3.81GiB",
            "--max-model-len",
            "20000",
            "--format",
            "json",
        ],
    )
    assert doc == json.loads(given.output)


def test_cli_refusal_is_exit_2():
    out = runner.invoke(
        app, ["kv-share", "plan", str(LLAMA), "--from-log", str(V0_LOG), "--memory", "1GiB"]
    )
    assert out.exit_code == 2
    assert "--from-log and --memory" in out.output


def test_a_release_other_than_the_logs_is_refused_naming_both(tmp_path):
    """The log names 0.10.1 (its API server line); --vllm-version 0.20.0 says otherwise."""
    log = tmp_path / "run.log"
    log.write_text(
        "(APIServer pid=1) INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version "
        "0.10.1\n" + (KV / "vllm_logs" / "lmcache-1739.log").read_text()
    )
    with pytest.raises(InputError) as info:
        PlanRequest(str(LLAMA), from_log=str(log), vllm_version="0.20.0")
    assert "--vllm-version '0.20.0'" in info.value.message
    assert "0.10.1" in info.value.message
    assert PlanRequest(str(LLAMA), from_log=str(log), vllm_version="0.10.1").memory == "6.51GiB"
