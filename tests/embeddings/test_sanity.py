"""The engine's three conditions (raised, never asserted) and the in-memory diagnosis."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mmcli import diagnose_mm_encoder_outputs, sanity_check_mm_encoder_outputs
from mmcli.dtypes import torch_model_dtype as parse_dtype
from mmcli.errors import EXIT_FINDINGS, EncoderOutputError, InputError
from mmcli.text import items_text


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        ([rand(4, 8), rand(3, 8)], 2),
        ((rand(4, 8),), 1),
        (rand(3, 4, 8), 3),  # a 3-D tensor passes: its items are 2-D
        ([], 0),
    ],
)
def test_sanity_check_passes(outputs: object, expected: int) -> None:
    sanity_check_mm_encoder_outputs(outputs, expected)


def raised(outputs: object, expected: int) -> EncoderOutputError:
    with pytest.raises(EncoderOutputError) as info:
        sanity_check_mm_encoder_outputs(outputs, expected)
    assert info.value.exit_code == EXIT_FINDINGS and info.value.hint
    return info.value


def test_condition_1_type() -> None:
    error = raised({"a": rand(2, 2)}, 1)
    assert error.message == (
        "multimodal embeddings must be a list or tuple of 2-D tensors, or one 3-D tensor; got dict"
    )


def test_condition_2_count() -> None:
    error = raised([rand(4, 8)], 2)
    assert error.message.startswith("expected 2 multimodal embedding item(s)")
    assert error.message.endswith("returned 1")
    assert "off by one" in (error.hint or "")


def test_condition_3_ndim() -> None:
    error = raised([rand(4, 8), rand(1, 4, 8)], 2)
    assert error.message == (
        "item 1 has shape (1, 4, 8) (3-D); every item must be 2-D (num_embeds, hidden)"
    )
    assert error.hint == "batch dim kept: the item is (1, tokens, hidden); drop it with .squeeze(0)"
    assert "spatial grid" in (raised([rand(1, 2, 2, 8)], 1).hint or "")
    assert "pooled" in (raised([rand(8)], 1).hint or "")


def test_raised_under_python_O() -> None:
    import subprocess
    import sys

    code = (
        "import torch, mmcli\n"
        "try:\n    mmcli.sanity_check_mm_encoder_outputs([torch.ones(3)], 1)\n"
        "except mmcli.EncoderOutputError:\n    print('raised')\n"
    )
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "raised"


def test_diagnose_reports_every_problem_not_the_first() -> None:
    nan = rand(3, 8, seed=2)
    nan[0, 0] = float("nan")
    findings = diagnose_mm_encoder_outputs(
        [rand(1, 4, 8), nan, rand(5, 16, seed=3)],
        4,
        is_embed=[None, None, torch.ones(6, dtype=torch.bool)],
        hidden_size=8,
    )
    assert [(f.code, f.item) for f in findings] == [
        ("item-count", None),
        ("item-ndim", 0),
        ("non-finite", 1),
        ("mask-count", 2),
        ("hidden-size", 2),
    ]
    assert all(f.hint for f in findings)


def test_diagnose_clean_outputs_give_no_findings() -> None:
    mask = torch.tensor([1, 0, 1, 1, 1], dtype=torch.bool)
    findings = diagnose_mm_encoder_outputs(
        [rand(4, 8), rand(3, 8, seed=1)],
        2,
        is_embed=[mask, None],
        hidden_size=8,
        model_dtype="fp32",
    )
    assert findings == []


def test_diagnose_stacked_and_bad_arguments() -> None:
    assert [f.code for f in diagnose_mm_encoder_outputs(rand(2, 3, 8), 2)] == ["stacked-3d"]
    codes = [f.code for f in diagnose_mm_encoder_outputs(rand(6, 8), 2)]
    assert codes == ["stacked-ndim", "item-count"]
    with pytest.raises(InputError):
        diagnose_mm_encoder_outputs("nope")
    with pytest.raises(InputError):
        diagnose_mm_encoder_outputs([rand(2, 2), "x"])


def test_one_row_item_names_the_silent_broadcast() -> None:
    (finding,) = diagnose_mm_encoder_outputs(
        [rand(1, 8)], 1, is_embed=[torch.ones(4, dtype=torch.bool)]
    )
    assert finding.message == (
        "mask for item 0 has 4 True positions but the item has 1 embedding rows; the engine "
        "would silently broadcast this 1-row item to every position"
    )


def test_masks_beyond_items_stand_in_for_the_expected_count() -> None:
    masks = [torch.ones(4, dtype=torch.bool)] * 3
    findings = diagnose_mm_encoder_outputs([rand(4, 8)], is_embed=masks)
    assert findings[0].code == "item-count"
    assert findings[0].message.startswith("1 item(s) but 3 placeholder masks for")


def test_stored_placeholders_checked_against_the_mask() -> None:
    emb, mask = rand(3, 4), torch.tensor([1, 0, 1, 1], dtype=torch.bool)
    good = emb.new_full((4, 4), float("nan"))
    good[mask] = emb
    assert diagnose_mm_encoder_outputs([emb], 1, is_embed=[mask], placeholders=[good]) == []
    bad = good.clone()
    bad[1] = 0.0
    (finding,) = diagnose_mm_encoder_outputs([emb], 1, is_embed=[mask], placeholders=[bad])
    assert finding.code == "roundtrip"
    assert finding.message.endswith("1 of 1 non-embedding positions are not NaN")


def test_helpers() -> None:
    assert items_text([0, 1, 2, 5]) == "items 0–2, 5"
    assert items_text([3]) == "item 3"
    assert parse_dtype("torch.bfloat16") is torch.bfloat16
    with pytest.raises(InputError):
        parse_dtype("int8")


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(st.integers(0, 6), min_size=1, max_size=4),
    extra=st.integers(0, 3),
    data=st.data(),
)
def test_consistent_random_items_have_no_errors(
    rows: list[int], extra: int, data: st.DataObject
) -> None:
    items, masks = [], []
    for i, n in enumerate(rows):
        flags = [True] * n + [False] * extra
        order = data.draw(st.permutations(flags))
        masks.append(torch.tensor(order, dtype=torch.bool))
        items.append(rand(n, 4, seed=i) + 1.0)
    findings = diagnose_mm_encoder_outputs(items, len(items), is_embed=masks, hidden_size=4)
    assert [f for f in findings if f.severity == "error"] == []


def test_scatter_failure_is_a_roundtrip_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    from mmcli.embeddings.diagnosis import roundtrip

    def broken(*args: object, **kwargs: object) -> torch.Tensor:
        raise RuntimeError("no kernel for this dtype")

    monkeypatch.setattr(roundtrip, "scatter_mm_placeholders", broken)
    (finding,) = diagnose_mm_encoder_outputs([rand(2, 4)], 1, is_embed=[torch.ones(2).bool()])
    assert finding.code == "roundtrip"
    assert finding.message == (
        "scatter/gather of item 0 (float32 on cpu) failed: no kernel for this dtype"
    )


def test_narrow_float_items_are_checked_without_crashing() -> None:
    item = rand(4, 8).to(torch.float8_e4m3fn)
    findings = diagnose_mm_encoder_outputs([item], 1, is_embed=[torch.ones(4).bool()])
    assert [f.code for f in findings if f.severity == "error"] == []


@pytest.mark.parametrize("impl", ["reference", "fast"])
def test_diagnose_a_one_by_one_strided_view(impl: str) -> None:
    # The round-trip comparison used to raise RuntimeError on this view instead of judging it.
    t = torch.zeros(1, 4, dtype=torch.bfloat16)[:, ::2][:, :1]
    mask = torch.ones(1, dtype=torch.bool)
    findings = diagnose_mm_encoder_outputs([t], 1, is_embed=[mask], impl=impl)  # type: ignore[arg-type]
    assert [(f.code, f.item) for f in findings] == [("zero-rows", 0)]
    t = torch.ones(1, 4, dtype=torch.bfloat16)[:, ::2][:, :1]
    assert diagnose_mm_encoder_outputs([t], 1, is_embed=[mask], impl=impl) == []  # type: ignore[arg-type]
