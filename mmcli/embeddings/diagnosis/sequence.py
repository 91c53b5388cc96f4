"""Judgments that need the batch's sequence context (``mm_dump`` v2) or see every item at once:
what the encoder returned instead of tensors, placeholder tokens against embedding rows, the
row width against the hidden size (deepstack, tensor parallelism), and begin/end-of-image
rows the mask leaves out.

Each function returns findings; none keeps state.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from mmcli.embeddings import hints
from mmcli.embeddings.context import SequenceContext
from mmcli.findings import Finding
from mmcli.text import items_text

#: Rows per item beyond the mask that read as begin/end-of-image tokens (more is another bug).
MAX_BOUNDARY_ROWS = 4
#: Widths up to this multiple of the hidden size may be Qwen3-VL deepstack levels.
MAX_DEEPSTACK_FACTOR = 8


@dataclass(frozen=True)
class ItemRows:
    """One item's rows, and its mask's True count (None without a usable mask)."""

    index: int
    rows: int
    mask_true: int | None
    mask_len: int | None


def judge_return(context: SequenceContext, num_placeholders: int | None) -> list[Finding]:
    """The encoder returned something other than tensors (``encoder_return_type``)."""
    kind = context.return_type
    if not kind:
        return []
    slots = "" if num_placeholders is None else f" while the prompt holds {num_placeholders} "
    slots += "placeholder tokens" if num_placeholders is not None else ""
    if kind == "NoneType":
        return [
            Finding(
                "encoder-returned-none",
                "error",
                f"the encoder returned None instead of embeddings{slots}",
                hints.NONE_HINT,
            )
        ]
    return [
        Finding(
            "non-tensor-output",
            "error",
            f"the encoder returned {kind}, not tensors{slots}",
            f"{hints.BLAME} must return a list of per-item (tokens, hidden) tensors or one "
            "stacked tensor",
        )
    ]


def judge_placeholders(context: SequenceContext, items: Sequence[ItemRows]) -> list[Finding]:
    """Placeholder tokens in the prompt against the rows the items bring."""
    count = context.num_placeholders
    if count is None or context.return_type:
        return []
    embeds = sum(i.mask_true if i.mask_true is not None else i.rows for i in items)
    tokens = _tokens(context)
    if count == embeds:
        return []
    if count == 0:
        return [
            Finding(
                "no-placeholder",
                "error",
                f"the prompt holds 0 placeholder tokens{tokens} but the encoder returned "
                f"{embeds} embedding rows for {items_text([i.index for i in items])}",
                hints.NO_PLACEHOLDER_HINT,
            )
        ]
    empty = _empty_slots(context, items, count - embeds)
    if empty:
        return [_missing_items(items, empty, tokens)]
    stray = _stray(context)
    smallest = min((i.rows for i in items), default=0)
    if stray or (0 < count - embeds < max(smallest, 2)):
        where = f" at position(s) {_positions(stray)}" if stray else ""
        extra = len(stray) if stray else count - embeds
        return [
            Finding(
                "stray-placeholder",
                "error",
                f"the prompt holds {count} placeholder tokens{tokens} but the items bring "
                f"{embeds} embedding rows: {extra} placeholder token(s) outside any item's "
                f"slot{where}",
                hints.STRAY_HINT,
            )
        ]
    return [
        Finding(
            "placeholder-count",
            "error",
            f"the prompt holds {count} placeholder tokens{tokens} but the items bring {embeds} "
            "embedding rows",
            hints.PLACEHOLDER_COUNT_HINT,
        )
    ]


def _runs(positions: Sequence[int]) -> list[tuple[int, int]]:
    """``(start, length)`` of each run of consecutive positions (sorted)."""
    runs: list[tuple[int, int]] = []
    for p in sorted(positions):
        if runs and runs[-1][0] + runs[-1][1] == p:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    return runs


def _empty_slots(
    context: SequenceContext, items: Sequence[ItemRows], extra: int
) -> list[tuple[int, int]]:
    """Runs of placeholder tokens with no item, each exactly one item's size: the ``extra``
    placeholders are whole slots of items that never came (a prompt with two image slots and
    one image), not tokens typed in the text. Empty when the evidence is not that."""
    positions = context.placeholder_positions
    if extra <= 0 or positions is None or not items:
        return []
    sizes = {i.mask_len if i.mask_len is not None else i.rows for i in items}
    ranges = context.placeholder_ranges
    if ranges:  # the items' slots are known: the rest is what no item took
        runs = _runs([p for p in positions if not any(o <= p < o + n for o, n in ranges)])
    else:  # match runs to items by size, in order; the runs left over have no item
        runs, wanted = _runs(positions), [i.mask_true or i.rows for i in items]
        for n in wanted:
            hit = next((r for r in runs if r[1] == n), None)
            if hit is None:
                return []
            runs.remove(hit)
    if not runs or sum(n for _, n in runs) != extra or any(n not in sizes for _, n in runs):
        return []
    return runs


def _missing_items(items: Sequence[ItemRows], empty: list[tuple[int, int]], tokens: str) -> Finding:
    found, slots = len(items), len(items) + len(empty)
    where = ", ".join(f"{start}–{start + n - 1}" for start, n in empty[:6])
    return Finding(
        "item-count",
        "error",
        f"{found} item(s) but the prompt holds {slots} item slots: {len(empty)} run(s) of "
        f"placeholder tokens{tokens} of an item's size (positions {where}) have no item",
        "fewer images/videos passed than the prompt has placeholders for (one per <image> "
        "marker in the text), or the encoder dropped one; "
        + hints.count_hint(found, slots).split("; ", 1)[-1],
    )


def _tokens(context: SequenceContext) -> str:
    ids = context.placeholder_token_ids
    if not ids:
        return ""
    beyond = ""
    if context.ids_dtype is not None:
        name, largest = context.ids_dtype
        big = ", ".join(str(t) for t in ids if t > largest)
        beyond = f"; {big} cannot occur in the {name} input_ids, whose ids are at most {largest:,}"
    return f" (id {', '.join(str(t) for t in ids)}{beyond})"


def _positions(positions: Sequence[int], limit: int = 6) -> str:
    shown = ", ".join(str(p) for p in positions[:limit])
    return shown + (f", … ({len(positions) - limit} more)" if len(positions) > limit else "")


def _stray(context: SequenceContext) -> list[int]:
    """Placeholder positions outside every item's range (needs both)."""
    if context.placeholder_positions is None or not context.placeholder_ranges:
        return []
    ranges = context.placeholder_ranges
    return [p for p in context.placeholder_positions if not any(o <= p < o + n for o, n in ranges)]


