"""What the evidence of a failing item pair looks like: shape cases, a row permutation, one
scale, per-row norms, and where along the rows the error sits (drift, boundary, outliers)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from mmcli.compare.metrics import RowStats, as_rows

#: Rows this close in direction count as collinear (the same row, rescaled).
COLLINEAR = 0.999
#: Per-row norm ratios within this relative spread count as one scale.
UNIFORM = 0.01
#: A best-fit scale this far from 1 is a scale, not rounding.
SCALED = 0.01
#: Spatial-merge factors tried for "s× rows at 1/s width" (2×2, 3×3, 4×4 merges).
MERGES = (4, 9, 16)
#: At most this many rows at each edge make a boundary.
EDGE = 4
#: Rows projected to this many dimensions to find a row permutation (then checked in full).
_PROJECTION = 64
#: The nearest REF rows (in the projection) measured at full width for each CAND row.
_NEAREST = 4
#: A moved row is permuted when the REF row in its own place is this many times farther than
#: the worst row of the permutation (the noise floor): 4× the distance, 16× the squared error.
PERMUTED_MARGIN = 4.0


def shape_case(ref: tuple[int, ...], cand: tuple[int, ...]) -> tuple[str, str]:
    """(what differs, its likely cause) for two item shapes that differ."""
    if len(ref) != 2 or len(cand) != 2:
        return (
            f"REF is {len(ref)}-D, CAND {len(cand)}-D",
            "a batch dim kept or a grid left unflattened on one side (`mmcli check-embeddings` "
            "on that dump names it)",
        )
    (n, h), (m, w) = ref, cand
    if m == n and w and h % w == 0 and h // w > 1:
        k = h // w
        return (
            f"CAND rows are {w} wide, REF's {h} = {w} × {k}",
            f"a tensor-parallel shard: CAND holds one of {k} ranks' slices of the projector "
            "output (the projector's output was not gathered)",
        )
    if m == n and h and w % h == 0 and w // h > 1:
        k = w // h
        return (
            f"REF rows are {h} wide, CAND's {w} = {h} × {k}",
            f"a tensor-parallel shard: REF holds one of {k} ranks' slices of the projector "
            "output (or CAND carries extra features: deepstack levels concatenated)",
        )
    for s in MERGES:
        if m == s * n and w * s == h:
            return (
                f"CAND has {s}× REF's rows at 1/{s} of its width",
                f"a spatial merge / pixel shuffle ({math.isqrt(s)}×{math.isqrt(s)}) not applied "
                "in CAND",
            )
        if n == s * m and h * s == w:
            return (
                f"REF has {s}× CAND's rows at 1/{s} of its width",
                f"a spatial merge / pixel shuffle ({math.isqrt(s)}×{math.isqrt(s)}) not applied "
                "in REF (or applied twice in CAND)",
            )
    if w == h and 0 < abs(m - n) <= EDGE:
        return (
            f"CAND has {m - n:+d} rows ({m} against {n})",
            "boundary or special tokens: begin/end-of-image or CLS rows kept on one side only, "
            "or a tokens-per-item skew between the two processors",
        )
    if w == h:
        return (
            f"CAND has {m} rows, REF {n}",
            "preprocessing: a different resize, tiling or max_pixels gives another patch count",
        )
    if m == n:
        return (
            f"CAND rows are {w} wide, REF's {h}",
            "a projector missing or different: the two sides return different hidden sizes",
        )
    return (
        f"CAND is {m} × {w}, REF {n} × {h}",
        "preprocessing (resize, tiling, max_pixels) and the projector both differ: compare "
        "the processor outputs first",
    )


@dataclass(frozen=True)
class Scaling:
    """Rows collinear with REF's: one scale (``uniform``) or per-row norm ratios that vary."""

    uniform: bool
    scale: float
    low: float
    high: float


def scaling(rows: RowStats, scale: float) -> Scaling | None:
    """A scale or a per-row norm change, when every row is collinear with REF's; else None."""
    live = rows.ref_norm > 0
    if not bool(live.any()) or float(rows.cosine[live].min()) < COLLINEAR:
        return None
    ratios = rows.cand_norm[live] / rows.ref_norm[live]
    low, high, mid = float(ratios.min()), float(ratios.max()), float(ratios.median())
    if mid <= 0:
        return None
    if (high - low) / mid <= UNIFORM:
        if abs(scale - 1.0) <= SCALED:
            return None
        return Scaling(True, scale, low, high)
    return Scaling(False, scale, low, high)


def scale_cause(scale: float, width: int) -> str:
    """The likely cause of one scale ``c`` on rows ``width`` wide."""
    root = math.sqrt(width) if width > 0 else 0.0
    if root and abs(scale * root - 1.0) <= 0.02:
        return f"c ≈ 1/√{width}: a normalizer by √hidden applied in CAND only (embed_scale?)"
    if root and abs(scale / root - 1.0) <= 0.02:
        return f"c ≈ √{width}: a normalizer by √hidden missing in CAND (embed_scale?)"
    return "a normalizer missing or extra on one side (embed_scale, a scaling factor)"


