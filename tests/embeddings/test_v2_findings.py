"""The findings that need a dump's version-2 context, on dumps written by the writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from typer.testing import CliRunner

from mmcli.check_embeddings import FileReport, check_file
from mmcli.cli.main import app
from mmcli.dump.io import dump_encoder_outputs, load_dump

HIDDEN = 16


def check(tmp_path: Path, outputs: Any, **kw: Any) -> FileReport:
    path = dump_encoder_outputs(tmp_path / "d.safetensors", outputs, **kw)
    return check_file(path, device=torch.device("cpu"))


def codes(report: FileReport, severity: str = "error") -> set[str]:
    return {f.code for f in report.findings if f.severity == severity}


def rows(n: int, width: int = HIDDEN, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(n, width).to(dtype)


def test_v1_dump_still_reads_and_writes_as_v1(tmp_path: Path) -> None:
    path = dump_encoder_outputs(tmp_path / "v1.safetensors", [rows(4)], hidden_size=HIDDEN)
    assert load_dump(path).metadata["format_version"] == "1"
    assert check_file(path, device=torch.device("cpu")).status == "ok"


def test_no_placeholder_was_reported_ok_before(tmp_path: Path) -> None:
    report = check(tmp_path, [rows(6)], input_ids=[1, 2, 3], placeholder_token_ids=[9])
    assert codes(report) == {"no-placeholder"}


def test_stray_placeholder(tmp_path: Path) -> None:
    ids = [1, *[9] * 4, 2, 9, 3]
    report = check(tmp_path, [rows(4)], input_ids=ids, placeholder_token_ids=[9])
    assert codes(report) == {"stray-placeholder"}
    ranged = check(
        tmp_path, [rows(4)], input_ids=ids, placeholder_token_ids=[9], placeholder_ranges=[(1, 4)]
    )
    assert codes(ranged) == {"stray-placeholder"}
    assert "position(s) 6" in next(f.message for f in ranged.findings if f.severity == "error")


def test_encoder_returned_none(tmp_path: Path) -> None:
    report = check(tmp_path, None, input_ids=[1, 9, 9, 2], placeholder_token_ids=[9])
    assert codes(report) == {"encoder-returned-none"} and report.items == []
    other = check(tmp_path, {"pooler_output": rows(2)})
    assert codes(other) == {"non-tensor-output"}


def test_4d_stacked_grid(tmp_path: Path) -> None:
    grid = torch.randn(2, 2, 3, HIDDEN)
    report = check(tmp_path, grid, input_ids=[9] * 12, placeholder_token_ids=[9])
    assert codes(report) == {"unflattened-grid"}
    assert "matches the placeholders" in report.findings[0].message


def test_tp_sharded_projector(tmp_path: Path) -> None:
    report = check(tmp_path, [rows(4, HIDDEN // 2)], hidden_size=HIDDEN, tp_size=2, tp_rank=1)
    assert codes(report) == {"tp-sharded-width"}


def test_boundary_rows(tmp_path: Path) -> None:
    masks = [torch.ones(4, dtype=torch.bool)] * 2
    report = check(tmp_path, [rows(6), rows(6)], is_embed=masks)
    assert codes(report) == {"boundary-rows"}  # replaces the two per-item mask-count errors
    uneven = check(tmp_path, [rows(6), rows(7)], is_embed=masks)
    assert codes(uneven) == {"mask-count"}


def test_fp16_overflow(tmp_path: Path) -> None:
    item = rows(4, dtype=torch.float16)
    item[1, 3] = float("inf")
    assert codes(check(tmp_path, [item])) == {"fp16-overflow"}
    nan32 = rows(4)
    nan32[0, 0] = float("nan")
    assert codes(check(tmp_path, [nan32])) == {"non-finite"}


def test_deepstack_width_is_not_a_hidden_size_error(tmp_path: Path) -> None:
    wide = [rows(4, 4 * HIDDEN), rows(4, 4 * HIDDEN)]
    declared = check(tmp_path, wide, hidden_size=HIDDEN, deepstack_levels=3)
    assert declared.status == "ok" and not declared.findings
    inferred = check(tmp_path, wide, hidden_size=HIDDEN)
    assert not codes(inferred) and codes(inferred, "warning") == {"deepstack-width"}
    row_width = check(tmp_path, wide, hidden_size=HIDDEN, row_width=4 * HIDDEN)
    assert row_width.status == "ok"
    # a real width error stays one
    assert codes(check(tmp_path, [rows(4, 24)], hidden_size=HIDDEN)) == {"hidden-size"}


def test_engine_error_is_shown(tmp_path: Path) -> None:
    report = check(tmp_path, [rows(2)], engine_error="ValueError: tokens: 3, features: 2")
    assert codes(report, "info") == {"engine-error"}


def test_cli_impl_option(tmp_path: Path) -> None:
    path = dump_encoder_outputs(
        tmp_path / "d.safetensors", [rows(300, 256)], is_embed=[torch.ones(300, dtype=torch.bool)]
    )
    runner = CliRunner()
    for impl in ("reference", "fast"):
        result = runner.invoke(
            app, ["check-embeddings", str(path), "--device", "cpu", "--impl", impl]
        )
        assert result.exit_code == 0, result.output
    bad = runner.invoke(app, ["check-embeddings", str(path), "--impl", "quick"])
    assert bad.exit_code == 2


def test_a_slot_with_no_item_is_a_missing_item(tmp_path: Path) -> None:
    """Two image slots of 4 tokens, one image: item-count, not a typed placeholder."""
    ids = [1, *[9] * 4, 2, *[9] * 4, 3]
    for ranges in (None, [(1, 4)]):
        report = check(
            tmp_path, [rows(4)], input_ids=ids, placeholder_token_ids=[9], placeholder_ranges=ranges
        )
        assert codes(report) == {"item-count"}, [f.message for f in report.findings]
        (finding,) = report.findings
        assert "2 item slots" in finding.message and "positions 6–9" in finding.message
        assert "literal" not in finding.hint
    # with the engine's expected count too: still one item-count finding
    report = check(
        tmp_path, [rows(4)], input_ids=ids, placeholder_token_ids=[9], expected_num_items=2
    )
    assert [f.code for f in report.findings] == ["item-count"]
    # a run shorter than an item is a typed token, as before
    typed = check(tmp_path, [rows(4)], input_ids=[1, *[9] * 4, 2, 9, 3], placeholder_token_ids=[9])
    assert codes(typed) == {"stray-placeholder"}


def test_boundary_rows_of_one_item_say_both_causes(tmp_path: Path) -> None:
    report = check(tmp_path, [rows(5)], is_embed=[torch.ones(4, dtype=torch.bool)])
    (finding,) = report.findings
    assert finding.code == "boundary-rows" and "tokens per item" in finding.message
    assert "tokens per item" in finding.hint
    two = check(tmp_path, [rows(5), rows(5)], is_embed=[torch.ones(4, dtype=torch.bool)] * 2)
    assert "tokens per item" not in two.findings[0].message  # the pattern across items


def test_all_nan_hint_follows_the_mask(tmp_path: Path) -> None:
    """All-NaN rows are the scattered form only where the mask leaves positions out."""
    nan16 = torch.full((4, HIDDEN), float("nan"), dtype=torch.float16)
    whole = check(tmp_path, [nan16], is_embed=[torch.ones(4, dtype=torch.bool)])
    (finding,) = whole.findings
    assert finding.code == "non-finite" and finding.hint.startswith("fp16 overflow")
    assert "not the scattered placeholder form" in finding.hint
    unmasked = check(tmp_path, [nan16])  # NaN in every row: no embedding row kept
    assert unmasked.findings[0].hint.startswith("fp16 overflow")
    scattered = rows(4)
    scattered[[0, 3]] = float("nan")
    mask = torch.tensor([False, True, True, False])
    report = check(tmp_path, [scattered], is_embed=[mask])
    nan = next(f for f in report.findings if f.code == "non-finite")
    assert nan.hint.startswith("2 rows are entirely NaN: the scattered placeholder form")
    fp32 = check(tmp_path, [torch.full((4, HIDDEN), float("nan"))])
    assert fp32.findings[0].hint.startswith("uninitialised memory")


# ----------------------------------------------------- judged against the model's recorded config


def test_double_width_with_no_deepstack_recorded_is_a_hidden_size_error(tmp_path: Path) -> None:
    """An encoder output twice the hidden size: a deepstack guess only while the dump does not
    say (deepstack_levels absent); with the config's 0 levels recorded, the projector's error."""
    wide = [rows(4, 2 * HIDDEN)]
    unknown = check(tmp_path, wide, hidden_size=HIDDEN)
    assert codes(unknown, "warning") == {"deepstack-width"} and codes(unknown) == set()
    known = check(
        tmp_path,
        wide,
        hidden_size=HIDDEN,
        deepstack_levels=0,
        hidden_size_source="text_config.hidden_size",
    )
    assert load_dump(tmp_path / "d.safetensors").metadata["deepstack_levels"] == "0"
    assert codes(known) == {"hidden-size"} and codes(known, "warning") == set()
    (finding,) = known.findings
    assert f"projector outputs {2 * HIDDEN} columns" in finding.message
    assert f"the language model takes {HIDDEN} (config key text_config.hidden_size)" in (
        finding.message
    )
    result = CliRunner().invoke(app, ["check-embeddings", str(tmp_path / "d.safetensors")])
    assert result.exit_code == 1
    # with levels recorded, such rows are simply right
    levels = check(tmp_path, [rows(4, 2 * HIDDEN)], hidden_size=HIDDEN, deepstack_levels=1)
    assert levels.findings == []


def test_mask_position_without_a_placeholder_token(tmp_path: Path) -> None:
    """The item's range is one position off: as many placeholder tokens as rows, but the mask
    marks a text token and leaves a placeholder out."""
    ids = [1, 2, *[9] * 4, 3]
    good = check(
        tmp_path,
        [rows(4)],
        is_embed=[torch.ones(4, dtype=torch.bool)],
        input_ids=ids,
        placeholder_token_ids=[9],
        placeholder_ranges=[(2, 4)],
    )
    assert codes(good) == set()
    shifted = check(
        tmp_path,
        [rows(4)],
        is_embed=[torch.ones(4, dtype=torch.bool)],
        input_ids=ids,
        placeholder_token_ids=[9],
        placeholder_ranges=[(3, 4)],
    )
    assert codes(shifted) == {"mask-not-placeholder"}
    (finding,) = [f for f in shifted.findings if f.severity == "error"]
    assert finding.item == 0 and "position(s) 6" in finding.message
    # recorded positions instead of token ids: nothing says which token each position holds
    positions = check(
        tmp_path,
        [rows(4)],
        is_embed=[torch.ones(4, dtype=torch.bool)],
        placeholder_positions=[2, 3, 4, 5],
        placeholder_ranges=[(3, 4)],
    )
    assert "mask-not-placeholder" not in codes(positions)


def test_item_dtype_against_the_recorded_model_dtype(tmp_path: Path) -> None:
    report = check(tmp_path, [rows(4)], hidden_size=HIDDEN, dtype=torch.bfloat16)
    assert codes(report, "warning") == {"dtype-mix"}
