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
    size. ``return_type``: what the encoder returned instead of tensors. ``ids_dtype``: the
    prompt's integer type with its largest value, when a placeholder token id is beyond it
    (no such id can occur in that prompt). ``deepstack_levels``: 0 when the model's config
    says its encoder rows carry none, None when unknown. ``hidden_size_source``: where the
    hidden size was read (a config key such as ``text_config.hidden_size``, or
    ``--hidden-size``). ``positions_from_ids``: the placeholder positions were found in the
    prompt's token ids (so a position outside them holds another token).
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
    ids_dtype: tuple[str, int] | None = None
    hidden_size_source: str | None = None
    positions_from_ids: bool = False

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
    # An id beyond the prompt's own integer type cannot occur in it (nor be made its dtype).
    limits = _limits(ids.dtype)
    held = [t for t in token_ids if limits is None or limits[0] <= t <= limits[1]]
    hit = torch.isin(ids, torch.tensor(held, dtype=ids.dtype))
    return tuple(int(i) for i in hit.nonzero().flatten().tolist())


def _limits(dtype: torch.dtype) -> tuple[int, int] | None:
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        return None
    info = torch.iinfo(dtype)
    return info.min, info.max


def _ids_dtype(input_ids: object, token_ids: Sequence[int]) -> tuple[str, int] | None:
    """The prompt tensor's dtype and largest value, when a token id is beyond its range."""
    if not isinstance(input_ids, torch.Tensor) or (limits := _limits(input_ids.dtype)) is None:
        return None
    if all(limits[0] <= t <= limits[1] for t in token_ids):
        return None
    return str(input_ids.dtype).removeprefix("torch."), limits[1]


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
    hidden_size_source: str | None = None,
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
        ids_dtype=None if placeholder_positions_ is not None else _ids_dtype(input_ids, tokens),
        hidden_size_source=hidden_size_source,
        positions_from_ids=placeholder_positions_ is None and positions is not None,
    )
