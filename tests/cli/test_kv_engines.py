"""``kv-share plan --engine …`` and ``kv-share explain`` of SGLang / TensorRT-LLM logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "kv" / "configs"
QWEN3_235B = str(CONFIGS / "Qwen--Qwen3-235B-A22B-FP8.json")
QWEN15_7B = str(CONFIGS / "Qwen--Qwen1.5-7B.json")
GiB = 2**30


def run(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, ["kv-share", *args], catch_exceptions=False)
    assert result.exit_code == code, result.stdout + result.stderr
    return result


def test_all_engines_side_by_side_json() -> None:
    # vllm#21348: the pool of 367,404 SGLang cells (48,128 B) at tp 4.
    memory = str(367_404 * 48_128)
    doc = json.loads(
        run(
            "plan",
            QWEN3_235B,
            "--engine",
            "all",
            "-tp",
            "4",
            "--memory",
            memory,
            "--format",
            "json",
        ).stdout
    )
    engines = {e["engine"]: e for e in doc["engines"]}
    assert list(engines) == ["vllm", "sglang", "trtllm"]
    for engine in doc["engines"]:
        for figure in engine["figures"].values():
            assert figure["engine"] == engine["engine"]
            assert figure["release"] == engine["release"]
    sglang = engines["sglang"]["figures"]
    assert sglang["pool_tokens"]["value"] == 367_404 and sglang["pool_tokens"]["exact"]
    assert {e["figures"]["bytes_per_token"]["value"] for e in doc["engines"]} == {48_128}
    assert engines["trtllm"]["release"] == "1.1"
    assert doc["exit_code"] == 0


def test_one_engine_table() -> None:
    result = run(
        "plan", QWEN15_7B, "--engine", "trtllm", "--trtllm-version", "0.13", "--memory", "21.89GiB"
    )
    assert "TensorRT-LLM 0.13" in result.stdout
    assert "would print: Number of blocks in KV cache primary pool: 631" in result.stdout


def test_gpu_estimates_are_marked() -> None:
    result = run(
        "plan",
        QWEN15_7B,
        "--engine",
        "all",
        "--gpu",
        "A100-40GB",
        "--weights",
        "15.4GB",
        "--max-model-len",
        "8192",
    )
    assert "(estimate)" in result.stdout
    assert result.stdout.count("ESTIMATE:") >= 3  # one reason per engine


def test_the_engine_refusing_to_start_is_exit_1() -> None:
    result = run("plan", QWEN3_235B, "--engine", "sglang", "-tp", "4", "--memory", "1000", code=1)
    assert "Not enough memory" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "tgi"], "--engine must be one of vllm, sglang, trtllm, all"),
        (["--page-size", "64"], "--page-size is a SGLang option"),
        (["--engine", "sglang", "--tokens-per-block", "64"], "--tokens-per-block is a"),
        (["--engine", "sglang", "--sweep", "memory=8GiB..16GiB"], "--sweep is a vLLM option"),
        (
            ["--engine", "sglang", "--sglang-version", "0.5.24"],
            "SGLang 0.5.24 is not mirrored",
        ),
        (["--engine", "trtllm", "--trtllm-version", "0.12"], "TensorRT-LLM 0.12 is not"),
        (["--engine", "sglang", "--enable-prefix-caching"], "--enable-prefix-caching is a vLLM"),
        (["--engine", "trtllm", "--block-size", "32"], "--block-size is a vLLM option"),
        (["--engine", "sglang", "--chunked-local-attn-hybrid"], "--chunked-local-attn-hybrid is"),
        (["--engine", "trtllm", "--no-chunked-local-attn-hybrid"], "--chunked-local-attn-hybrid"),
        (["--engine", "all", "--block-size", "32", "--max-model-len", "4096"], None),
    ],
)
def test_bad_engine_options_are_exit_2(args: list[str], message: str | None) -> None:
    result = CliRunner().invoke(
        app, ["kv-share", "plan", QWEN3_235B, "--memory", "1GiB", *args], catch_exceptions=False
    )
    if message is None:  # with all, vLLM's options shape its column
        assert result.exit_code == 0, result.stderr
        return
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert message in lines[0]
    assert result.stdout == ""


def test_unmirrored_model_is_refused_naming_it() -> None:
    # SGLang plans Qwen3-Next's state pool; TensorRT-LLM's hybrid pools are not mirrored: that
    # engine alone is refused, and side by side its column is empty and says why.
    config = str(CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Thinking.json")
    result = run("plan", config, "--engine", "trtllm", "--memory", "10GiB", code=2)
    assert "TensorRT-LLM: hybrid Mamba / GDN" in result.stderr
    jamba = str(CONFIGS / "ai21labs--AI21-Jamba-1.5-Mini.json")
    result = run("plan", jamba, "--engine", "sglang", "--memory", "10GiB", code=2)
    assert "SGLang: JambaForCausalLM (a hybrid Mamba / GDN" in result.stderr


def test_all_engines_show_an_unplanned_engine_as_an_empty_column() -> None:
    config = str(CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Thinking.json")
    # SGLang 0.5.4: the newest release whose hybrid state pool is mirrored.
    args = ("plan", config, "--engine", "all", "--memory", "10GiB", "--sglang-version", "0.5.4")
    doc = json.loads(run(*args, "--format", "json").stdout)
    engines = {e["engine"]: e for e in doc["engines"]}
    assert engines["vllm"]["figures"] and engines["sglang"]["figures"]
    assert engines["vllm"]["not_planned"] is None and engines["sglang"]["not_planned"] is None
    trt = engines["trtllm"]
    assert trt["figures"] == {} and trt["release"]
    assert "TensorRT-LLM: hybrid Mamba / GDN" in trt["not_planned"]
    assert doc["exit_code"] == 0
    table = run(*args).stdout
    assert "not planned" in table
    assert f"TensorRT-LLM {trt['release']}: not planned: TensorRT-LLM: hybrid" in " ".join(
        table.split()
    )


def test_explain_trtllm_log(tmp_path: Path) -> None:
    # TensorRT-LLM#2268's two lines.
    log = tmp_path / "trt.log"
    log.write_text(
        "[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: "
        "total: 39.39 GiB, available: 21.89 GiB\n"
        "[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 631\n",
        encoding="utf-8",
    )
    result = run("explain", str(log), "--config", QWEN15_7B)
    assert "the plan reproduces the log" in result.stdout
    log.write_text(log.read_text(encoding="utf-8").replace("631", "640"), encoding="utf-8")
    doc = json.loads(
        run("explain", str(log), "--config", QWEN15_7B, "--format", "json", code=1).stdout
    )
    assert doc["engine"] == "trtllm" and doc["matches"] is False
