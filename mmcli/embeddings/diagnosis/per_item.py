"""Judgments of one item as it arrives: its shape, dtype, mask and values.

Each function takes the item (or what was measured of it) and returns its findings, plus the
few numbers the diagnosis keeps (:class:`MaskFacts`, :class:`Values`); none keeps state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch

from mmcli.dtypes import name_of
from mmcli.embeddings.hints import FP16_HINT, GRID_HINT, ndim_hint
from mmcli.findings import Finding
from mmcli.text import shape_text

_COMMON_FLOATS = (torch.bfloat16, torch.float16, torch.float32, torch.float64)


def judge_stacked(shape: Sequence[int], num_placeholders: int | None = None) -> Finding:
    """A stacked ``mm_embeddings`` tensor: a warning when 3-D (its items can be checked), else
    an error (``unflattened-grid`` for a 4-D ``(items, rows, cols, hidden)``)."""
    if len(shape) == 4:
        items, rows, cols = shape[0], shape[1], shape[2]
        fits = ""
        if num_placeholders is not None and num_placeholders == items * rows * cols:
            fits = f"; {items} × {rows} × {cols} = {num_placeholders} matches the placeholders"
        return Finding(
            "unflattened-grid",
            "error",
            f"mm_embeddings is one stacked {shape_text(shape)} tensor: {items} items of a "
            f"{rows} × {cols} grid each, not (tokens, hidden) rows{fits}",
            GRID_HINT,
        )
    if len(shape) == 3:
        return Finding(
            "stacked-3d",
            "warning",
            f"mm_embeddings is one stacked {shape_text(shape)} tensor: it passes the engine's "
            f"check as {shape[0]} items of {shape[1]} rows each",
            "a stacked tensor forces every item to the same token count; return a list of "
            "per-item (tokens, hidden) tensors if items can differ (other image sizes, tiling)",
        )
    return Finding(
        "stacked-ndim",
        "error",
        f"mm_embeddings is one stacked {shape_text(shape)} tensor ({len(shape)}-D); a stacked "
        "tensor must be 3-D (items, tokens, hidden)",
        (
            "a 2-D tensor iterates as 1-D rows: tokens flattened into items, or a single item "
            "missing its list; wrap it in a list"
            if len(shape) == 2
            else ndim_hint(shape[1:])
            if len(shape) > 3
            else "return per-item (tokens, hidden)"
        ),
    )


class MaskFacts(NamedTuple):
    """What a usable (1-D) mask says: its positions and True count; both None otherwise."""

    num_placeholders: int | None
    num_embeds: int | None
    findings: list[Finding]


def judge_mask(index: int, mask: torch.Tensor | None) -> MaskFacts:
    """The mask's shape, dtype and True count (reads the count)."""
    if mask is None:
        return MaskFacts(None, None, [])
    mshape = tuple(int(d) for d in mask.shape)
    if mask.ndim != 1:
        shape_finding = Finding(
            "mask-shape",
            "error",
            f"mask for item {index} has shape {shape_text(mshape)} ({mask.ndim}-D); it must "
            "be 1-D over the item's placeholder positions",
            "is_embed is one bool per placeholder position of one item, shape "
            "(num_placeholders,); a 2-D mask raises IndexError in the engine",
            item=index,
        )
        return MaskFacts(None, None, [shape_finding])
    findings: list[Finding] = []
    if mask.dtype != torch.bool:
        findings.append(
            Finding(
                "mask-dtype",
                "error",
                f"mask for item {index} has dtype {name_of(mask.dtype)}; it must be bool",
                "torch reads an integer 0/1 mask as row indices, which is silently wrong; "
                "convert with mask.bool()",
                item=index,
            )
        )
    count = int(torch.count_nonzero(_countable(mask)))
    if count == 0 and mshape[0] > 0:
        findings.append(
            Finding(
                "empty-item",
                "warning",
                f"mask for item {index} has no True position among {mshape[0]} placeholders",
                "no embedding lands in this item's placeholders: a mask built from the wrong "
                "token id, or a prompt whose image slot holds only special tokens",
                item=index,
            )
        )
    return MaskFacts(mshape[0], count, findings)


#: Same-width signed views of the unsigned dtypes that torch stores but has few CPU kernels for.
_SIGNED_VIEW = {
    getattr(torch, name): getattr(torch, signed)
    for name, signed in (("uint16", "int16"), ("uint32", "int32"), ("uint64", "int64"))
    if hasattr(torch, name)
}