def judge_mask_tokens(
    index: int, mask: torch.Tensor | None, context: SequenceContext
) -> list[Finding]:
    """Positions item ``index``'s mask marks as embeddings (its range's offset + the mask's
    True indices) whose prompt token is not a placeholder token id: the embeddings would
    overwrite text tokens. Needs the prompt's ``input_ids``, ``placeholder_token_ids``, the
    item's range and a 1-D bool mask as long as that range."""
    ranges = context.placeholder_ranges
    positions = context.placeholder_positions
    if (
        mask is None
        or not context.positions_from_ids
        or positions is None
        or not ranges
        or index >= len(ranges)
        or mask.ndim != 1
        or mask.dtype != torch.bool
        or mask.shape[0] != ranges[index][1]
    ):
        return []
    offset = ranges[index][0]
    marked = (mask.nonzero().flatten().cpu() + offset).tolist()
    held = sorted(positions)
    off = [p for p in marked if not _holds(held, p)]
    if not off:
        return []
    ids = ", ".join(str(t) for t in context.placeholder_token_ids)
    return [
        Finding(
            "mask-not-placeholder",
            "error",
            f"item {index}'s mask marks {len(off)} of its {len(marked)} embedding position(s) "
            f"(range offset {offset}) where the prompt holds no placeholder token (id {ids}): "
            f"position(s) {_positions(off)}",
            hints.MASK_TOKENS_HINT,
            item=index,
        )
    ]


def _holds(positions: Sequence[int], p: int) -> bool:
    i = bisect.bisect_left(positions, p)
    return i < len(positions) and positions[i] == p


def judge_ranges(context: SequenceContext, items: Sequence[ItemRows]) -> list[Finding]:
    """Each item's placeholder range length against its rows, for items without a mask."""
    ranges = context.placeholder_ranges
    if not ranges:
        return []
    findings = []
    for item in items:
        if item.index >= len(ranges) or item.mask_true is not None:
            continue
        offset, length = ranges[item.index]
        if length != item.rows:
            findings.append(
                Finding(
                    "range-length",
                    "error",
                    f"item {item.index} has {item.rows} rows but its placeholder range "
                    f"(offset {offset}) is {length} positions long",
                    hints.PLACEHOLDER_COUNT_HINT,
                    item=item.index,
                )
            )
    return findings


def boundary_rows(items: Sequence[ItemRows], context: SequenceContext) -> int | None:
    """``k`` when every item has exactly ``k`` (1..4) more rows than its mask (or range) has
    embedding positions: begin/end-of-image tokens embedded that the mask excludes."""
    excess: set[int] = set()
    ranges = context.placeholder_ranges or ()
    for item in items:
        if item.mask_true is not None:
            excess.add(item.rows - item.mask_true)
        elif item.index < len(ranges):
            excess.add(item.rows - ranges[item.index][1])
        else:
            return None
    if len(excess) != 1:
        return None
    k = excess.pop()
    return k if 0 < k <= MAX_BOUNDARY_ROWS else None


