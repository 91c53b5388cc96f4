"""Mode ``check``: mmcli's diagnosis of one encoder batch in memory, before anything is written.

The same :class:`~mmcli.embeddings.diagnosis.Diagnosis` as ``check-embeddings``, without the
scatter/gather round trip (it proves the merge code, not the batch), so the cost is one read
of the outputs (finiteness and row norms) plus the masks' counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mmcli.capture.context import CaptureContext
from mmcli.dump.writer import return_type
from mmcli.embeddings.context import SequenceContext, make_context
from mmcli.embeddings.diagnosis import Diagnosis
from mmcli.embeddings.inputs import per_item_tensors
from mmcli.findings import Finding


def sequence_context(
    ctx: CaptureContext, return_kind: str | None = None, error: str | None = None
) -> SequenceContext:
    """The diagnosis's view of a capture context."""
    return make_context(
        input_ids=ctx.input_ids,
        placeholder_positions_=ctx.placeholder_positions,
        placeholder_token_ids=ctx.placeholder_token_ids,
        placeholder_ranges=ctx.placeholder_ranges,
        row_width=ctx.row_width,
        deepstack_levels=ctx.deepstack_levels,
        tp_size=ctx.tp_size,
        tp_rank=ctx.tp_rank,
        return_type=return_kind,
        engine_error=error,
        hidden_size_source=ctx.extra.get("hidden_size_source"),
    )


def diagnose(
    outputs: object,
    is_embed: object,
    ctx: CaptureContext,
    item_counts: Sequence[int] | None = None,
) -> list[Finding]:
    """Every finding on one batch, as ``check-embeddings`` would report its dump."""
    items: list[torch.Tensor] | None = None
    stacked: tuple[int, ...] | None = None
    if isinstance(outputs, torch.Tensor):
        if item_counts is not None:
            items = list(torch.split(outputs, list(item_counts)))
        else:
            stacked = tuple(outputs.shape)
            items = list(outputs.unbind(0)) if outputs.ndim >= 1 else []
    elif isinstance(outputs, list | tuple) and all(isinstance(t, torch.Tensor) for t in outputs):
        items = list(outputs)
    kind = None if items is not None else return_type(outputs)
    found: list[torch.Tensor] = items or []
    diagnosis = Diagnosis(
        expected_num_items=ctx.expected_num_items,
        hidden_size=ctx.hidden_size,
        model_dtype=ctx.dtype,
        fetch=found.__getitem__,
        context=sequence_context(ctx, kind),
    )
    items = found
    if stacked is not None and not diagnosis.stacked(stacked):
        return diagnosis.finish(len(items))
    masks = per_item_tensors(is_embed, "is_embed")
    for index, emb in enumerate(items):
        mask = masks[index] if index < len(masks) else None
        diagnosis.check(index, emb, mask, roundtrip=False)
    return diagnosis.finish(len(items), num_masks=len(masks))


def error_codes(
    outputs: object,
    is_embed: object,
    ctx: CaptureContext,
    item_counts: Sequence[int] | None = None,
) -> list[str]:
    """The codes of the error findings on one batch (empty: it looks healthy)."""
    return [f.code for f in diagnose(outputs, is_embed, ctx, item_counts) if f.severity == "error"]
