"""What the SGLang plugin reads from the engine, and the dump it makes of one embedding step.

Pure helpers (no plugin state). One call of SGLang's ``get_embedding_and_mask`` (one modality
of one prefill batch) is a :class:`Step`; :func:`build_dump` turns it into what
:meth:`~mmcli.capture._common.Capturer.record` takes: the merged 2-D embedding with each
item's row count (``item_counts``, the v2 merged layout), each item's mask over its
placeholder range, and the :class:`~mmcli.capture.context.CaptureContext`.

Where the rows of each item come from. SGLang's placeholder tokens hold each item's pad
value(s) (``item.padding_values()`` from 0.5.23, ``item.pad_value`` before), so an item's
positions in the batch's ``input_ids`` are where they hold its values, and the engine's merged
embedding fills the positions of every item in sequence order. When the merged rows equal the
placeholders, each item's count is its placeholders (``item_rows=placeholders``); when they
do not, the encoder calls seen during the step tell which items came out short or long
(``item_rows=encoder``: exact when the encoder returned one tensor per item, else the
difference of one call falls on its last item); failing that, the rows are given out in order
and the last item takes the difference (``item_rows=attributed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mmcli.capture._common import loaded_tp_rank, loaded_version
from mmcli.capture.model_config import ModelFacts, tokens_for
from mmcli.capture.sglang.model import model_facts

ENGINE = "sglang"


@dataclass
class Step:
    """One ``get_embedding_and_mask`` call as the plugin saw it."""

    items: list[Any]
    input_ids: Any = None
    placeholder_tensor: Any = None
    prefix_lens: Sequence[int] = ()
    extend_lens: Sequence[int] = ()
    encoder: Any = None  # the engine's data_embedding_func (for the model's config)
    deepstack: bool | None = None  # embed_mm_inputs' use_deepstack for this modality
    merged: Any = None  # the merged embedding as _adjust_embedding_length received it
    mask: Any = None  # the engine's placeholder mask, when it returned one
    calls: list[tuple[list[Any], Any]] = field(default_factory=list)  # (items, encoder output)


@dataclass
class Dump:
    """What one step becomes: the arguments of ``Capturer.record``, and notes for the log."""

    outputs: Any
    item_counts: list[int] | None
    masks: list[Any] | None
    context: Any
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- engine facts


def tp_rank() -> int | None:
    """The tensor-parallel rank, without importing anything new."""
    return loaded_tp_rank("sglang.srt.distributed.parallel_state")


def engine_version() -> str | None:
    """The SGLang release running (None when unknown)."""
    return loaded_version("sglang.version", "sglang")


def pad_values(item: object) -> tuple[int, ...] | None:
    """The token values an item's placeholders hold (None when the item has none we know)."""
    get = getattr(item, "padding_values", None)
    try:
        values = get() if callable(get) else (getattr(item, "pad_value", None),)
        found = tuple(int(v) for v in values if isinstance(v, int))
    except Exception:
        return None
    return found or None


def runs(item: object) -> list[tuple[int, int]] | None:
    """The item's placeholder runs ``(start, end)``, inclusive, in its request's sequence."""
    offsets = getattr(item, "offsets", None)
    try:
        found = [(int(a), int(b)) for a, b in offsets or ()]
    except Exception:
        return None
    return found or None


def expected_rows(item: object) -> int | None:
    """The rows the encoder owes the whole item: its placeholder tokens."""
    found = runs(item)
    return None if found is None else sum(b - a + 1 for a, b in found)


def modality(items: Sequence[object]) -> str | None:
    value = getattr(items[0], "modality", None) if items else None
    name = getattr(value, "name", value)
    return name.lower() if isinstance(name, str) else None


# --------------------------------------------------------------------------- rows per item


def split_rows(total: int, expected: Sequence[int]) -> list[int]:
    """``total`` rows given out in order, each item up to its ``expected`` count; the last
    item takes what is left (so the counts always sum to ``total``)."""
    counts, left = [], total
    for n in expected[:-1]:
        take = min(n, left)
        counts.append(take)
        left -= take
    return [*counts, left] if expected else []


