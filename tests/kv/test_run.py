"""``plan_run(PlanRequest(...))`` is ``kv-share plan``: the same JSON document for a plan, a
sweep, an auto-fit and the engines side by side, the config read once, options checked when
the request is built."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv import PlanRequest, plan_run
from mmcli.kv.inputs import layer_config
from mmcli.kv.releases import rules_for

ROOT = Path(__file__).resolve().parents[2]
QWEN3 = "samples/kv/qwen3-14b-like.json"
GEMMA3N = "samples/kv/gemma3n-e2b-like.json"
NEXT = "tests/kv/configs/Qwen--Qwen3-Next-80B-A3B-Thinking.json"


def cli(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["kv-share", "plan", *args, "--format", "json"])
    assert result.exit_code in (0, 1), result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


CASES: list[tuple[list[str], dict[str, Any]]] = [
    ([QWEN3, "--memory", "20GiB"], {"memory": "20GiB"}),
    ([GEMMA3N, "--memory", "20GiB", "-pp", "2"], {"memory": "20GiB", "pipeline_parallel_size": 2}),
    (
        [QWEN3, "--gpu", "H100", "--weights", "28GiB", "--vllm-version", "0.19"],
        {"gpu": "H100", "weights": "28GiB", "vllm_version": "0.19"},
    ),
    (
        [QWEN3, "--memory", "20GiB", "--max-model-len", "auto"],
        {"memory": "20GiB", "max_model_len": "auto"},
    ),
    (
        [QWEN3, "--max-model-len", "8K", "--sweep", "memory=8GiB..80GiB:4"],
        {"max_model_len": "8K", "sweep": "memory=8GiB..80GiB:4"},
    ),
    ([QWEN3, "--memory", "20GiB", "--engine", "all"], {"memory": "20GiB", "engine": "all"}),
    ([QWEN3, "--memory", "20GiB", "--engine", "sglang"], {"memory": "20GiB", "engine": "sglang"}),
    (
        [
            NEXT,
            "--memory",
            "40GiB",
            "-tp",
            "4",
            "--mtp",
            "--num-speculative-tokens",
            "2",
            "--vllm-version",
            "0.20",
        ],
        {
            "memory": "40GiB",
            "tensor_parallel_size": 4,
            "mtp": True,
            "num_speculative_tokens": 2,
            "vllm_version": "0.20",
        },
    ),
    (
        [NEXT, "--memory", "1GiB", "--max-model-len", "4096", "--max-num-seqs", "1024"],
        {"memory": "1GiB", "max_model_len": 4096, "max_num_seqs": 1024},
    ),
]


@pytest.mark.parametrize(
    ("args", "settings"), CASES, ids=lambda c: " ".join(c) if isinstance(c, list) else ""
)
def test_the_library_returns_what_the_command_prints(
    args: list[str], settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    run = plan_run(PlanRequest(args[0], **settings))
    assert json.loads(json.dumps(run.to_json())) == cli(*args)
    assert run.to_json()["exit_code"] == run.exit_code


@pytest.mark.parametrize("settings", [{"engine": "all"}, {"max_model_len": "auto"}])
def test_the_config_is_read_once(settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    reads: list[Path] = []
    real = layer_config.read_document

    def counted(path: Path) -> dict[str, Any]:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(layer_config, "read_document", counted)
    run = plan_run(PlanRequest(QWEN3, memory="20GiB", **settings))
    assert run.exit_code == 0
    assert reads == [Path(QWEN3)]


def test_release_rules_are_built_once_per_release() -> None:
    assert rules_for("0.20") is rules_for("0.20")


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"engine": "sglang", "vllm_version": "0.20"}, "--vllm-version is a vLLM option"),
        ({"engine": "tgi"}, "--engine must be one of vllm, sglang, trtllm, all"),
        ({"pp_layer_partition": "8,x"}, "--pp-layer-partition: cannot read"),
        ({"max_model_len": "auto", "vllm_version": "0.13"}, "has no auto-fit"),
        ({"sweep": "layers=1..2"}, "--sweep"),
        ({"speculative_config": {"method": "ngram"}}, "needs num_speculative_tokens"),
        ({"engine": "trtllm", "map_path": "m.json"}, "--map is a vLLM option"),
    ],
)
def test_a_request_is_checked_when_built(settings: dict[str, Any], error: str) -> None:
    with pytest.raises(InputError, match=error):
        PlanRequest(QWEN3, **settings)


def test_a_partition_may_be_a_tuple() -> None:
    run = plan_run(
        PlanRequest(
            str(ROOT / GEMMA3N),
            memory="20GiB",
            pipeline_parallel_size=2,
            pp_layer_partition=(14, 16),
        )
    )
    assert run.options.pp_layer_partition == (14, 16)
    assert run.plan is not None and run.exit_code == 0


def test_data_parallel_replicas_multiply_the_deployment_not_one_gpu() -> None:
    one = plan_run(PlanRequest(QWEN3, memory="20GiB", tensor_parallel_size=1))
    two = plan_run(PlanRequest(QWEN3, memory="20GiB", data_parallel_size=2))
    assert one.deployment() is None and "deployment" not in one.to_json()
    assert two.plan is not None and one.plan is not None
    side = two.plan.without_sharing
    assert side is not None and side == one.plan.without_sharing  # each GPU plans the same
    assert two.to_json()["deployment"] == {
        "gpus": 2,
        "replicas": 2,
        "gpus_per_replica": 1,
        "kv_tokens_per_replica": side.max_tokens,
        "kv_tokens": 2 * (side.max_tokens or 0),
        "max_concurrency_per_replica": side.max_concurrency,
        "max_concurrency": 2 * (side.max_concurrency or 0),
    }


def test_tensor_and_pipeline_ranks_make_one_replica() -> None:
    run = plan_run(
        PlanRequest(GEMMA3N, memory="20GiB", pipeline_parallel_size=2, data_parallel_size=3)
    )
    deployment = run.deployment()
    assert deployment is not None
    assert (deployment["gpus"], deployment["gpus_per_replica"], deployment["replicas"]) == (6, 2, 3)


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"data_parallel_size": 0}, "--data-parallel-size must be a positive integer"),
        ({"data_parallel_size": 2, "engine": "sglang"}, "--data-parallel-size is a vLLM option"),
    ],
)
def test_data_parallel_size_is_checked(settings: dict[str, Any], error: str) -> None:
    with pytest.raises(InputError, match=error):
        PlanRequest(QWEN3, **settings)


def test_the_report_says_the_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(
        app, ["kv-share", "plan", QWEN3, "--memory", "20GiB", "-tp", "2", "-dp", "2"]
    )
    assert result.exit_code == 0, result.stderr
    doc = cli(QWEN3, "--memory", "20GiB", "-tp", "2", "-dp", "2")["deployment"]
    tokens, per = doc["kv_tokens_per_replica"], doc["max_concurrency_per_replica"]
    assert (
        f"deployment: 4 GPUs = 2 replicas × 2 GPUs; KV tokens 2 × {tokens:,} = {2 * tokens:,}; "
        f"max concurrency 2 × {per:.2f}× = {2 * per:.2f}×"
    ) in result.stdout
