"""One item pair measured: every metric in float64, computed a block of rows at a time.

The two items are read whole (as the engine holds them), but the float64 work runs on blocks
of about half a million elements through preallocated buffers, so the working memory beyond
the two items is a few tens of MiB whatever their size. Row dot products go through ``bmm``
(one BLAS pass for ``r·r``, ``r·c`` and ``c·c`` together).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from mmcli.compare.tolerance import Tolerance

#: Elements per float64 block: 4 MiB per buffer, four buffers.
BLOCK_ELEMENTS = 1 << 19
#: Integer views for the ULP distance, by dtype: (view dtype, wide dtype, magnitude bits).
_ULP_VIEWS = {
    torch.float16: (torch.int16, torch.int32, 15),
    torch.bfloat16: (torch.int16, torch.int32, 15),
    torch.float32: (torch.int32, torch.int64, 31),
}


def as_rows(t: torch.Tensor) -> torch.Tensor:
    """The tensor as 2-D rows: the last dimension is a row (a 1-D tensor is one row)."""
    if t.ndim == 0:
        return t.reshape(1, 1)
    if t.ndim == 1:
        return t.reshape(1, -1)
    return t.reshape(-1, t.shape[-1])


@dataclass
class RowStats:
    """Per-row figures (float64, CPU) that the diagnosis reads; not part of the JSON."""

    ref_norm: torch.Tensor
    cand_norm: torch.Tensor
    cosine: torch.Tensor
    #: ``‖c_i − r_i‖ / ‖r_i‖`` (0 where both rows are zero, inf where only REF's is).
    error: torch.Tensor
    #: Rows outside the tolerance (an element out of bounds, a cosine under the floor, or a
    #: NaN/inf on one side only).
    bad: torch.Tensor


@dataclass
class ItemMetrics:
    """The metrics of one item pair of equal shapes (NaN where a figure is undefined)."""

    shape: tuple[int, ...]
    tolerance: Tolerance
    bit_identical: bool
    max_abs: float
    mean_abs: float
    rmse: float
    rel_rmse: float
    max_rel: float
    cosine: float
    row_cosine_min: float
    row_cosine_min_row: int | None
    row_cosine_mean: float
    norm_ratio: float
    scale: float
    within: float | None
    worst: tuple[int, int] | None
    worst_values: tuple[float, float] | None
    max_ulp: int | None
    nonfinite_one_sided: int
    nonfinite_both: int
    first_nonfinite: tuple[int, int] | None
    rows: RowStats = field(repr=False)

    @property
    def passed(self) -> bool:
        """Whether the pair is within its tolerance."""
        if self.bit_identical:
            return True
        if self.nonfinite_one_sided:
            return False
        tol = self.tolerance
        if tol.elementwise and (self.within is None or self.within < 1.0):
            return False
        if tol.min_item_cosine is not None and not self.cosine >= tol.min_item_cosine:
            return False
        if tol.min_row_cosine is not None and not self.row_cosine_min >= tol.min_row_cosine:
            return False
        return tol.max_rel_rmse is None or self.rel_rmse <= tol.max_rel_rmse

    def to_json(self) -> dict[str, Any]:
        """Every figure by name (NaN and inf become null when the document is printed)."""
        return {
            "bit_identical": self.bit_identical,
            "max_abs": self.max_abs,
            "mean_abs": self.mean_abs,
            "rmse": self.rmse,
            "rel_rmse": self.rel_rmse,
            "max_rel": self.max_rel,
            "cosine": self.cosine,
            "row_cosine": {
                "min": self.row_cosine_min,
                "min_row": self.row_cosine_min_row,
                "mean": self.row_cosine_mean,
            },
            "norm_ratio": self.norm_ratio,
            "scale": self.scale,
            "within_tolerance": self.within,
            "worst": None
            if self.worst is None or self.worst_values is None
            else {
                "row": self.worst[0],
                "col": self.worst[1],
                "ref": self.worst_values[0],
                "cand": self.worst_values[1],
            },
            "max_ulp": self.max_ulp,
            "nonfinite": {"one_sided": self.nonfinite_one_sided, "both": self.nonfinite_both},
        }


class _Sums:
    """Running totals over the blocks of one item."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.aa: list[torch.Tensor] = []
        self.bb: list[torch.Tensor] = []
        self.ab: list[torch.Tensor] = []
        self.dd: list[torch.Tensor] = []
        self.bad: list[torch.Tensor] = []
        self.abs_sum = 0.0
        self.max_abs = 0.0
        self.worst: tuple[int, int] | None = None
        self.worst_values: tuple[float, float] | None = None
        self.max_rel = 0.0
        self.within = 0
        self.max_ulp = 0
        self.one_sided = 0
        self.both = 0
        self.first: tuple[int, int] | None = None
        self.identical = True