def _rows(t: Any) -> int | None:
    import torch

    if not isinstance(t, torch.Tensor) or t.ndim < 2 or t.shape[-1] == 0:
        return None
    return int(t.numel() // t.shape[-1])


def encoder_rows(calls: Sequence[tuple[list[Any], Any]]) -> dict[int, int]:
    """``id(item) → rows`` the encoder returned for it, from each call's output."""
    found: dict[int, int] = {}
    for items, output in calls:
        if isinstance(output, list | tuple) and len(output) == len(items):
            for item, t in zip(items, output, strict=True):
                n = _rows(t)
                if n is not None:
                    found[id(item)] = n
            continue
        total = _rows(output)
        expected = [expected_rows(item) for item in items]
        if total is None or not expected or None in expected:
            continue
        for item, n in zip(items, split_rows(total, [e or 0 for e in expected]), strict=True):
            found[id(item)] = n
    return found


def item_positions(input_ids: Any, items: Sequence[object]) -> list[Any] | None:
    """Each item's placeholder positions in the batch (sorted, 1-D), or None when an item's
    pad values are unknown. Items sharing pad values (the same image twice) share their
    positions out by contiguous run, in order."""
    import torch

    values = [pad_values(item) for item in items]
    if not items or any(v is None for v in values):
        return None
    ids = input_ids.reshape(-1).to("cpu")
    groups: dict[tuple[int, ...], list[int]] = {}
    for index, value in enumerate(values):
        groups.setdefault(value or (), []).append(index)
    found: list[Any] = [None] * len(items)
    for value, indices in groups.items():
        hit = torch.isin(ids, torch.tensor(value, dtype=ids.dtype)).nonzero().flatten()
        if len(indices) == 1:
            found[indices[0]] = hit
            continue
        breaks = (torch.diff(hit) != 1).nonzero().flatten() + 1
        pieces = list(torch.tensor_split(hit, breaks.tolist())) if hit.numel() else []
        if len(pieces) != len(indices):
            pieces = [hit] + [hit[:0]] * (len(indices) - 1)
        for index, piece in zip(indices, pieces, strict=True):
            found[index] = piece
    return found


def mask_over(positions: Any) -> tuple[tuple[int, int], Any]:
    """An item's placeholder range ``(offset, length)`` and its bool mask, from positions."""
    import torch

    offset = int(positions[0])
    length = int(positions[-1]) - offset + 1
    mask = torch.zeros(length, dtype=torch.bool)
    mask[positions - offset] = True
    return (offset, length), mask


def mask_from_runs(item_runs: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], Any]:
    """An item's range and mask from its runs (True on each run, False between them)."""
    import torch

    offset = item_runs[0][0]
    mask = torch.zeros(item_runs[-1][1] - offset + 1, dtype=torch.bool)
    for a, b in item_runs:
        mask[a - offset : b - offset + 1] = True
    return (offset, int(mask.shape[0])), mask


# --------------------------------------------------------------------------- the dump


def build_dump(step: Step, *, rank: int | None) -> Dump | None:
    """The dump of one step: the merged embedding when the step got that far, else (the
    engine failed before merging) the last encoder output it saw; None when neither exists."""
    if step.merged is not None:
        return _merged_dump(step, rank)
    if step.calls:
        return _encoder_dump(step, rank)
    return None


def _context(step: Step, rank: int | None, width: int | None, **fields: Any) -> Any:
    from mmcli._version import __version__
    from mmcli.capture.context import CaptureContext

    side = model_facts(step.encoder)
    hidden, levels = side.hidden_size, side.levels
    versions = {"mmcli": __version__}
    version = engine_version()
    if version:
        versions["sglang"] = version
    extra: dict[str, str] = {
        "extend_prefix_lens": ",".join(str(int(n)) for n in step.prefix_lens),
        "extend_seq_lens": ",".join(str(int(n)) for n in step.extend_lens),
        **fields.pop("extra", {}),
    }
    deepstack = row_width = None
    if levels and hidden and (step.deepstack or width == (1 + levels) * hidden):
        deepstack = levels  # Qwen3-VL: the deepstack levels ride along until after the step
    elif hidden and (step.deepstack is False or not levels):
        row_width = hidden  # no deepstack here: a row twice as wide is an error, not a guess
        if side.deepstack_levels is not None or step.deepstack is False:
            deepstack = 0  # known: these rows carry none
    kind = modality(step.items)
    if hidden is not None and side.hidden_size_source:
        extra["hidden_size_source"] = side.hidden_size_source
    return CaptureContext(
        hidden_size=hidden,
        deepstack_levels=deepstack,
        row_width=row_width,
        placeholder_token_ids=tokens_for(ModelFacts(tokens=side.tokens), [kind] if kind else []),
        dtype=side.dtype,
        tp_rank=rank,
        modality=kind,
        model=side.model,
        engine=ENGINE,
        versions=versions,
        phase="prefill",
        extra=extra,
        **fields,
    )


def _hashes(items: Sequence[object]) -> dict[str, str]:
    hashes = [getattr(item, "hash", None) for item in items]
    if hashes and all(isinstance(h, int) for h in hashes):
        return {"mm_hashes": ",".join(str(h) for h in hashes)}
    return {}


