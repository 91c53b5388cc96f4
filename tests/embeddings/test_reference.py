"""``same_bits`` on any layout, and the names the ops module keeps for its callers."""

from __future__ import annotations

import math
from typing import get_args

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from mmcli.embeddings import ops, reference
from mmcli.embeddings.reference import same_bits

FLOATS = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
]
#: An integer dtype of each element size: its equality compares stored bit patterns.
INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def as_ints(t: torch.Tensor) -> torch.Tensor:
    """The same elements, read as integers of the same width (works on any strided view)."""
    base = t.as_strided((t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)
    ints = base.view(INT_OF_SIZE[t.element_size()])
    return ints.as_strided(t.shape, t.stride(), t.storage_offset())


def test_same_bits_compares_nan_payloads_and_layouts() -> None:
    a = torch.full((4, 6), math.nan)
    assert not torch.equal(a, a)  # why a bitwise compare is needed at all
    assert same_bits(a, a.clone())
    assert same_bits(a.t(), a.t().contiguous())  # non-contiguous, NaN everywhere
    other_nan = a.clone().view(torch.int32)
    other_nan[0, 0] ^= 1  # a different NaN payload
    assert not same_bits(a, other_nan.view(torch.float32))
    assert not same_bits(a, a.to(torch.float64))
    assert not same_bits(a, a[:2])
    assert same_bits(a[:0], a[:0])


def test_same_bits_on_a_one_by_one_strided_view() -> None:
    # A 1x1 view counts as contiguous whatever its strides, so .contiguous() keeps stride 2
    # and reading its bytes used to raise RuntimeError.
    t = torch.zeros(1, 4, dtype=torch.bfloat16)[:, ::2][:, :1]
    assert t.stride() == (4, 2) and t.is_contiguous()
    assert same_bits(t, torch.zeros(1, 1, dtype=torch.bfloat16))
    assert same_bits(torch.zeros(1, 1, dtype=torch.bfloat16), t)
    assert not same_bits(t, torch.full((1, 1), -0.0, dtype=torch.bfloat16))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_same_bits_at_an_unaligned_storage_offset(dtype: torch.dtype) -> None:
    # Contiguous, but starting part-way into an 8-byte word: no view as int64 is possible.
    base = torch.arange(17, dtype=dtype)
    assert same_bits(base[1:], base[1:].clone())
    assert same_bits(base[1:9], base[9:17] - 8)
    assert not same_bits(base[1:9], base[2:10])


@st.composite
def strided_views(draw: st.DrawFn) -> tuple[torch.Tensor, tuple[int, ...], tuple[int, ...], int]:
    """A random-bits storage and a view's layout on it: any shape (size-0 and size-1 dims
    included), strides (0 and overlapping included), storage offset."""
    dtype = draw(st.sampled_from(FLOATS))
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    strides = tuple(draw(st.lists(st.integers(0, 6), min_size=ndim, max_size=ndim)))
    offset = draw(st.integers(0, 9))
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) if all(shape) else 0
    size = offset + span + draw(st.integers(0, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    raw = torch.randint(
        0,
        256,
        (max(size, 1) * torch.empty((), dtype=dtype).element_size(),),
        generator=torch.Generator().manual_seed(seed),
        dtype=torch.uint8,
    )
    return raw.view(dtype), shape, strides, offset


@given(
    view=strided_views(),
    flip=st.one_of(st.none(), st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 7))),
    other_layout=st.sampled_from(["same", "contiguous", "clone"]),
)
def test_same_bits_agrees_with_an_integer_compare_on_any_view(
    view: tuple[torch.Tensor, tuple[int, ...], tuple[int, ...], int],
    flip: tuple[float, int] | None,
    other_layout: str,
) -> None:
    storage, shape, strides, offset = view
    a = storage.as_strided(shape, strides, offset)
    changed = storage.clone()
    if flip is not None:  # one bit of the storage, inside the view or not
        raw = changed.view(torch.uint8)
        where, bit = flip
        raw[int(where * raw.numel())] ^= 1 << bit
    b = changed.as_strided(shape, strides, offset)
    if other_layout == "contiguous":
        b = b.contiguous()
    elif other_layout == "clone":
        b = b.clone()
    expected = bool(torch.equal(as_ints(a), as_ints(b)))
    assert same_bits(a, b) is expected
    assert same_bits(b, a) is expected
    assert same_bits(a, a)


def test_ops_keeps_the_names_its_callers_use() -> None:
    for name in (
        "check_count",
        "check_gather_inputs",
        "check_mask",
        "check_scatter_inputs",
        "gather_reference",
        "same_bits",
        "scatter_reference",
    ):
        assert getattr(ops, name) is getattr(reference, name), name
    assert ops.IMPLS == ("reference", "fast")
    assert set(ops.IMPLS) == set(get_args(ops.Impl))