def drift(rows: RowStats) -> tuple[float, float] | None:
    """(error at the start, error at the end) when the error grows with the row index."""
    err = rows.error
    n = err.numel()
    if n < 8 or not bool(torch.isfinite(err).all()):
        return None
    quarter = max(1, n // 4)
    first, last = float(err[:quarter].mean()), float(err[-quarter:].mean())
    if last < 4 * first or last <= 0:
        return None
    index = torch.arange(n, dtype=torch.float64)
    ranks = _ranks(err)
    rho = float(torch.corrcoef(torch.stack([index, ranks]))[0, 1])
    return (first, last) if rho >= 0.8 else None


def _ranks(values: torch.Tensor) -> torch.Tensor:
    """Spearman ranks: tied values share their average rank (rows that agree exactly, all at
    error 0, must not look ordered by their index)."""
    _, inverse, counts = torch.unique(values, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).to(torch.float64)
    average: torch.Tensor = ends - (counts.to(torch.float64) + 1) / 2
    ranked: torch.Tensor = average[inverse]
    return ranked


def edges(bad: torch.Tensor) -> tuple[int, int] | None:
    """(k first, k last) when the failing rows are exactly runs at the two edges, each of at
    most :data:`EDGE` rows (and rows in between pass)."""
    n = bad.numel()
    count = int(bad.sum())
    if not count or n <= 2 * EDGE:
        return None
    head = 0
    while head < n and bool(bad[head]):
        head += 1
    tail = 0
    while tail < n - head and bool(bad[n - 1 - tail]):
        tail += 1
    if head + tail != count or head > EDGE or tail > EDGE:
        return None
    return head, tail


def outliers(bad: torch.Tensor) -> list[int] | None:
    """The failing rows, when they are a few (at most 3, or 1 % of the rows) of many."""
    n = bad.numel()
    count = int(bad.sum())
    if not count or n < 8 or count > max(3, n // 100):
        return None
    return [int(i) for i in bad.nonzero().flatten()]


def find_permutation(ref: torch.Tensor, cand: torch.Tensor) -> list[int] | None:
    """``p`` with CAND row ``j`` = REF row ``p[j]`` up to noise, ``p`` a permutation other than
    the identity, or None.

    Each CAND row is paired with its nearest REF row (Euclidean distance; candidates from the
    rows projected to a few dimensions, the nearest few then measured at full width, the
    in-order row always among them). The pairing must be one-to-one, and it must fit far better
    than the order given: the noise floor is the worst paired row's distance, and every moved
    row's distance to the REF row in its own place must exceed :data:`PERMUTED_MARGIN` times
    that floor. Noise of any size (bf16 kernels, another engine) leaves the pairing at the
    identity or fails the margin; a permutation under noise smaller than the rows' differences
    passes it."""
    a, b = as_rows(ref), as_rows(cand)
    n, width = a.shape
    if n < 2 or not width or b.shape != a.shape:
        return None
    gen = torch.Generator(device=a.device).manual_seed(0)
    proj = torch.randn(width, _PROJECTION, generator=gen, device=a.device, dtype=torch.float32)

    def projected(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([t[i : i + 1024].float() @ proj for i in range(0, n, 1024)])

    pa, pb = projected(a), projected(b)
    k = min(_NEAREST, n)
    best_parts, paired_parts, own_parts = [], [], []
    for i in range(0, n, 256):
        near = torch.cdist(pb[i : i + 256], pa).topk(k, dim=1, largest=False).indices
        own = torch.arange(i, i + near.shape[0], device=a.device)
        near = torch.cat([own[:, None], near], dim=1)  # the in-order row is always measured
        rows = b[i : i + 256].double()
        dist = (a[near].double() - rows[:, None, :]).norm(dim=2)
        pick = dist.argmin(dim=1)
        best_parts.append(near.gather(1, pick[:, None]).flatten())
        paired_parts.append(dist.gather(1, pick[:, None]).flatten())
        own_parts.append(dist[:, 0])
    best, paired, own_dist = torch.cat(best_parts), torch.cat(paired_parts), torch.cat(own_parts)
    moved = best != torch.arange(n, device=best.device)
    if not bool(moved.any()) or int(torch.bincount(best, minlength=n).max()) != 1:
        return None  # the identity, or not one-to-one
    if not bool(torch.isfinite(paired).all()):
        return None
    floor = float(paired.max())
    if float(own_dist[moved].min()) <= PERMUTED_MARGIN * floor:
        return None  # the order given fits about as well: noise, not a permutation
    return [int(v) for v in best.cpu()]


def describe_permutation(p: list[int]) -> str:
    """In words: reversed rows, a transposed grid, a block-major order, or a plain count."""
    n = len(p)
    target = torch.tensor(p)
    if p == list(range(n - 1, -1, -1)):
        return "CAND's rows are REF's in reverse order"
    index = torch.arange(n)
    for h in range(2, n // 2 + 1):
        if n % h:
            continue
        w = n // h
        if torch.equal(target, index.reshape(h, w).T.flatten()):
            return f"CAND's rows are REF's {h}×{w} grid transposed ({w}×{h}, column-major order)"
        for m in (2, 3, 4):
            if h % m or w % m:
                continue
            block = index.reshape(h // m, m, w // m, m).permute(0, 2, 1, 3).flatten()
            if torch.equal(target, block):
                return (
                    f"CAND's rows are REF's {h}×{w} grid in {m}×{m} block-major order "
                    "(REF is raster order)"
                )
            if torch.equal(target, block.argsort()):
                return (
                    f"CAND's rows are REF's {h}×{w} grid in raster order (REF is {m}×{m} "
                    "block-major)"
                )
    moved = int((target != index).sum())
    return f"{moved} of {n} rows are in other places"
