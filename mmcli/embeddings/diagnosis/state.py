"""The state of one diagnosis: its options, what it learned about each item, the findings.

:class:`Diagnosis` is the engine behind :func:`mmcli.diagnose_mm_encoder_outputs` (items in
memory) and ``mmcli check-embeddings`` (items streamed from a dump). Items are added one at a
time and judged as they arrive (:mod:`.per_item`, :mod:`.roundtrip`); what is judged across
items (:mod:`.across_items`) needs only small per-item figures kept here, so no item has to
stay in memory. The judgments are functions that return findings; this class only records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from mmcli.dtypes import name_of, torch_model_dtype
from mmcli.embeddings.context import SequenceContext
from mmcli.embeddings.diagnosis import across_items, per_item, sequence
from mmcli.embeddings.diagnosis.roundtrip import Clock, judge_roundtrip, judge_stored
from mmcli.embeddings.ops import Impl
from mmcli.findings import Finding


@dataclass(frozen=True)
class Options:
    """What the items are judged against; None where the caller does not know."""

    expected_num_items: int | None = None
    hidden_size: int | None = None
    model_dtype: torch.dtype | None = None


@dataclass
class ItemStats:
    """What the diagnosis learned about one item (the per-item row of a report)."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    num_placeholders: int | None
    num_embeds: int | None
    finite: bool | None
    mean_row_norm: float | None = None
    roundtrip_ready: bool = False

    def to_json(self) -> dict[str, Any]:
        """The item's JSON object in a report (``mean_row_norm`` and ``roundtrip_ready`` are
        working figures and stay out)."""
        return {
            "index": self.index,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "num_placeholders": self.num_placeholders,
            "num_embeds": self.num_embeds,
            "finite": self.finite,
        }


