"""Placeholder-range helpers for the newer engine layout: raw ``(num_embeds, hidden)`` encoder
output plus a placeholder range ``(offset, length, is_embed)``, gathered window by window as
chunked prefill does."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mmcli.embeddings.reference import check_mask
from mmcli.errors import InputError


def embeds_cumsum(is_embed: torch.Tensor) -> torch.Tensor:
    """Running count of embedding positions: element ``i`` is the embeds in ``[0, i]``."""
    return torch.cumsum(check_mask(is_embed), dim=0)


def num_embeds(length: int, is_embed: torch.Tensor | None = None) -> int:
    """Embedding positions in a range of ``length`` placeholders (all of them without a mask)."""
    if is_embed is None:
        return length
    _check_length(length, check_mask(is_embed))
    return int(is_embed.sum())


def embeds_index_range(
    start: int, end: int, *, length: int, is_embed: torch.Tensor | None = None
) -> tuple[int, int]:
    """Rows ``[lo, hi)`` of the raw encoder output that the token window ``[start, end)`` of the
    placeholder range holds."""
    if not 0 <= start <= end <= length:
        raise InputError(
            f"token window [{start}, {end}) is not inside the placeholder range [0, {length})",
            hint="windows are relative to the range's offset: 0 <= start <= end <= length",
        )
    if is_embed is None:
        return start, end
    _check_length(length, check_mask(is_embed))
    if start == end:
        # An empty window holds no rows; its position is the count before it.
        before = int(is_embed[:start].sum())
        return before, before
    cumsum = torch.cumsum(is_embed[:end], dim=0)
    lo = int(cumsum[start - 1]) if start > 0 else 0
    return lo, int(cumsum[end - 1])


def gather_window(
    embeds: torch.Tensor, start: int, end: int, is_embed: torch.Tensor | None = None
) -> torch.Tensor:
    """The encoder-output rows for token window ``[start, end)`` (a view, no copy)."""
    length = is_embed.shape[0] if is_embed is not None else embeds.shape[0]
    lo, hi = embeds_index_range(start, end, length=length, is_embed=is_embed)
    if hi > embeds.shape[0]:
        raise InputError(
            f"window [{start}, {end}) needs embeds rows up to {hi} but embeds has "
            f"{embeds.shape[0]} rows",
            hint="the mask's True count must equal the encoder output's rows",
        )
    return embeds[lo:hi]


@dataclass(frozen=True)
class PlaceholderRange:
    """Where one item's placeholders sit in the prompt, and which of them are embeddings."""

    offset: int
    length: int
    is_embed: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.offset < 0 or self.length < 0:
            raise InputError(
                f"placeholder range needs offset >= 0 and length >= 0, got offset={self.offset}, "
                f"length={self.length}"
            )
        if self.is_embed is not None:
            _check_length(self.length, check_mask(self.is_embed))

    @property
    def num_embeds(self) -> int:
        """Embedding positions in the range."""
        return num_embeds(self.length, self.is_embed)

    def embeds_index_range(self, start: int, end: int) -> tuple[int, int]:
        """Encoder-output rows for the window ``[start, end)`` relative to ``offset``."""
        return embeds_index_range(start, end, length=self.length, is_embed=self.is_embed)


def _check_length(length: int, is_embed: torch.Tensor) -> None:
    if is_embed.shape[0] != length:
        raise InputError(
            f"is_embed covers {is_embed.shape[0]} positions but the range length is {length}",
            hint="the mask must have one entry per placeholder position",
        )