def judge_boundary(k: int, items: Sequence[ItemRows]) -> Finding:
    """The finding for :func:`boundary_rows`. With one item the pattern is not seen across
    items, so a tokens-per-item skew is as likely and both are said."""
    if len(items) == 1:
        return Finding(
            "boundary-rows",
            "error",
            f"item {items[0].index} has {k} more embedding row(s) than its mask has embedding "
            "positions: begin/end-of-image rows embedded that the mask excludes, or the "
            "processor and the model disagree on tokens per item (one item cannot tell "
            "the two apart)",
            f"{hints.BOUNDARY_HINT}; otherwise {hints.PLACEHOLDER_COUNT_HINT}",
            item=items[0].index,
        )
    return Finding(
        "boundary-rows",
        "error",
        f"every item has exactly {k} more embedding row(s) than its mask has embedding "
        f"positions ({items_text([i.index for i in items])}): begin/end-of-image rows "
        "embedded that the mask excludes",
        hints.BOUNDARY_HINT,
    )


def judge_width(
    groups: Mapping[int, Sequence[int]], hidden: int | None, context: SequenceContext
) -> tuple[int | None, list[Finding], set[int]]:
    """The expected row width, and findings about widths the hidden-size check would
    misread: Qwen3-VL deepstack rows and a projector sharded under tensor parallelism.

    Returns ``(want, findings, explained)``: ``want`` is what the other widths are checked
    against (None: no model value), ``explained`` the widths these findings account for.
    """
    findings: list[Finding] = []
    want = context.row_width
    levels = context.deepstack_levels
    if want is None and hidden is not None and levels:
        want = (1 + levels) * hidden
    if want is None:
        want = hidden
    explained: set[int] = set()
    if hidden is None:
        return want, findings, explained
    tp = context.tp_size
    for width, indices in sorted(groups.items()):
        if width == want:
            continue
        if tp and tp > 1 and width * tp == (want or hidden):
            explained.add(width)
            findings.append(
                Finding(
                    "tp-sharded-width",
                    "error",
                    f"{items_text(indices)} have width {width} = {want} / tp {tp}: the "
                    f"projector output is this rank's shard (tp rank {context.tp_rank})",
                    hints.TP_HINT,
                    item=indices[0] if len(indices) == 1 else None,
                )
            )
        elif levels == 0 and width % hidden == 0 and width > hidden and want == hidden:
            explained.add(width)
            findings.append(_no_deepstack(width, hidden, indices, context))
        elif (
            levels is None
            and len(groups) == 1
            and context.row_width is None
            and width % hidden == 0
            and 2 <= width // hidden <= MAX_DEEPSTACK_FACTOR
        ):
            factor = width // hidden
            explained.add(width)
            findings.append(
                Finding(
                    "deepstack-width",
                    "warning",
                    f"{items_text(indices)} have width {width} = {factor} × hidden size "
                    f"{hidden}: deepstack outputs (Qwen3-VL: 1 + {factor - 1} levels "
                    "concatenated)?",
                    hints.DEEPSTACK_HINT,
                    item=indices[0] if len(indices) == 1 else None,
                )
            )
    return want, findings, explained


def _no_deepstack(
    width: int, hidden: int, indices: Sequence[int], context: SequenceContext
) -> Finding:
    """Rows a multiple of the hidden size wide, for a model recorded to have no deepstack
    levels (``deepstack_levels=0``): the projector's width is wrong, not deepstack."""
    key = f" (config key {context.hidden_size_source})" if context.hidden_size_source else ""
    return Finding(
        "hidden-size",
        "error",
        f"{items_text(indices)} {'has' if len(indices) == 1 else 'have'} width {width} = "
        f"{width // hidden} × hidden size {hidden}, and the model has no deepstack levels "
        f"(deepstack_levels=0): the encoder's projector outputs {width} columns, the "
        f"language model takes {hidden}{key}",
        hints.NO_DEEPSTACK_HINT,
        item=indices[0] if len(indices) == 1 else None,
    )


def judge_engine_error(context: SequenceContext) -> list[Finding]:
    """The engine's own error, when the dump was captured on a failure."""
    if not context.engine_error:
        return []
    text = " ".join(context.engine_error.split())
    return [
        Finding(
            "engine-error",
            "info",
            f"captured on the engine's error: {text[:500]}",
            "the other findings say why the engine raised it",
        )
    ]