class Diagnosis:
    """Findings over items added one at a time; :meth:`finish` adds the cross-item ones.

    ``fetch(i)`` returns item ``i`` again (from memory or the file): it is called only to
    confirm that two items whose row norms match are byte-for-byte identical.
    """

    def __init__(
        self,
        *,
        expected_num_items: int | None = None,
        hidden_size: int | None = None,
        model_dtype: str | torch.dtype | None = None,
        fetch: Callable[[int], torch.Tensor] | None = None,
        context: SequenceContext | None = None,
    ) -> None:
        self.options = Options(
            expected_num_items=expected_num_items,
            hidden_size=hidden_size,
            model_dtype=None if model_dtype is None else torch_model_dtype(model_dtype),
        )
        self.fetch = fetch
        #: What the dump (v2) or the capture knows beyond the items.
        self.context = context or SequenceContext()
        #: Each item's rows and mask count, for the judgments across items.
        self.rows: list[sequence.ItemRows] = []
        #: A stacked tensor whose items cannot be checked (their rows are unknown).
        self.refused = False
        self.findings: list[Finding] = []
        self.items: list[ItemStats] = []
        #: Duplicate fingerprint (shape, dtype, row norms) → the items that have it.
        self.fingerprints: dict[tuple[Any, ...], list[int]] = {}
        #: Hidden size → items; floating dtype name → items.
        self.hidden_sizes: dict[int, list[int]] = {}
        self.dtypes: dict[str, list[int]] = {}

    def stacked(self, shape: Sequence[int]) -> bool:
        """Judge a stacked ``mm_embeddings`` tensor's shape; True when its items can be checked."""
        finding = per_item.judge_stacked(shape, self.context.num_placeholders)
        self.findings.append(finding)
        self.refused = finding.severity == "error"
        return not self.refused

    def add(self, index: int, emb: torch.Tensor, mask: torch.Tensor | None = None) -> ItemStats:
        """Run every per-item judgment on item ``index`` (and its mask); record its stats."""
        shape = tuple(int(d) for d in emb.shape)
        floating = emb.is_floating_point()
        stats = ItemStats(
            index=index,
            shape=shape,
            dtype=name_of(emb.dtype),
            num_placeholders=None,
            num_embeds=shape[0] if emb.ndim == 2 else None,
            finite=True if not floating else None,
        )
        self.items.append(stats)
        if emb.ndim >= 1:
            self.hidden_sizes.setdefault(shape[-1], []).append(index)
        if floating:
            self.dtypes.setdefault(stats.dtype, []).append(index)

        facts = per_item.judge_mask(index, mask)
        self.findings += facts.findings
        if mask is not None and facts.num_embeds is not None:
            stats.num_placeholders, stats.num_embeds = facts.num_placeholders, facts.num_embeds
        self.findings += per_item.judge_layout(index, shape, emb.dtype, facts.num_embeds)
        self.findings += sequence.judge_mask_tokens(index, mask, self.context)
        rows = 1
        for d in shape[:-1]:
            rows *= d
        self.rows.append(sequence.ItemRows(index, rows, facts.num_embeds, facts.num_placeholders))
        fingerprint = None
        if floating:
            # NaN rows can be the scattered form only where the mask (if any) leaves positions
            # out: an all-True mask rules it out.
            scattered = mask is None or (
                facts.num_embeds is not None
                and facts.num_embeds < (facts.num_placeholders or 0) == rows
            )
            values = per_item.judge_values(index, emb, scattered_possible=scattered)
            stats.finite, stats.mean_row_norm = values.finite, values.mean_row_norm
            fingerprint = values.fingerprint
            self.findings += values.findings
        self.findings += per_item.judge_empty(index, shape)
        if emb.ndim == 2 and mask is not None and facts.num_embeds is not None:
            self.findings += per_item.judge_mask_count(index, shape[0], facts.num_embeds)
            stats.roundtrip_ready = (
                facts.num_embeds == shape[0] and floating and mask.dtype == torch.bool
            )
        elif emb.ndim == 2 and floating and mask is None:
            stats.roundtrip_ready = True
        if fingerprint is not None:
            earlier = self.fingerprints.setdefault(fingerprint, [])
            self.findings += per_item.judge_duplicate(index, emb, earlier, self.fetch)
            earlier.append(index)
        return stats

    def check(
        self,
        index: int,
        emb: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        stored: torch.Tensor | None = None,
        roundtrip: bool = True,
        impl: Impl = "reference",
        clock: Clock | None = None,
    ) -> ItemStats:
        """Every judgment of one item: :meth:`add`, then (for an item consistent with its
        mask) the scatter/gather round trip with ``impl`` and the ``stored`` placeholders.

        ``clock(stage)`` (when given) times the ``check``, ``scatter`` and ``gather`` stages.
        """

        def timed(stage: str) -> AbstractContextManager[Any]:
            return clock(stage) if clock is not None else nullcontext()

        with timed("check"):
            stats = self.add(index, emb, mask)
        if not stats.roundtrip_ready:
            return stats
        if roundtrip:
            self.findings += judge_roundtrip(index, emb, mask, impl=impl, clock=clock)
        if stored is not None:
            with timed("check"):
                self.findings += judge_stored(index, emb, mask, stored)
        return stats

    def finish(self, num_items: int | None = None, *, num_masks: int = 0) -> list[Finding]:
        """Add the cross-item findings and return every finding, file-level ones first."""
        found = len(self.items) if num_items is None else num_items
        options, ctx = self.options, self.context
        dtype = None if options.model_dtype is None else name_of(options.model_dtype)
        self.findings += sequence.judge_return(ctx, ctx.num_placeholders)
        self._judge_sequence()
        expected = options.expected_num_items
        if expected is None and ctx.placeholder_ranges is not None:
            expected = len(ctx.placeholder_ranges)
        if not any(f.code == "item-count" for f in self.findings):  # the slots said it first
            self.findings += across_items.judge_count(found, expected, num_masks)
        want, widths, explained = sequence.judge_width(self.hidden_sizes, options.hidden_size, ctx)
        self.findings += widths
        groups = {w: i for w, i in self.hidden_sizes.items() if w not in explained}
        self.findings += across_items.judge_agreement(groups, want, across_items.HIDDEN_SIZE)
        self.findings += across_items.judge_agreement(self.dtypes, dtype, across_items.DTYPE)
        self.findings += across_items.judge_norms(
            [(s.index, s.mean_row_norm) for s in self.items if s.mean_row_norm is not None]
        )
        self.findings += sequence.judge_engine_error(ctx)
        return sorted(self.findings, key=lambda f: -1 if f.item is None else f.item)

    def _judge_sequence(self) -> None:
        """Placeholders against rows; begin/end-of-image rows (replacing the per-item
        mask-count findings they explain)."""
        ctx = self.context
        if self.refused:
            return
        k = sequence.boundary_rows(self.rows, ctx) if self.rows else None
        if k is not None:
            self.findings = [
                f for f in self.findings if f.code not in ("mask-count", "range-length")
            ]
            self.findings.append(sequence.judge_boundary(k, self.rows))
            return
        self.findings += sequence.judge_ranges(ctx, self.rows)
        self.findings += sequence.judge_placeholders(ctx, self.rows)
