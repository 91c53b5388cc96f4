"""scatter/gather: equal to an independent reference on valid input, strict on invalid input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import mmcli
from mmcli.errors import InputError

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def naive_scatter(embeds: torch.Tensor, mask: list[bool]) -> torch.Tensor:
    """Row by row, in plain Python: the behaviour the engine documents."""
    rows = []
    k = 0
    for is_embed in mask:
        if is_embed:
            rows.append(embeds[k])
            k += 1
        else:
            rows.append(torch.full((embeds.shape[1],), math.nan, dtype=embeds.dtype))
    if not rows:
        return torch.empty((0, embeds.shape[1]), dtype=embeds.dtype)
    return torch.stack(rows)


def naive_gather(placeholders: torch.Tensor, mask: list[bool]) -> torch.Tensor:
    rows = [placeholders[i] for i, keep in enumerate(mask) if keep]
    if not rows:
        return torch.empty((0, placeholders.shape[1]), dtype=placeholders.dtype)
    return torch.stack(rows)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Exact equality including NaN positions (compares the stored bit patterns)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    as_int = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
    return torch.equal(a.contiguous().view(as_int[a.dtype]), b.contiguous().view(as_int[b.dtype]))


masks = st.one_of(
    st.lists(st.booleans(), min_size=0, max_size=64),
    st.integers(0, 64).map(lambda n: [False] * n),
    st.integers(0, 64).map(lambda n: [True] * n),
    # image-break style: one non-embed token after every row of patches
    st.tuples(st.integers(1, 8), st.integers(1, 8)).map(
        lambda rc: ([True] * rc[1] + [False]) * rc[0]
    ),
)


@given(
    mask=masks,
    hidden=st.integers(1, 512),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**32 - 1),
)
def test_scatter_gather_match_independent_reference(
    mask: list[bool], hidden: int, dtype: torch.dtype, seed: int
) -> None:
    gen = torch.Generator().manual_seed(seed)
    embeds = torch.randn(sum(mask), hidden, generator=gen).to(dtype)
    is_embed = torch.tensor(mask, dtype=torch.bool)

    scattered = mmcli.scatter_mm_placeholders(embeds, is_embed)
    assert same_bits(scattered, naive_scatter(embeds, mask))
    gathered = mmcli.gather_mm_placeholders(scattered, is_embed)
    assert same_bits(gathered, naive_gather(scattered, mask))
    assert same_bits(gathered, embeds)


def test_scatter_fills_nan_and_keeps_order() -> None:
    embeds = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = mmcli.scatter_mm_placeholders(embeds, torch.tensor([False, True, False, True]))
    assert out[1].tolist() == [1.0, 2.0]
    assert out[3].tolist() == [3.0, 4.0]
    assert torch.isnan(out[0]).all() and torch.isnan(out[2]).all()


def test_gather_returns_a_copy() -> None:
    placeholders = torch.zeros(3, 2)
    out = mmcli.gather_mm_placeholders(placeholders, torch.tensor([True, True, True]))
    out += 1
    assert placeholders.sum() == 0


def test_none_mask_returns_the_same_object() -> None:
    embeds = torch.randn(3, 4)
    assert mmcli.scatter_mm_placeholders(embeds, None) is embeds
    assert mmcli.gather_mm_placeholders(embeds, None) is embeds


def test_empty_item_and_all_false_mask() -> None:
    out = mmcli.scatter_mm_placeholders(torch.empty(0, 8), torch.zeros(5, dtype=torch.bool))
    assert out.shape == (5, 8) and torch.isnan(out).all()
    assert mmcli.gather_mm_placeholders(out, torch.zeros(5, dtype=torch.bool)).shape == (0, 8)


def error_message(fn: object, *args: object) -> str:
    with pytest.raises(InputError) as info:
        fn(*args)  # type: ignore[operator]
    return str(info.value)


@pytest.mark.parametrize("op", ["scatter", "gather"])
def test_mask_not_1d(op: str) -> None:
    fn = getattr(mmcli, f"{op}_mm_placeholders")
    mask = torch.ones(4, 2, dtype=torch.bool)
    assert error_message(fn, torch.randn(4, 2), mask) == (
        "is_embed must be 1-D (num_placeholders,), got shape (4, 2)"
    )


@pytest.mark.parametrize("op", ["scatter", "gather"])
def test_mask_not_bool(op: str) -> None:
    fn = getattr(mmcli, f"{op}_mm_placeholders")
    mask = torch.tensor([1, 0, 1, 1])
    assert error_message(fn, torch.randn(3, 2), mask) == (
        "is_embed must be torch.bool, got torch.int64"
    )


def test_mask_not_a_tensor() -> None:
    assert error_message(mmcli.scatter_mm_placeholders, torch.randn(1, 2), [True]) == (
        "is_embed must be a torch.Tensor or None, got list"
    )


def test_count_mismatch_names_both_numbers() -> None:
    mask = torch.tensor([True] * 575 + [False] * 25)
    assert error_message(mmcli.scatter_mm_placeholders, torch.randn(576, 8), mask) == (
        "is_embed has 575 True positions but embeds has 576 rows"
    )


def test_one_row_embeds_does_not_broadcast() -> None:
    mask = torch.tensor([True, True, False])
    with pytest.raises(InputError, match="has 2 True positions but embeds has 1 rows") as info:
        mmcli.scatter_mm_placeholders(torch.randn(1, 4), mask)
    assert "silently broadcast" in str(info.value)


def test_gather_mask_length_mismatch() -> None:
    mask = torch.tensor([True, False, True])
    assert error_message(mmcli.gather_mm_placeholders, torch.randn(4, 2), mask) == (
        "is_embed covers 3 placeholder positions but placeholders has 4 rows"
    )


@pytest.mark.parametrize("op", ["scatter", "gather"])
def test_integer_embeddings(op: str) -> None:
    fn = getattr(mmcli, f"{op}_mm_placeholders")
    mask = torch.tensor([True, True])
    assert error_message(fn, torch.ones(2, 3, dtype=torch.int32), mask) == (
        f"{'embeds' if op == 'scatter' else 'placeholders'} has integer dtype torch.int32, "
        "which cannot hold the NaN fill of non-embedding positions"
    )


def test_embeds_not_2d() -> None:
    mask = torch.tensor([True])
    assert error_message(mmcli.scatter_mm_placeholders, torch.randn(1, 1, 4), mask) == (
        "embeds must be 2-D (rows, hidden), got shape (1, 1, 4)"
    )


def test_different_devices() -> None:
    mask = torch.tensor([True, True], device="meta")
    assert error_message(mmcli.scatter_mm_placeholders, torch.randn(2, 3), mask) == (
        "embeds is on cpu but is_embed is on meta"
    )


def test_unknown_impl() -> None:
    with pytest.raises(InputError, match="unknown implementation 'cuda-graph'"):
        mmcli.scatter_mm_placeholders(torch.randn(1, 1), None, impl="cuda-graph")  # type: ignore[arg-type]


def test_error_carries_a_hint_and_is_a_value_error() -> None:
    with pytest.raises(ValueError) as info:
        mmcli.scatter_mm_placeholders(torch.randn(2, 2), torch.tensor([1, 1]))
    assert isinstance(info.value, InputError)
    assert info.value.hint is not None and "indices" in info.value.hint


@pytest.mark.cuda
def test_reference_on_cuda_matches_cpu() -> None:
    mask = torch.tensor([True, False] * 300)
    embeds = torch.randn(300, 64, dtype=torch.bfloat16)
    cpu = mmcli.scatter_mm_placeholders(embeds, mask)
    gpu = mmcli.scatter_mm_placeholders(embeds.cuda(), mask.cuda())
    assert same_bits(gpu.cpu(), cpu)
    assert same_bits(mmcli.gather_mm_placeholders(gpu, mask.cuda()).cpu(), embeds)


@pytest.mark.parametrize("impl", ["reference", "fast"])
def test_gather_checks_a_given_num_embeds(impl: str) -> None:
    mask = torch.tensor([True, False, True])
    placeholders = torch.randn(3, 4)
    out = mmcli.gather_mm_placeholders(placeholders, mask, impl=impl, num_embeds=2)  # type: ignore[arg-type]
    assert torch.equal(out, placeholders[[0, 2]])
    with pytest.raises(InputError, match="is_embed has 2 True positions but num_embeds is 3"):
        mmcli.gather_mm_placeholders(placeholders, mask, impl=impl, num_embeds=3)  # type: ignore[arg-type]