def _countable(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` as a tensor that ``count_nonzero`` has a kernel for, with the same non-zero
    positions: uint16/32/64 viewed as signed ints of their width, float8 and other rare
    floats as fp32."""
    signed = _SIGNED_VIEW.get(mask.dtype)
    if signed is not None:
        return mask.view(signed)
    if mask.is_floating_point() and mask.dtype not in _COMMON_FLOATS:
        return mask.float()
    return mask


def judge_layout(
    index: int, shape: tuple[int, ...], dtype: torch.dtype, mask_count: int | None
) -> list[Finding]:
    """An item that is not 2-D, or (when 2-D) not floating point."""
    if len(shape) != 2:
        fits = ""
        if mask_count is not None and len(shape) >= 2:
            rows = 1
            for d in shape[:-1]:
                rows *= d
            if rows == mask_count:
                fits = f"; its {rows} rows after flattening match the mask's {mask_count} True"
        return [
            Finding(
                "item-ndim",
                "error",
                f"item {index} has shape {shape_text(shape)} ({len(shape)}-D); every item must "
                f"be 2-D (num_embeds, hidden){fits}",
                ndim_hint(shape),
                item=index,
            )
        ]
    if dtype.is_complex:
        return [
            Finding(
                "complex-dtype",
                "error",
                f"item {index} has dtype {name_of(dtype)}: complex numbers, not the real "
                "embeddings a language model takes",
                "encoder outputs must be real floating point: an FFT or a complex projection "
                "was returned unreduced, or a .to(dtype) picked the wrong type",
                item=index,
            )
        ]
    if not dtype.is_floating_point:
        return [
            Finding(
                "integer-dtype",
                "error",
                f"item {index} has dtype {name_of(dtype)}, which cannot hold the NaN fill of "
                "non-embedding placeholder positions",
                "encoder outputs must be floating point: token ids or a quantised tensor were "
                "returned instead of embeddings, or a .to(dtype) picked the wrong type",
                item=index,
            )
        ]
    return []


class Values(NamedTuple):
    """What a floating item's values say, and its fingerprint for finding duplicates."""

    finite: bool
    mean_row_norm: float | None
    fingerprint: tuple[Any, ...] | None
    findings: list[Finding]


def judge_values(index: int, emb: torch.Tensor, *, scattered_possible: bool = True) -> Values:
    """Finiteness, zero rows and row norms of a floating item. ``scattered_possible``: whether
    the item could be the scattered placeholder form (its mask leaves positions out)."""
    if emb.numel() == 0:
        return Values(True, None, None, [])
    key = (tuple(int(d) for d in emb.shape), name_of(emb.dtype))
    if emb.dtype not in _COMMON_FLOATS:
        emb = emb.float()  # float8 and the like have few kernels; fp32 holds them exactly
    norms = row_norms(emb) if emb.ndim == 2 else None
    # A NaN or inf anywhere makes its row norm non-finite, so finite norms prove the item
    # finite without a second pass; non-finite norms may be overflow, so then look closer.
    finite = (norms is not None and bool(torch.isfinite(norms).all())) or bool(
        torch.isfinite(emb).all()
    )
    if not finite:
        return Values(False, None, None, [_non_finite(index, emb, scattered_possible)])
    if norms is None:
        return Values(True, None, None, [])
    findings: list[Finding] = []
    zero = norms == 0
    if bool(zero.any()):
        # Tiny values can underflow to a norm of 0: confirm on the rows themselves.
        candidates = zero.nonzero().flatten()
        truly = candidates[(emb[candidates] == 0).all(dim=1)]
        if truly.numel():
            first = int(truly[0])
            findings.append(
                Finding(
                    "zero-rows",
                    "warning",
                    f"item {index} has {truly.numel()} all-zero rows of {emb.shape[0]} "
                    f"(first: row {first})",
                    "zero rows usually mean padding or masked-out patches were returned as "
                    "embeddings, or a buffer allocated with zeros was never filled",
                    item=index,
                )
            )
    fingerprint = (*key, hash(tuple(norms.tolist())))
    return Values(True, float(norms.double().mean()), fingerprint, findings)


def _non_finite(index: int, emb: torch.Tensor, scattered_possible: bool = True) -> Finding:
    nan = torch.isnan(emb)
    num_nan = int(nan.sum())
    num_inf = int(torch.isinf(emb).sum())
    bad = ~torch.isfinite(emb)
    flat = int(bad.flatten().nonzero()[0])
    where = []
    for dim in reversed(emb.shape):
        where.append(flat % dim)
        flat //= dim
    where.reverse()
    position = f"row {where[0]}, column {where[1]}" if emb.ndim == 2 else f"index {tuple(where)}"
    rows = ""
    # Causes in the order the evidence supports: an fp16 item overflows first (inf becomes
    # NaN through a normalisation), other dtypes rarely do.
    unfilled = "uninitialised memory (torch.empty never filled)"
    division = "a division by zero in a normalisation"
    if emb.dtype == torch.float16:
        hint = f"fp16 overflow in the encoder (run it in bf16 or fp32), {unfilled}, or {division}"
    else:
        hint = f"{unfilled}, {division}, or fp16 overflow before a cast (run it in bf16 or fp32)"
    if emb.ndim == 2:
        bad_rows = bad.any(dim=1)
        nan_rows = int(nan.all(dim=1).sum())
        rows = f" in {int(bad_rows.sum())} of {emb.shape[0]} rows"
        # The scattered form keeps its embedding rows: an item NaN in every row is not it.
        if nan_rows and scattered_possible and nan_rows < emb.shape[0]:
            hint = (
                f"{nan_rows} {'row is' if nan_rows == 1 else 'rows are'} entirely NaN: the "
                "scattered placeholder form (NaN at non-embedding positions) was passed as "
                "embeddings; otherwise " + hint
            )
        elif nan_rows:
            hint = (
                f"{hint} ({nan_rows} {'row is' if nan_rows == 1 else 'rows are'} entirely NaN; "
                "not the scattered placeholder form, which keeps its embedding rows "
                "where the mask is True)"
            )
    code = "non-finite"
    if emb.dtype == torch.float16 and num_inf:
        code, hint = "fp16-overflow", FP16_HINT
    return Finding(
        code,
        "error",
        f"item {index} has {num_nan} NaN and {num_inf} inf values{rows}; first at "
        f"(item {index}, {position})",
        hint,
        item=index,
    )


def judge_empty(index: int, shape: tuple[int, ...]) -> list[Finding]:
    """A 2-D item with no rows."""
    if len(shape) != 2 or shape[0] != 0:
        return []
    return [
        Finding(
            "empty-item",
            "warning",
            f"item {index} has 0 rows {shape_text(shape)}",
            "an empty item takes no placeholder positions: a zero-size image, a crop that "
            "removed everything, or a filtered batch",
            item=index,
        )
    ]


def judge_mask_count(index: int, rows: int, mask_count: int) -> list[Finding]:
    """A 1-D mask whose True count is not the item's rows."""
    if mask_count == rows:
        return []
    extra = (
        "; the engine would silently broadcast this 1-row item to every position"
        if rows == 1
        else ""
    )
    return [
        Finding(
            "mask-count",
            "error",
            f"mask for item {index} has {mask_count} True positions but the item has "
            f"{rows} embedding rows{extra}",
            "placeholders truncated by a max length, processor and model disagreeing on "
            "tokens per item (version skew, tiling), or the placeholder token emitted by "
            "the prompt itself (off by one)",
            item=index,
        )
    ]


def judge_duplicate(
    index: int,
    emb: torch.Tensor,
    candidates: Sequence[int],
    fetch: Callable[[int], torch.Tensor] | None,
) -> list[Finding]:
    """An item equal to an earlier one; ``candidates`` are the earlier items with the same
    fingerprint, and ``fetch`` reads one of them again to confirm."""
    if fetch is None:
        return []
    for other in candidates:
        earlier = fetch(other)
        if earlier.shape == emb.shape and torch.equal(earlier.to(emb.device), emb):
            return [
                Finding(
                    "duplicate-items",
                    "warning",
                    f"item {index} is identical to item {other} {shape_text(emb.shape)}",
                    "the same image passed twice, or one encoder output reused for several "
                    "items (a cache keyed on the wrong hash, or a loop that kept the first "
                    "result)",
                    item=index,
                )
            ]
    return []


def row_norms(emb: torch.Tensor) -> torch.Tensor:
    """Each row's L2 norm as fp32 (for bf16: from a batched dot product, to 0.5%)."""
    norms: torch.Tensor
    if emb.dtype in (torch.float32, torch.float64):
        norms = torch.linalg.vector_norm(emb, dim=1).float()
    elif emb.dtype == torch.bfloat16 and emb.is_contiguous():
        # Upcasting bf16 costs more than the reduction on CPU; a bf16 batched dot product
        # accumulates in fp32 and bf16 has fp32's range, so only precision is rounded off.
        squares = torch.bmm(emb.unsqueeze(1), emb.unsqueeze(2)).flatten()
        norms = squares.float().sqrt()
    else:  # fp16 squares overflow at 65504: accumulate in fp32
        norms = torch.linalg.vector_norm(emb, dim=1, dtype=torch.float32)
    return norms