def _merged_dump(step: Step, rank: int | None) -> Dump:
    import torch

    merged, notes = step.merged, []
    if isinstance(merged, torch.Tensor) and merged.ndim > 2:
        merged = merged.reshape(-1, merged.shape[-1])
    ids = step.input_ids if isinstance(step.input_ids, torch.Tensor) else None
    positions = None
    if isinstance(step.mask, torch.Tensor):
        positions = step.mask.reshape(-1).nonzero().flatten()
    elif ids is not None and isinstance(step.placeholder_tensor, torch.Tensor):
        pads = step.placeholder_tensor.reshape(-1).to("cpu", ids.dtype)
        positions = torch.isin(ids.reshape(-1).to("cpu"), pads).nonzero().flatten()
    width = int(merged.shape[-1]) if isinstance(merged, torch.Tensor) and merged.ndim else None
    if not isinstance(merged, torch.Tensor) or merged.ndim != 2:
        notes.append("the merged embedding is not 2-D; dumped as it is")
        ctx = _context(step, rank, width, placeholder_positions=positions)
        return Dump(merged, None, None, ctx, notes)
    rows = int(merged.shape[0])
    per_item = item_positions(ids, step.items) if ids is not None else None
    order = []
    if per_item is not None:
        starts = sorted((int(p[0]), i) for i, p in enumerate(per_item) if p.numel())
        order = [i for _, i in starts]
    if per_item is None or not order:
        notes.append(
            "the items' placeholders were not found by their pad values: the merged "
            "embedding is dumped as one item, without per-item masks"
        )
        extra = {"embedding_source": "merged", "item_rows": "merged"}
        ctx = _context(step, rank, width, placeholder_positions=positions, extra=extra)
        return Dump(merged, [rows], None, ctx, notes)
    items = [step.items[i] for i in order]
    placeholders = [int(per_item[i].numel()) for i in order]
    counts, how = _counts(step, rows, items, placeholders)
    ranges, masks = [], []
    for i in order:
        span, mask = mask_over(per_item[i])
        ranges.append(span)
        masks.append(mask)
    ctx = _context(
        step,
        rank,
        width,
        placeholder_positions=positions,
        placeholder_ranges=ranges,
        expected_num_items=len(items),
        extra={"embedding_source": "merged", "item_rows": how, **_hashes(items)},
    )
    return Dump(merged, counts, masks, ctx, notes)


def _counts(
    step: Step, rows: int, items: Sequence[object], placeholders: list[int]
) -> tuple[list[int], str]:
    if sum(placeholders) == rows:
        return placeholders, "placeholders"
    found = encoder_rows(step.calls)
    whole = all(expected_rows(it) == n for it, n in zip(items, placeholders, strict=True))
    if whole and all(id(it) in found for it in items):
        counts = [found[id(it)] for it in items]
        if sum(counts) == rows:
            return counts, "encoder"
    return split_rows(rows, placeholders), "attributed"


def _encoder_dump(step: Step, rank: int | None) -> Dump:
    """The engine failed before merging (e.g. splitting the encoder's output per item): dump
    the encoder's last output, the items it was given, and their ranges from ``offsets`` (in
    their request's sequence)."""
    import torch

    items, output = step.calls[-1]
    if not isinstance(output, torch.Tensor | list | tuple):
        output = getattr(output, "embedding", output)  # a pruned-video (EVS) result
    known = [found for found in map(runs, items) if found is not None]
    pairs = [mask_from_runs(found) for found in known] if len(known) == len(items) else None
    ranges = [span for span, _ in pairs] if pairs else None
    masks = [mask for _, mask in pairs] if pairs else None
    counts: list[int] | None = None
    how, expected_items = "encoder", len(items) or None
    if isinstance(output, torch.Tensor) and output.ndim >= 2:
        output = output.reshape(-1, output.shape[-1])
        rows = int(output.shape[0])
        expected = [n for n in map(expected_rows, items) if n is not None]
        if pairs and len(expected) == len(items):
            counts = split_rows(rows, expected)
            how = "placeholders" if rows == sum(expected) else "attributed"
        else:
            counts, how, expected_items = [rows], "merged", None
    width = int(output.shape[-1]) if isinstance(output, torch.Tensor) and output.ndim else None
    extra = {"embedding_source": "encoder", "item_rows": how, **_hashes(items)}
    ctx = _context(
        step,
        rank,
        width,
        placeholder_ranges=ranges,
        expected_num_items=expected_items,
        extra=extra,
    )
    return Dump(output, counts, masks, ctx, [])