def measure(
    ref: torch.Tensor,
    cand: torch.Tensor,
    tol: Tolerance,
    *,
    block_elements: int = BLOCK_ELEMENTS,
) -> ItemMetrics:
    """Measure ``cand`` against ``ref`` (same shape; any floating dtypes; one device)."""
    a_rows, b_rows = as_rows(ref), as_rows(cand)
    n, width = a_rows.shape
    step = max(1, block_elements // max(width, 1))
    ulp_view = _ULP_VIEWS.get(ref.dtype) if ref.dtype == cand.dtype else None
    bufs = _Buffers(min(step, max(n, 1)), width, ref.device, ulp_view)
    sums = _Sums(n)
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        _block(sums, a_rows[r0:r1], b_rows[r0:r1], r0, bufs, tol, ulp_view)
    return _finish(sums, tuple(ref.shape), width, tol, ulp_view is not None)


class _Buffers:
    """Every block-sized temporary of :func:`_block`, allocated once per item: the blocks
    then allocate nothing of their size, so the heap does not grow by fragments of them."""

    def __init__(
        self,
        rows: int,
        width: int,
        device: torch.device,
        ulp_view: tuple[torch.dtype, torch.dtype, int] | None,
    ) -> None:
        f64 = torch.float64
        self.pair = torch.empty((rows, 2, width), dtype=f64, device=device)
        self.diff = torch.empty((rows, width), dtype=f64, device=device)
        self.mag = torch.empty_like(self.diff)
        self.bound = torch.empty_like(self.diff)
        self.ok = torch.empty((rows, width), dtype=torch.bool, device=device)
        wide = ulp_view[1] if ulp_view is not None else torch.int32
        self.ia = torch.empty((rows, width), dtype=wide, device=device)
        self.ib = torch.empty_like(self.ia)
        self.isign = torch.empty_like(self.ia)


def _block(
    s: _Sums,
    ra: torch.Tensor,
    rb: torch.Tensor,
    r0: int,
    bufs: _Buffers,
    tol: Tolerance,
    ulp_view: tuple[torch.dtype, torch.dtype, int] | None,
) -> None:
    k, width = ra.shape
    x = bufs.pair[:k]
    a, b = x[:, 0], x[:, 1]
    # The first row decides whether the whole block is worth testing for equality: a full
    # test of rows that differ would be one more pass over both.
    if ra.dtype == rb.dtype and torch.equal(ra[:1], rb[:1]) and torch.equal(ra, rb):
        # Bit-identical rows: nothing differs, only the norms are needed.
        a.copy_(ra)
        aa = torch.bmm(a.unsqueeze(1), a.unsqueeze(2)).reshape(k)
        if bool(torch.isfinite(aa).all()):
            zeros = torch.zeros(k, dtype=torch.float64, device=a.device)
            _add_rows(s, aa, aa, aa, zeros, torch.zeros(k, dtype=torch.bool, device=a.device))
            s.within += k * width
            return
        # NaN/inf in identical rows: measured below, where both-sided ones are counted.
    a.copy_(ra)
    b.copy_(rb)
    if ra.dtype != rb.dtype:
        s.identical = False
    gram = torch.bmm(x, x.transpose(1, 2))
    finite = one = None
    bad = torch.zeros(k, dtype=torch.bool, device=a.device)
    if not bool(torch.isfinite(gram).all()):
        finite = torch.isfinite(a) & torch.isfinite(b)
        same = ~torch.isfinite(a) & ~torch.isfinite(b) & ((a == b) | (a.isnan() & b.isnan()))
        one = ~finite & ~same
        s.both += int(same.sum())
        ones = int(one.sum())
        if ones:
            s.identical = False
            bad |= one.any(dim=1)
            if s.first is None:
                row, col = (int(v) for v in one.nonzero()[0])
                s.first = (r0 + row, col)
        s.one_sided += ones
        a.masked_fill_(~finite, 0.0)
        b.masked_fill_(~finite, 0.0)
        gram = torch.bmm(x, x.transpose(1, 2))
    d = torch.sub(b, a, out=bufs.diff[:k])
    dd = torch.bmm(d.unsqueeze(1), d.unsqueeze(2)).reshape(k)
    ad = d.abs_()
    if bool((dd != 0).any()):
        s.identical = False
    s.abs_sum += float(ad.sum())
    if ad.numel():
        # Row maxima first, then the row: a flat argmax over float64 is several times slower.
        peaks, cols = ad.max(dim=1)
        row = int(peaks.argmax())
        peak = float(peaks[row])
        if s.worst is None or peak > s.max_abs:
            s.max_abs = peak
            col = int(cols[row])
            s.worst = (r0 + row, col)
            s.worst_values = (float(ra[row, col]), float(rb[row, col]))
    mag = torch.abs(a, out=bufs.mag[:k])
    if tol.elementwise:
        assert tol.rtol is not None and tol.atol is not None
        bound = torch.mul(mag, tol.rtol, out=bufs.bound[:k]).add_(tol.atol)
        ok = torch.le(ad, bound, out=bufs.ok[:k])
        if one is not None:
            ok &= ~one  # masked to 0 above; both-sided NaN/inf stay in bounds (they agree)
        per_row = ok.sum(dim=1)
        s.within += int(per_row.sum())
        bad |= per_row < width
    rel = torch.div(ad, mag, out=mag)
    rel.nan_to_num_(nan=0.0, posinf=0.0)  # elements where REF is 0 are left out
    if rel.numel():
        s.max_rel = max(s.max_rel, float(rel.max()))
    if ulp_view is not None and not s.identical:
        s.max_ulp = max(s.max_ulp, _ulp(ra, rb, ulp_view, finite, bufs))
    _add_rows(s, gram[:, 0, 0], gram[:, 1, 1], gram[:, 0, 1], dd, bad)


def _ulp(
    ra: torch.Tensor,
    rb: torch.Tensor,
    view: tuple[torch.dtype, torch.dtype, int],
    finite: torch.Tensor | None,
    bufs: _Buffers,
) -> int:
    """The largest distance in units of the last place between the finite element pairs: the
    bit patterns mapped to integers in the order of the values (−0 and +0 both to 0)."""
    narrow, _, bits = view
    magnitude = (1 << bits) - 1
    k = ra.shape[0]
    sign = bufs.isign[:k]

    def ordered(t: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        # Sign-magnitude bits to two's complement: -m for a negative value of magnitude m.
        # Arithmetic, not torch.where: where is 25x slower on these integer tensors (measured
        # on the CPU build, 128 x 4096 bf16: 53 ms against 2 ms).
        v = out.copy_(t.view(narrow))
        torch.bitwise_right_shift(v, bits, out=sign)  # -1 for a negative value, else 0
        return v.bitwise_and_(magnitude).bitwise_xor_(sign).sub_(sign)

    dist = ordered(ra, bufs.ia[:k]).sub_(ordered(rb, bufs.ib[:k])).abs_()
    if finite is not None:
        dist.masked_fill_(~finite, 0)
    return int(dist.max()) if dist.numel() else 0


def _add_rows(
    s: _Sums,
    aa: torch.Tensor,
    bb: torch.Tensor,
    ab: torch.Tensor,
    dd: torch.Tensor,
    bad: torch.Tensor,
) -> None:
    s.aa.append(aa.to("cpu", copy=True))
    s.bb.append(bb.to("cpu", copy=True))
    s.ab.append(ab.to("cpu", copy=True))
    s.dd.append(dd.to("cpu", copy=True))
    s.bad.append(bad.to("cpu", copy=True))


#: Row cosines closer than this to the minimum count as tied with it (float64 sums of a few
#: thousand products agree to about 1e-13).
_TIE = 1e-12


def _ratio(num: float, den: float) -> float:
    if den == 0:
        return 1.0 if num == 0 else math.inf
    return num / den


def _finish(
    s: _Sums, shape: tuple[int, ...], width: int, tol: Tolerance, has_ulp: bool
) -> ItemMetrics:
    def cat(parts: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
        return torch.cat(parts) if parts else torch.zeros(0, dtype=dtype)

    aa, bb, ab = cat(s.aa, torch.float64), cat(s.bb, torch.float64), cat(s.ab, torch.float64)
    dd, bad = cat(s.dd, torch.float64), cat(s.bad, torch.bool)
    ref_norm, cand_norm = aa.sqrt(), bb.sqrt()
    denom = ref_norm * cand_norm
    cosine = torch.where(denom > 0, ab / denom, (aa == bb).to(torch.float64))
    cosine = cosine.clamp_(-1.0, 1.0)
    identical = s.identical and not s.one_sided
    if identical:  # exactly 1, not 1 within the rounding of the division
        cosine.fill_(1.0)
    error = torch.where(
        aa > 0, dd.sqrt() / ref_norm, torch.where(dd > 0, math.inf, 0.0).to(torch.float64)
    )
    if tol.min_row_cosine is not None:
        bad = bad | (cosine < tol.min_row_cosine)
    total = s.rows * width
    saa, sbb, sab, sdd = (float(t.sum()) for t in (aa, bb, ab, dd))
    item_cos = sab / math.sqrt(saa * sbb) if saa > 0 and sbb > 0 else float(saa == sbb)
    low = None
    if cosine.numel() and not identical:
        # The first row at the minimum: rows tied within float64 rounding (a scaled copy has
        # every row at 1 - 1e-16 or so) are told apart by summation order, which differs
        # between CPUs, so the first of them is named, the same on every machine.
        low = int((cosine <= cosine.min() + _TIE).nonzero()[0, 0])
    return ItemMetrics(
        shape=shape,
        tolerance=tol,
        bit_identical=identical,
        max_abs=s.max_abs,
        mean_abs=s.abs_sum / total if total else 0.0,
        rmse=math.sqrt(sdd / total) if total else 0.0,
        rel_rmse=_ratio(math.sqrt(sdd), math.sqrt(saa)),
        max_rel=s.max_rel,
        cosine=1.0 if identical else max(-1.0, min(1.0, item_cos)),
        row_cosine_min=float(cosine.min()) if cosine.numel() else 1.0,
        row_cosine_min_row=low,
        row_cosine_mean=float(cosine.mean()) if cosine.numel() else 1.0,
        norm_ratio=_ratio(math.sqrt(sbb), math.sqrt(saa)),
        scale=_ratio(sab, saa),
        within=(s.within / total if total else 1.0) if tol.elementwise else None,
        worst=s.worst if s.max_abs > 0 else None,
        worst_values=s.worst_values if s.max_abs > 0 else None,
        max_ulp=s.max_ulp if has_ulp else None,
        nonfinite_one_sided=s.one_sided,
        nonfinite_both=s.both,
        first_nonfinite=s.first,
        rows=RowStats(ref_norm, cand_norm, cosine, error, bad),
    )
