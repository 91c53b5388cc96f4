"""The compare finding vocabulary (stable codes, severities) and each item pair's diagnosis.

A failing pair gets one diagnosis, the first that the evidence supports, in this order: NaN/inf
on one side; rows permuted; one scale; per-row norms; drift along the rows; boundary rows;
a few outlier rows; else a uniform divergence. Each is tested on a pair built by the
transformation it names (``tests/compare/``).
"""

from __future__ import annotations

from typing import Final

import torch

from mmcli.compare import patterns
from mmcli.compare.metrics import ItemMetrics
from mmcli.findings import Finding, Severity

#: Every compare code and its severity.
CODES: Final[dict[str, Severity]] = {
    "compare-unpaired": "error",
    "compare-item-count": "error",
    "compare-shape": "error",
    "compare-mask": "error",
    "compare-nonfinite": "error",
    "compare-permuted": "error",
    "compare-items-swapped": "error",
    "compare-scale": "error",
    "compare-row-norm": "error",
    "compare-drift": "error",
    "compare-boundary": "error",
    "compare-outlier": "error",
    "compare-divergent": "error",
    "compare-numerics": "info",
}


def finding(code: str, message: str, hint: str | None, item: int | None = None) -> Finding:
    """A compare finding, its severity from :data:`CODES`."""
    return Finding(code=code, severity=CODES[code], message=message, hint=hint, item=item)


def _g(value: float) -> str:
    return f"{value:.4g}"


def _cos(value: float) -> str:
    return f"{value:.6f}" if value > 0.99 else f"{value:.4f}"


def item_count(ref: int, cand: int) -> Finding:
    """REF and CAND hold different numbers of items."""
    return finding(
        "compare-item-count",
        f"REF has {ref} items, CAND {cand}; the first {min(ref, cand)} are compared in order",
        "an item dropped, split or merged on one side: check the images/videos per prompt "
        "and the processor's tiling on both sides",
    )


def shape(index: int, ref: tuple[int, ...], cand: tuple[int, ...]) -> Finding:
    """Item shapes differ: which case, and its likely cause."""
    what, cause = patterns.shape_case(ref, cand)
    return finding(
        "compare-shape",
        f"item {index}: REF {list(ref)}, CAND {list(cand)}: {what}",
        cause,
        index,
    )


def mask(index: int, ref: torch.Tensor | None, cand: torch.Tensor | None, rows: int) -> Finding:
    """The ``is_embed`` masks differ (an absent mask is every position an embedding)."""

    def full(m: torch.Tensor | None, n: int) -> torch.Tensor:
        return torch.ones(n, dtype=torch.bool) if m is None else m.reshape(-1).to("cpu", torch.bool)

    a, b = full(ref, rows), full(cand, rows)
    if a.numel() != b.numel():
        detail = f"REF's mask has {a.numel()} positions, CAND's {b.numel()}"
    else:
        first = int((a != b).nonzero()[0])
        detail = (
            f"they differ at {int((a != b).sum())} of {a.numel()} positions, first at "
            f"{first} (REF {bool(a[first])}, CAND {bool(b[first])})"
        )
    return finding(
        "compare-mask",
        f"item {index}: is_embed masks differ: {detail} (REF {int(a.sum())} embeds, CAND "
        f"{int(b.sum())})",
        "the placeholder layout differs: break / special tokens inside the item's range placed "
        "differently (or kept on one side only)",
        index,
    )


