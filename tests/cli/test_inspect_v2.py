"""``mmcli inspect`` names the dump-format version the file declares, and counts in words."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from mmcli import dump_encoder_outputs
from mmcli.cli.main import app
from mmcli.dump.summary import summarize

runner = CliRunner()


def last_line(path: Path) -> str:
    result = runner.invoke(app, ["inspect", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()[-1]


def test_a_v1_dump_says_v1_and_one_item(tmp_path: Path) -> None:
    path = dump_encoder_outputs(tmp_path / "v1.safetensors", [torch.ones(4, 8)], hidden_size=8)
    assert summarize(path).format_version == "1"
    assert last_line(path) == "mm_dump v1 dump: 1 item (per-item tensors), no masks"


def test_a_v2_dump_says_v2(tmp_path: Path) -> None:
    path = dump_encoder_outputs(
        tmp_path / "v2.safetensors",
        [torch.ones(4, 8), torch.ones(2, 8)],
        is_embed=[torch.ones(4, dtype=torch.bool), None],
        input_ids=[1, 9, 9, 9, 9, 2, 9, 9],
        placeholder_token_ids=[9],
        hidden_size=8,
    )
    summary = summarize(path)
    assert summary.format_version == summary.read_as_version == "2"
    assert last_line(path) == (
        "mm_dump v2 dump: 2 items (per-item tensors), masks for 1, sequence context (input_ids)"
    )
    # The JSON document states the version in the metadata it lists.
    result = runner.invoke(app, ["inspect", str(path), "--format", "json"])
    assert json.loads(result.stdout)["metadata"]["format_version"] == "2"


def test_a_v2_merged_dump_names_its_layout(tmp_path: Path) -> None:
    path = dump_encoder_outputs(
        tmp_path / "merged.safetensors",
        torch.ones(7, 8),
        item_counts=[3, 4],
        placeholder_ranges=[(1, 3), (5, 4)],
    )
    assert last_line(path) == (
        "mm_dump v2 dump: 2 items (one merged tensor split by item_counts), no masks, "
        "sequence context (placeholder_ranges)"
    )


def test_a_v2_dump_of_a_non_tensor_return(tmp_path: Path) -> None:
    path = dump_encoder_outputs(tmp_path / "none.safetensors", None)
    assert last_line(path) == "mm_dump v2 dump: 0 items (the encoder returned NoneType), no masks"


def test_a_dump_without_format_version_says_so(tmp_path: Path) -> None:
    path = tmp_path / "bare.safetensors"
    save_file({"mm_embeddings.0": torch.ones(2, 2), "mm_embeddings.1": torch.ones(3, 2)}, path)
    summary = summarize(path)
    assert summary.format_version is None and summary.read_as_version == "1"
    assert last_line(path) == (
        "mm_dump dump (no format_version: read as v1): 2 items (per-item tensors), no masks"
    )


def test_one_tensor_is_not_tensors(tmp_path: Path) -> None:
    path = tmp_path / "one.safetensors"
    save_file({"weight": torch.ones(2)}, path)
    result = runner.invoke(app, ["inspect", str(path)], catch_exceptions=False)
    assert ", 1 tensor, " in result.stdout.splitlines()[0]
