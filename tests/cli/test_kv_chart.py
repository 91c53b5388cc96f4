"""The sweep's pictures: the terminal chart, and PNG / SVG files opened and looked at."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from mmcli.cli.kv_share.chart import render_sweep, sweep_chart, sweep_table, write_plot
from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config
from mmcli.kv.options import PlanOptions
from mmcli.kv.whatif.sweep import Sweep, parse_sweep, run_sweep

ROOT = Path(__file__).resolve().parents[2]
GEMMA3N = ROOT / "samples" / "kv" / "gemma3n-e2b-like.json"
QWEN3 = ROOT / "samples" / "kv" / "qwen3-14b-like.json"
GIB = 2**30


def gemma_sweep() -> Sweep:
    config = load_config(GEMMA3N)
    return run_sweep(
        config,
        PlanOptions(memory_bytes=2 * GIB, allow_long_max_model_len=True),
        parse_sweep("max-model-len=4K..128K"),
    )


def test_terminal_chart_fits_80_columns_and_marks_refusals() -> None:
    console = Console(width=80, record=True, no_color=True, file=io.StringIO())
    render_sweep(gemma_sweep(), console)
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "max concurrency (█ with sharing, ▒ without" in text
    bars = [line for line in lines if " │" in line and not line.startswith("│")]
    assert len(bars) == 12  # 6 points × 2 sides
    assert bars[0].startswith("  4,096 │█") and bars[1].startswith("        │▒")
    assert lines[-1].endswith("0.88× ✗")  # 131,072 tokens without sharing: the engine refuses
    widths = [line.count("█") for line in bars[::2]]
    assert widths == sorted(widths, reverse=True)  # concurrency falls as the length grows


def test_no_sharing_means_one_series() -> None:
    config = load_config(QWEN3)
    sweep = run_sweep(config, PlanOptions(max_model_len=32768), parse_sweep("memory=4GiB..16GiB:3"))
    assert not sweep.shares
    assert len(sweep_table(sweep).columns) == 3
    chart = sweep_chart(sweep, 80).plain
    assert "▒" not in chart and chart.count("│") == 3


def test_png_has_size_and_ink(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    path = write_plot(gemma_sweep(), tmp_path / "capacity.png")
    assert path.stat().st_size > 10_000
    pixels = imread(str(path))
    height, width = pixels.shape[:2]
    assert (width, height) == (800, 600)
    rgb = pixels[..., :3]
    dark = (rgb.sum(axis=2) < 1.5).mean()  # lines, text, axes
    coloured = ((rgb.max(axis=2) - rgb.min(axis=2)) > 0.3).mean()  # the two series
    assert 0.005 < dark < 0.5 and coloured > 0.001


def test_svg_is_a_drawing(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    config = load_config(GEMMA3N)
    sweep = run_sweep(config, PlanOptions(max_model_len=8192), parse_sweep("memory=1GiB..8GiB:4"))
    path = write_plot(sweep, tmp_path / "capacity.svg")
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    assert root.get("width") == "576pt" and root.get("height") == "432pt"
    paths = [e for e in root.iter() if e.tag.endswith("path")]
    assert len(paths) > 20
    assert "KV memory per GPU (GiB)" in path.read_text(encoding="utf-8")


def test_plot_refuses_other_formats(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="neither .png nor .svg"):
        write_plot(gemma_sweep(), tmp_path / "x.pdf")


def test_plot_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(InputError, match=r"needs matplotlib"):
        write_plot(gemma_sweep(), tmp_path / "x.png")


def test_plot_is_not_written_into_a_missing_directory(tmp_path: Path) -> None:
    """Like every output: the directory must exist (a typo in it is not silently created)."""
    pytest.importorskip("matplotlib")
    with pytest.raises(InputError, match=r"^cannot write .*out is not a directory$"):
        write_plot(gemma_sweep(), tmp_path / "out" / "capacity.png")
    assert list(tmp_path.iterdir()) == []


def _sweep(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from mmcli.cli.main import app

    result = CliRunner().invoke(app, ["kv-share", "plan", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


ROOT_DIR = Path(__file__).resolve().parents[2]
BROKEN = str(ROOT_DIR / "samples" / "kv" / "broken-map.json")
QWEN = str(ROOT_DIR / "samples" / "kv" / "qwen3-14b-like.json")


def test_a_sweep_of_a_broken_map_exits_1_with_its_errors() -> None:
    # Before: exit 0, the map's errors unsaid (a broken map read as clean).
    code, out, _ = _sweep(BROKEN, "--memory", "10GiB", "--sweep", "max-model-len=4K..16K")
    assert code == 1
    assert "error unknown-target" in out and "map invalid" in out
    code, out, _ = _sweep(
        BROKEN, "--memory", "10GiB", "--sweep", "max-model-len=4K..16K", "--format", "json"
    )
    import json

    doc = json.loads(out)
    assert code == doc["exit_code"] == 1
    assert "unknown-target" in {f["code"] for f in doc["sweep"]["errors"]}


def test_a_sweep_where_no_point_starts_exits_1() -> None:
    args = ["--memory", "1GiB", "--sweep", "max-model-len=400K..800K"]
    code, out, _ = _sweep(QWEN, *args, "--allow-long-max-model-len")
    assert code == 1 and "refuse to start at every point" in out
    code, _, _ = _sweep(QWEN, "--memory", "10GiB", "--sweep", "max-model-len=4K..16K")
    assert code == 0


@pytest.mark.parametrize(
    ("sweep", "words"),
    [
        ("max-model-len=4K..16K:1000000000", "1,000,000,000 points"),  # before: all built
        ("max-model-len=4K..16K:²", "cannot read the step count"),  # before: exit 3
    ],
)
def test_sweep_steps_are_checked_before_any_point_is_built(sweep: str, words: str) -> None:
    code, _, err = _sweep(QWEN, "--memory", "10GiB", "--sweep", sweep)
    assert code == 2
    error, hint = err.splitlines()
    assert words in error and hint.startswith("hint: ")


def test_emit_map_with_a_sweep_is_refused(tmp_path: Path) -> None:
    # Before: the map was silently not written.
    out = tmp_path / "map.json"
    code, _, err = _sweep(
        QWEN, "--memory", "10GiB", "--sweep", "max-model-len=4K..16K", "--emit-map", str(out)
    )
    assert code == 2 and "--emit-map" in err and not out.exists()