def diagnose(index: int, ref: torch.Tensor, cand: torch.Tensor, m: ItemMetrics) -> list[Finding]:
    """The findings of one equal-shape item pair: none when bit-identical, ``compare-numerics``
    when within tolerance, else the one diagnosis the evidence supports."""
    if m.bit_identical:
        return []
    tol = m.tolerance
    summary = (
        f"cosine {_cos(m.cosine)}, min row cosine {_cos(m.row_cosine_min)} (row "
        f"{m.row_cosine_min_row}), max abs {_g(m.max_abs)}, rel RMSE {_g(m.rel_rmse)}"
    )
    perm = patterns.find_permutation(ref, cand) if not m.nonfinite_one_sided else None
    if perm is not None:  # judged first: rows alike enough can pass the tolerance out of order
        return [
            finding(
                "compare-permuted",
                f"item {index}: every row matches a REF row one-to-one under a permutation, "
                f"far closer than in order: {patterns.describe_permutation(perm)} ({summary})",
                "patch order differs: the spatial-merge / patch-flatten order (block-major "
                "against raster, a transposed grid) in CAND's vision tower or processor",
                index,
            )
        ]
    if m.passed:
        ulp = f", max {m.max_ulp} ULP" if m.max_ulp is not None else ""
        return [
            finding(
                "compare-numerics",
                f"item {index}: not bit-identical but within the {tol.profile} tolerance "
                f"({summary}{ulp})",
                None,
                index,
            )
        ]
    rows = m.rows
    width = ref.shape[-1] if ref.ndim else 1
    if m.nonfinite_one_sided:
        row, col = m.first_nonfinite or (0, 0)
        side = "CAND" if bool(torch.isfinite(ref.reshape(-1, width)[row, col])) else "REF"
        fp16 = torch.float16 in (ref.dtype, cand.dtype)
        return [
            finding(
                "compare-nonfinite",
                f"item {index}: {m.nonfinite_one_sided} NaN/inf values on one side only, first "
                f"at row {row}, column {col} (in {side})",
                "an fp16 overflow in the vision tower? run it in bf16 or fp32"
                if fp16
                else "a NaN/inf produced on that side only: an overflow, a division by zero "
                "or uninitialised memory; `mmcli check-embeddings` on that dump locates it",
                index,
            )
        ]
    scaled = patterns.scaling(rows, m.scale)
    if scaled is not None and scaled.uniform:
        return [
            finding(
                "compare-scale",
                f"item {index}: CAND ≈ c·REF with c = {_g(scaled.scale)} (rows collinear, "
                f"norm ratios {_g(scaled.low)}–{_g(scaled.high)})",
                patterns.scale_cause(scaled.scale, width),
                index,
            )
        ]
    if scaled is not None:
        return [
            finding(
                "compare-row-norm",
                f"item {index}: rows collinear (min row cosine {_cos(m.row_cosine_min)}) but "
                f"per-row norm ratios vary from {_g(scaled.low)} to {_g(scaled.high)}",
                "a final norm missing or different on one side (post-layernorm / RMSNorm of "
                "the vision tower or projector)",
                index,
            )
        ]
    grows = patterns.drift(rows)
    if grows is not None:
        return [
            finding(
                "compare-drift",
                f"item {index}: the error grows with the row index (relative row error "
                f"{_g(grows[0])} over the first quarter, {_g(grows[1])} over the last; {summary})",
                "positions: RoPE / M-RoPE or position-embedding interpolation differ (the "
                "error grows with the image size too)",
                index,
            )
        ]
    edge = patterns.edges(rows.bad)
    if edge is not None:
        head, tail = edge
        where = " and ".join(
            part
            for part in (f"the first {head}" if head else "", f"the last {tail}" if tail else "")
            if part
        )
        return [
            finding(
                "compare-boundary",
                f"item {index}: only {where} rows differ; the other "
                f"{rows.bad.numel() - head - tail} are within tolerance ({summary})",
                "boundary tokens: CLS / begin- or end-of-image rows computed differently (or "
                "shifted by one) on one side",
                index,
            )
        ]
    few = patterns.outliers(rows.bad)
    if few is not None:
        shown = ", ".join(f"{r} ({_cos(float(rows.cosine[r]))})" for r in few[:8])
        return [
            finding(
                "compare-outlier",
                f"item {index}: {len(few)} rows far worse than the item: rows {shown} (row "
                f"cosine); item cosine {_cos(m.cosine)}",
                "a few tokens computed differently: an attention mask or padding edge case, "
                "or an overflow on those rows",
                index,
            )
        ]
    return [divergent(index, m, summary)]


def divergent(index: int, m: ItemMetrics, summary: str) -> Finding:
    """A uniform difference beyond tolerance, with the cause its cosine band suggests."""
    cos = m.cosine
    if cos >= 0.99:
        hint = (
            "a small uniform difference: different kernels or precision; if these are two "
            "engines, `--profile port` is the bar"
            if m.tolerance.profile != "port"
            else "preprocessing (resize, normalisation constants) or a kernel difference"
        )
    elif cos >= 0.9:
        hint = "preprocessing (resize, normalisation constants) or a kernel difference"
    elif cos >= 0.5:
        hint = "a large difference: a wrong layer, or preprocessing of another image"
    else:
        hint = "wrong weights or layer (or another image altogether)"
    return finding(
        "compare-divergent",
        f"item {index}: differs uniformly beyond the {m.tolerance.profile} tolerance ({summary})",
        hint,
        index,
    )


def swapped(cand_index: int, ref_index: int) -> Finding:
    """CAND's item ``cand_index`` is REF's ``ref_index``."""
    return finding(
        "compare-items-swapped",
        f"item {cand_index} of CAND matches item {ref_index} of REF (within tolerance)",
        "items are in another order: the batching or sorting of multimodal items differs "
        "(by modality, by request, or a per-image attention mask)",
        cand_index,
    )
