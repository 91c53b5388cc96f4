"""What is known around one encoder batch beyond its outputs (``mm_dump`` v2 context).

Kept apart from the diagnosis so that the dump reader (which builds it from a file) and the
capture paths (which build it from a live model) need nothing of the diagnosis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SequenceContext:
    """Sequence-level facts about one batch; every field is optional (None: unknown).

    ``placeholder_positions``: where the prompt holds a placeholder token (from its token ids
    and ``placeholder_token_ids``, or recorded directly). ``placeholder_ranges``: each item's
    ``(offset, length)``. ``row_width``: the expected row width when it is not the hidden
    size. ``return_type``: what the encoder returned instead of tensors.
    """

    placeholder_positions: tuple[int, ...] | None = None
    placeholder_token_ids: tuple[int, ...] = ()
    placeholder_ranges: tuple[tuple[int, int], ...] | None = None
    row_width: int | None = None
    deepstack_levels: int | None = None
    tp_size: int | None = None
    tp_rank: int | None = None
    return_type: str | None = None
    engine_error: str | None = None

    @property
    def num_placeholders(self) -> int | None:
        """Placeholder tokens in the prompt, when known."""
        if self.placeholder_positions is None:
            return None
        return len(self.placeholder_positions)

    @property
    def empty(self) -> bool:
        """True when nothing is known beyond the outputs."""
        return self == SequenceContext()


def placeholder_positions(
    input_ids: torch.Tensor | Sequence[int] | None, token_ids: Sequence[int]
) -> tuple[int, ...] | None:
    """Positions of any of ``token_ids`` in ``input_ids`` (None without both)."""
    if input_ids is None or not token_ids:
        return None
    ids = input_ids if isinstance(input_ids, torch.Tensor) else torch.tensor(list(input_ids))
    ids = ids.reshape(-1).to("cpu")
    hit = torch.isin(ids, torch.tensor(list(token_ids), dtype=ids.dtype))
    return tuple(int(i) for i in hit.nonzero().flatten().tolist())


def make_context(
    *,
    input_ids: torch.Tensor | Sequence[int] | None = None,
    placeholder_positions_: torch.Tensor | Sequence[int] | None = None,
    placeholder_token_ids: Sequence[int] | None = None,
    placeholder_ranges: torch.Tensor | Sequence[Sequence[int]] | None = None,
    row_width: int | None = None,
    deepstack_levels: int | None = None,
    tp_size: int | None = None,
    tp_rank: int | None = None,
    return_type: str | None = None,
    engine_error: str | None = None,
) -> SequenceContext:
    """A :class:`SequenceContext` from raw values (tensors or sequences)."""
    tokens = tuple(int(t) for t in placeholder_token_ids or ())
    positions: tuple[int, ...] | None
    if placeholder_positions_ is not None:
        raw = placeholder_positions_
        flat = raw.reshape(-1).tolist() if isinstance(raw, torch.Tensor) else list(raw)
        positions = tuple(int(p) for p in flat)
    else:
        positions = placeholder_positions(input_ids, tokens)
    ranges: tuple[tuple[int, int], ...] | None = None
    if placeholder_ranges is not None:
        rows = (
            placeholder_ranges.reshape(-1, 2).tolist()
            if isinstance(placeholder_ranges, torch.Tensor)
            else [list(r) for r in placeholder_ranges]
        )
        ranges = tuple((int(r[0]), int(r[1])) for r in rows)
    return SequenceContext(
        placeholder_positions=positions,
        placeholder_token_ids=tokens,
        placeholder_ranges=ranges,
        row_width=row_width,
        deepstack_levels=deepstack_levels,
        tp_size=tp_size,
        tp_rank=tp_rank,
        return_type=return_type,
        engine_error=engine_error,
    )
