"""`mmcli kv-share plan -pp`: the stages end to end, their JSON, and the options refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app

SAMPLE = str(Path(__file__).resolve().parents[2] / "samples" / "kv" / "qwen3-14b-like.json")
runner = CliRunner()


def plan(*args: str) -> Any:
    return runner.invoke(app, ["kv-share", "plan", SAMPLE, *args], catch_exceptions=False)


def test_three_stages_as_json() -> None:
    # 40 layers → [13, 14, 13]; 14 × 65,536 B per block on the middle stage sets the count.
    result = plan("--memory", "10GiB", "-pp", "3", "--block-size", "16", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    stages = doc["pipeline"]["stages"]["with_sharing"]
    assert doc["pipeline"]["pipeline_parallel_size"] == 3
    assert [(s["first_layer"], s["last_layer"]) for s in stages] == [(0, 12), (13, 26), (27, 39)]
    assert [s["bytes_per_block"] for s in stages] == [851_968, 917_504, 851_968]
    assert doc["memory"]["num_blocks"]["with_sharing"] == 10 * 2**30 // 917_504
    assert doc["memory"]["bytes_per_block"]["with_sharing"] == 917_504


def test_partition_moves_layers_between_stages() -> None:
    result = plan(
        "--memory", "10GiB", "-pp", "2", "--pp-layer-partition", "10,30", "--format", "json"
    )
    assert result.exit_code == 0, result.stderr
    stages = json.loads(result.stdout)["pipeline"]["stages"]["with_sharing"]
    assert [s["owners"] for s in stages] == [10, 30]


def test_the_estimate_divides_weights_over_every_stage() -> None:
    result = plan("--gpu", "80GiB", "--weights", "40GiB", "-pp", "2", "--format", "json")
    assert result.exit_code == 0, result.stderr
    estimate = json.loads(result.stdout)["memory_estimate"]
    assert estimate["pipeline_parallel_size"] == 2


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["-pp", "3", "--pp-layer-partition", "8,12"],
            "gives 2 counts for --pipeline-parallel-size 3",
        ),
        (["-pp", "2", "--pp-layer-partition", "1,x"], "cannot read '1,x' as layer counts"),
        (["-pp", "2", "--pp-layer-partition", "10,10"], "add up to the model's 40 layers"),
        (["-pp", "2", "--vllm-version", "0.10"], "before 0.11 each stage groups its own layers"),
        (["-pp", "0"], "--pipeline-parallel-size must be a positive integer"),
        (["-pp", "41"], "only 40 decoder layers"),
    ],
)
def test_bad_pipeline_options(args: list[str], error: str) -> None:
    result = plan("--memory", "10GiB", *args)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert error in lines[0]


def test_more_stages_than_the_stated_limit_are_refused() -> None:
    """-pp beyond MAX_PIPELINE_STAGES: exit 2 naming the limit, checked with the options
    (a million stages of a million-layer config took minutes); the limit itself plans."""
    from mmcli.kv.options import MAX_PIPELINE_STAGES

    result = plan("--memory", "80GiB", "-pp", str(MAX_PIPELINE_STAGES + 1))
    assert result.exit_code == 2
    assert f"at most {MAX_PIPELINE_STAGES:,} pipeline stages" in result.stderr
    assert "hint:" in result.stderr
