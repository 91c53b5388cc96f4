"""The capture machinery every engine shares: modes, environment, budget, naming, writing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mmcli.capture._common import (
    DEFAULT_MAX_DUMPS,
    CaptureContext,
    Capturer,
    Settings,
    parse_max,
    parse_mode,
    rank_selected,
)
from mmcli.capture.settings import parse_ranks
from mmcli.check_embeddings import check_file
from mmcli.dump.io import load_dump
from mmcli.errors import InputError

HEALTHY = [torch.randn(4, 8), torch.randn(4, 8)]
MASKS = [torch.ones(4, dtype=torch.bool)] * 2


def test_modes(tmp_path: Path) -> None:
    broken = [torch.randn(1, 4, 8)]  # batch dim kept: an error finding
    for mode, healthy_written, broken_written in (
        ("failure", 0, 0),
        ("check", 0, 1),
        ("always", 1, 1),
    ):
        cap = Capturer(tmp_path / mode, mode=mode)
        assert (cap.record(HEALTHY, is_embed=MASKS) is not None) == bool(healthy_written)
        assert (cap.record(broken) is not None) == bool(broken_written)
        path = cap.record(HEALTHY, error=RuntimeError("engine said no"))
        assert path is not None and path.name.endswith("-failure.safetensors")
        assert load_dump(path).metadata["engine_error"] == "RuntimeError: engine said no"


def test_from_env_is_inert_without_a_directory(tmp_path: Path) -> None:
    assert Capturer.from_env(engine="vllm", environ={}) is None
    assert Capturer.from_env(engine="vllm", environ={"MMCLI_DUMP_DIR": ""}) is None
    env = {"MMCLI_DUMP_DIR": str(tmp_path), "MMCLI_DUMP_MODE": "ALWAYS", "MMCLI_DUMP_MAX": "3"}
    cap = Capturer.from_env(engine="vllm", rank=1, environ=env)
    assert cap is not None and cap.mode == "always" and cap.max_dumps == 3 and cap.rank == 1
    ranks = {**env, "MMCLI_DUMP_RANKS": "0,2-3"}
    assert Capturer.from_env(engine="vllm", rank=1, environ=ranks) is None
    assert Capturer.from_env(engine="vllm", rank=3, environ=ranks) is not None


def test_parsers() -> None:
    assert parse_mode(None) == "failure" and parse_mode(" Check ") == "check"
    with pytest.raises(InputError, match="not one of"):
        parse_mode("sometimes")
    assert parse_max("") == DEFAULT_MAX_DUMPS and parse_max("0") == 0
    with pytest.raises(InputError):
        parse_max("-1")
    assert rank_selected(5, None) and rank_selected(5, "all") and not rank_selected(5, "0-4")
    with pytest.raises(InputError):
        rank_selected(0, "zero")


@pytest.mark.parametrize("spec", ["0,garbage", "0,", "0,,1", "1-0", "0-", "-1", "0;1", "٣"])
def test_a_bad_rank_list_is_refused_whole(spec: str) -> None:
    """Every part is checked, not only those before the rank's match (issue 23, item 16)."""
    with pytest.raises(InputError, match="MMCLI_DUMP_RANKS"):
        rank_selected(0, spec)
    env = {"MMCLI_DUMP_DIR": "/nonexistent", "MMCLI_DUMP_RANKS": spec}
    assert Settings.from_env(env) is None  # torch is imported here: checked at once


def test_rank_lists() -> None:
    assert rank_selected(3, " 0 , 2-3 ") and not rank_selected(1, "0,2-3")
    assert rank_selected(None, "0") and parse_ranks("ALL") is None
    assert parse_ranks("0,2-3") == [(0, 0), (2, 3)]


def test_dump_max_zero_writes_nothing(tmp_path: Path) -> None:
    cap = Capturer(tmp_path / "d", mode="always", max_dumps=parse_max("0"))
    assert cap.record(HEALTHY) is None and cap.skipped == 1
    assert not (tmp_path / "d").exists()


def test_budget_directory_and_names(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    cap = Capturer(target, mode="always", max_dumps=2, engine="sglang", rank=0)
    ctx = CaptureContext(phase="profile")
    paths = [cap.record(HEALTHY, context=ctx) for _ in range(3)]
    assert paths[2] is None and cap.skipped == 1 and cap.remaining == 0
    assert (target.stat().st_mode & 0o777) == 0o700
    names = sorted(p.name for p in target.iterdir())
    assert names == sorted(p.name for p in paths if p is not None)  # no temporary file left
    assert all(n.startswith("sglang-profile-r0-p") for n in names)
    assert names[0].endswith("-0000-always.safetensors")


def test_record_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cap = Capturer(blocker / "dumps", mode="always")
    with pytest.warns(RuntimeWarning, match="could not write"):
        assert cap.record(HEALTHY) is None
    assert cap.written == []


def test_merged_layout_round_trip(tmp_path: Path) -> None:
    merged = torch.randn(7, 8)
    cap = Capturer(tmp_path, mode="always", engine="sglang")
    ctx = CaptureContext(
        input_ids=[1, *[9] * 3, 2, *[9] * 4],
        placeholder_token_ids=[9],
        placeholder_ranges=[(1, 3), (5, 4)],
        hidden_size=8,
        tp_size=2,
        tp_rank=1,
        versions={"sglang": "0.5.0"},
    )
    path = cap.record(merged, item_counts=[3, 4], context=ctx)
    assert path is not None
    dump = load_dump(path)
    assert dump.layout.merged and dump.num_items == 2 and dump.item_shape(1) == (4, 8)
    assert torch.equal(dump.embedding(1), merged[3:])
    meta = dump.metadata
    assert meta["layout"] == "merged" and meta["version_sglang"] == "0.5.0"
    assert (meta["tp_size"], meta["tp_rank"], meta["engine"]) == ("2", "1", "sglang")
    report = check_file(path, device=torch.device("cpu"))
    assert report.status == "ok", [f.message for f in report.findings]


def test_capture_package_imports_no_torch() -> None:
    code = "import sys, mmcli, mmcli.capture; assert 'torch' not in sys.modules, 'torch'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_zero_d_stacked_dump_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    """A 0-D stacked mm_embeddings (another writer's) is stacked-ndim, exit 1 (issue 23, 15)."""
    from safetensors.torch import save_file
    from typer.testing import CliRunner

    from mmcli.cli.main import app

    path = tmp_path / "scalar.safetensors"
    save_file({"mm_embeddings": torch.tensor(1.0)}, str(path), {"format": "mm_dump"})
    result = CliRunner().invoke(app, ["check-embeddings", str(path), "--device", "cpu"])
    assert result.exit_code == 1, result.output
    assert "stacked-ndim" in result.output


def test_capture_records_a_zero_d_encoder_output_as_its_return_type(tmp_path: Path) -> None:
    """An encoder returning a 0-d tensor: no 0-D mm_embeddings is written (issue 23, 15)."""
    cap = Capturer(tmp_path, mode="failure")
    path = cap.record(torch.tensor(3.0), error=RuntimeError("no"))
    assert path is not None
    dump = load_dump(path)
    assert "mm_embeddings" not in dump.header.tensors and dump.num_items == 0
    assert dump.metadata["encoder_return_type"] == "Tensor[0-d float32]"
    codes = [f.code for f in check_file(path, device=torch.device("cpu")).findings]
    assert "non-tensor-output" in codes
