"""An item's status in ``check-embeddings`` (table and JSON alike) includes the findings about
the whole file: an item of a dump whose prompt holds no placeholder is not ``ok``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from typer.testing import CliRunner

from mmcli import dump_encoder_outputs
from mmcli.check_embeddings import FileReport, check_file
from mmcli.cli.main import app
from mmcli.findings import Finding

runner = CliRunner()
H = 16


def rows(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, H, generator=torch.Generator().manual_seed(seed))


def run(path: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(
        app, ["check-embeddings", str(path), "--device", "cpu", *args], catch_exceptions=False
    )
    return result.exit_code, result.stdout


def table_statuses(out: str) -> dict[int, str]:
    """Item index → the status column of the items table."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("item "))
    found: dict[int, str] = {}
    for line in lines[start + 1 :]:
        cells = line.split()
        if not cells or not cells[0].isdigit():
            break
        found[int(cells[0])] = cells[-1]
    return found


def json_statuses(doc: dict[str, Any]) -> dict[int, str]:
    (f,) = doc["files"]
    return {item["index"]: item["status"] for item in f["items"]}


def test_no_placeholder_marks_the_items_in_table_and_json(tmp_path: Path) -> None:
    path = dump_encoder_outputs(
        tmp_path / "d.safetensors",
        [rows(6, 1), rows(4, 2)],
        input_ids=[1, 2, 3],
        placeholder_token_ids=[9],
        hidden_size=H,
    )
    code, out = run(path)
    assert code == 1
    assert "no-placeholder" in out
    assert table_statuses(out) == {0: "error", 1: "error"}
    code, text = run(path, "--format", "json")
    doc = json.loads(text)
    assert code == doc["exit_code"] == 1
    (finding,) = doc["files"][0]["findings"]
    assert finding["code"] == "no-placeholder" and finding["item"] is None
    assert json_statuses(doc) == table_statuses(out)


def test_a_healthy_v2_dump_stays_ok(tmp_path: Path) -> None:
    path = dump_encoder_outputs(
        tmp_path / "d.safetensors",
        [rows(3, 1), rows(2, 2)],
        input_ids=[1, 9, 9, 9, 2, 9, 9, 3],
        placeholder_token_ids=[9],
        hidden_size=H,
    )
    code, out = run(path)
    assert code == 0, out
    assert table_statuses(out) == {0: "ok", 1: "ok"}
    assert json_statuses(json.loads(run(path, "--format", "json")[1])) == {0: "ok", 1: "ok"}


def test_an_item_finding_marks_only_its_item(tmp_path: Path) -> None:
    bad = rows(3, 2)
    bad[1, 2] = float("nan")
    path = dump_encoder_outputs(tmp_path / "d.safetensors", [rows(3, 1), bad], hidden_size=H)
    code, out = run(path)
    assert code == 1
    assert table_statuses(out) == {0: "ok", 1: "error"}
    assert json_statuses(json.loads(run(path, "--format", "json")[1])) == {0: "ok", 1: "error"}


def test_a_file_level_hidden_size_finding_marks_the_items(tmp_path: Path) -> None:
    path = dump_encoder_outputs(tmp_path / "d.safetensors", [rows(3, 1), rows(2, 2)])
    code, out = run(path, "--hidden-size", "32")
    assert code == 1 and "hidden-size" in out
    assert table_statuses(out) == {0: "error", 1: "error"}


def test_statuses_rank_errors_over_warnings_and_ignore_info(tmp_path: Path) -> None:
    path = dump_encoder_outputs(tmp_path / "d.safetensors", [rows(3, 1), rows(2, 2), rows(2, 3)])
    report = check_file(path, device=torch.device("cpu"))
    assert report.item_statuses() == {0: "ok", 1: "ok", 2: "ok"}

    def with_findings(*findings: Finding) -> FileReport:
        return FileReport(path="x", status="failed", items=report.items, findings=list(findings))

    info = with_findings(Finding("engine-error", "info", "captured on an error"))
    assert info.item_statuses() == {0: "ok", 1: "ok", 2: "ok"}
    mixed = with_findings(
        Finding("dtype-mix", "warning", "items 0–2 are float32 …"),
        Finding("non-finite", "error", "item 1 …", item=1),
    )
    assert mixed.item_statuses() == {0: "warning", 1: "error", 2: "warning"}
    assert [mixed.item_status(i) for i in range(3)] == ["warning", "error", "warning"]
