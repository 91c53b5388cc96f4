"""What is known around one captured encoder batch (sequence, widths, where it ran)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

_SAFE = re.compile(r"[^A-Za-z0-9_.]+")


@dataclass(frozen=True)
class CaptureContext:
    """What is known around one encoder batch; every field is optional (None: unknown).

    Sequence context: ``input_ids`` (the prompt's token ids, 1-D) or just
    ``placeholder_positions`` (indices of its placeholder tokens), ``placeholder_token_ids``
    (the id(s) that mark an item's slot), ``placeholder_ranges`` (each item's ``(offset,
    length)`` in the sequence). Widths: ``hidden_size``, ``row_width`` (the expected width of a
    row when it is not ``hidden_size``), ``deepstack_levels`` (Qwen3-VL: rows are
    ``(1 + levels) × hidden``), ``tp_size``/``tp_rank``. Where: ``engine``, ``versions``
    (library → version), ``phase`` (``profile``, ``prefill``, ``forward``, …), ``model``.
    ``extra`` holds any other string metadata.
    """

    input_ids: torch.Tensor | Sequence[int] | None = None
    placeholder_positions: torch.Tensor | Sequence[int] | None = None
    placeholder_token_ids: Sequence[int] | None = None
    placeholder_ranges: Sequence[tuple[int, int]] | None = None
    expected_num_items: int | None = None
    hidden_size: int | None = None
    row_width: int | None = None
    deepstack_levels: int | None = None
    tp_size: int | None = None
    tp_rank: int | None = None
    dtype: torch.dtype | str | None = None
    modality: str | None = None
    model: str | None = None
    engine: str | None = None
    versions: Mapping[str, str] = field(default_factory=dict)
    phase: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def with_(self, **changes: object) -> CaptureContext:
        """A copy with some fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def writer_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`mmcli.dump_encoder_outputs` for this context."""
        kw: dict[str, Any] = {
            "expected_num_items": self.expected_num_items,
            "hidden_size": self.hidden_size,
            "input_ids": self.input_ids,
            "placeholder_positions": self.placeholder_positions,
            "placeholder_token_ids": self.placeholder_token_ids,
            "placeholder_ranges": self.placeholder_ranges,
            "row_width": self.row_width,
            "deepstack_levels": self.deepstack_levels,
            "tp_size": self.tp_size,
            "tp_rank": self.tp_rank,
            "dtype": self.dtype,
            "modality": self.modality,
            "model": self.model,
            "engine": self.engine,
            "phase": self.phase,
        }
        for lib, version in sorted(self.versions.items()):
            kw[f"version_{_SAFE.sub('_', lib)}"] = version
        kw.update(self.extra)
        return kw
