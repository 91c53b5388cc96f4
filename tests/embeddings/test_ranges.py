"""Placeholder-range helpers: windowed gathers add up to the full gather."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import mmcli
from mmcli.errors import InputError


def test_cumsum_and_counts() -> None:
    mask = torch.tensor([False, True, True, False, True])
    assert mmcli.embeds_cumsum(mask).tolist() == [0, 1, 2, 2, 3]
    assert mmcli.num_embeds(5, mask) == 3
    assert mmcli.num_embeds(7) == 7


def test_index_range_for_windows() -> None:
    mask = torch.tensor([False, True, True, False, True])
    assert mmcli.embeds_index_range(0, 5, length=5, is_embed=mask) == (0, 3)
    assert mmcli.embeds_index_range(2, 4, length=5, is_embed=mask) == (1, 2)
    assert mmcli.embeds_index_range(0, 1, length=5, is_embed=mask) == (0, 0)
    assert mmcli.embeds_index_range(3, 3, length=5, is_embed=mask) == (2, 2)
    assert mmcli.embeds_index_range(1, 4, length=5) == (1, 4)


def test_range_object() -> None:
    rng = mmcli.PlaceholderRange(offset=10, length=4, is_embed=torch.tensor([1, 0, 1, 1]).bool())
    assert rng.num_embeds == 3
    assert rng.embeds_index_range(1, 3) == (1, 2)


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (-1, 2, "token window [-1, 2) is not inside the placeholder range [0, 5)"),
        (3, 2, "token window [3, 2) is not inside the placeholder range [0, 5)"),
        (0, 6, "token window [0, 6) is not inside the placeholder range [0, 5)"),
    ],
)
def test_bad_windows(start: int, end: int, message: str) -> None:
    with pytest.raises(InputError) as info:
        mmcli.embeds_index_range(start, end, length=5, is_embed=torch.ones(5, dtype=torch.bool))
    assert str(info.value) == message


def test_mask_length_must_match_range() -> None:
    with pytest.raises(InputError, match="is_embed covers 4 positions but the range length is 5"):
        mmcli.PlaceholderRange(offset=0, length=5, is_embed=torch.ones(4, dtype=torch.bool))


def test_window_needs_enough_rows() -> None:
    with pytest.raises(InputError, match="needs embeds rows up to 3 but embeds has 2 rows"):
        mmcli.gather_window(torch.randn(2, 4), 0, 3, torch.ones(3, dtype=torch.bool))


@given(
    mask=st.lists(st.booleans(), min_size=0, max_size=80),
    cuts=st.lists(st.integers(0, 80), max_size=6),
    hidden=st.integers(1, 16),
)
def test_windowed_gathers_concatenate_to_the_full_gather(
    mask: list[bool], cuts: list[int], hidden: int
) -> None:
    is_embed = torch.tensor(mask, dtype=torch.bool)
    embeds = torch.randn(sum(mask), hidden)
    placeholders = mmcli.scatter_mm_placeholders(embeds, is_embed)
    bounds = sorted({0, len(mask), *(c for c in cuts if c <= len(mask))})
    windows = list(zip(bounds, bounds[1:], strict=False))
    pieces = [mmcli.gather_window(embeds, s, e, is_embed) for s, e in windows]
    # Each window's rows are what gathering that window of the scattered tensor yields.
    for (s, e), piece in zip(windows, pieces, strict=True):
        assert torch.equal(piece, mmcli.gather_mm_placeholders(placeholders[s:e], is_embed[s:e]))
    full = torch.cat(pieces) if pieces else embeds[:0]
    assert torch.equal(full, mmcli.gather_mm_placeholders(placeholders, is_embed))
