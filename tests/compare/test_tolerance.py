"""Rounding noise against the profiles, the overrides, and the metrics against a plain
float64 computation written here."""

from __future__ import annotations

import math

import pytest
import torch
from compare_pairs import codes, f64, noisy

from mmcli.compare.metrics import measure
from mmcli.compare.tolerance import (
    KERNEL,
    PORT_ITEM_COSINE,
    PORT_ROW_COSINE,
    SAME_KERNEL,
    Overrides,
    tolerance,
)
from mmcli.errors import InputError


def test_profile_figures_are_the_published_ones() -> None:
    # torch/testing/_comparison.py _DTYPE_PRECISIONS (torch 2.13), as installed here.
    from torch.testing._comparison import _DTYPE_PRECISIONS

    for name, dtype in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
        assert SAME_KERNEL[name] == _DTYPE_PRECISIONS[dtype]
    assert SAME_KERNEL["float32"] == _DTYPE_PRECISIONS[torch.float32]
    # transformers tests/test_modeling_common.py _test_eager_matches_sdpa_inference
    # (rtols, atols): fp32 1e-4/1e-6, fp16 5e-3/5e-3, bf16 1e-2/1e-2.
    assert KERNEL["float32"] == (1e-4, 1e-6) and KERNEL["bfloat16"] == (1e-2, 1e-2)
    assert KERNEL["float16"] == (5e-3, 5e-3)
    # vLLM tests/models/utils.py check_embeddings_close: cosine >= 1 - 1e-3.
    assert PORT_ITEM_COSINE == 1 - 1e-3 and PORT_ROW_COSINE["bfloat16"] == 0.99


def test_tolerance_comes_from_the_lower_precision_side() -> None:
    tol = tolerance("same-kernel", "float32", "bfloat16", Overrides())
    assert tol.dtype == "bfloat16" and (tol.rtol, tol.atol) == SAME_KERNEL["bfloat16"]
    assert tolerance("port", "float32", "float32", Overrides()).min_row_cosine == 0.999


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rounding_noise_passes_port_and_kernel_fails_same_kernel(compare, base, dtype) -> None:
    # A second kernel: the same values computed in float64 with an absolute error of about
    # 2e-3 (clipped at 6e-3, under the kernel profile's atol of 5e-3 + rtol·|r| for fp16 only
    # where |r| is large enough), then rounded to the dtype.
    sigma = 1.5e-3 if dtype == torch.float16 else 2e-3
    ref = [t.to(dtype) for t in base]
    cand = [noisy(t, sigma, 7) for t in ref]
    for profile in ("port", "kernel"):
        report = compare(ref, cand, profile=profile)
        assert [c for c, _ in codes(report)] == ["compare-numerics"] * 3, profile
        assert report.exit_code == 0
    strict = compare(ref, cand, profile="same-kernel")
    assert [c for c, _ in codes(strict)] == ["compare-divergent"] * 3
    hint = strict.all_findings()[0].hint
    assert hint is not None and "--profile port" in hint
    assert strict.exit_code == 1


def test_noise_within_same_kernel_passes_it(compare, base) -> None:
    ref = [t.float() for t in base]
    cand = [noisy(t, 1e-7, 8) for t in ref]
    report = compare(ref, cand, profile="same-kernel")
    assert {c for c, _ in codes(report)} <= {"compare-numerics"} and report.exit_code == 0


def test_overrides(compare, base) -> None:
    cand = [noisy(t, 0.05, 9) for t in base]
    assert compare(base, cand).exit_code == 1
    assert compare(base, cand, min_cosine=0.99).exit_code == 0
    assert compare(base, cand, profile="kernel", rtol=0.5, atol=0.5).exit_code == 0
    assert compare(base, cand, profile="kernel", rtol=0.0, atol=1e-3).exit_code == 1


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"rtol": -1.0}, "--rtol -1.0 is negative"),
        ({"min_cosine": 1.5}, "--min-cosine 1.5 is outside"),
        ({"profile": "loose"}, "unknown profile 'loose'"),
        ({"pair": "sideways"}, "unknown pairing 'sideways'"),
    ],
)
def test_bad_options(compare, base, options, words) -> None:
    with pytest.raises(InputError, match=words):
        compare(base[:1], base[:1], **options)


def test_float8_needs_explicit_figures() -> None:
    with pytest.raises(InputError, match="no tolerance for float8_e4m3fn"):
        tolerance("kernel", "float8_e4m3fn", "bfloat16", Overrides())
    tol = tolerance("kernel", "float8_e4m3fn", "bfloat16", Overrides(rtol=0.1, atol=0.1))
    assert tol.rtol == 0.1


@pytest.mark.parametrize("block", [64, 200, 1 << 19])
def test_metrics_against_plain_float64(block: int) -> None:
    gen = torch.Generator().manual_seed(10)
    a = torch.randn(37, 48, generator=gen).to(torch.bfloat16)
    b = (f64(a) * 1.01 + 0.02 * torch.randn(37, 48, generator=gen, dtype=torch.float64)).to(
        torch.bfloat16
    )
    tol = tolerance("kernel", "bfloat16", "bfloat16", Overrides())
    m = measure(a, b, tol, block_elements=block)
    x, y = f64(a), f64(b)
    d = y - x
    assert m.max_abs == pytest.approx(float(d.abs().max()))
    assert m.mean_abs == pytest.approx(float(d.abs().mean()))
    assert m.rmse == pytest.approx(float(d.pow(2).mean().sqrt()))
    assert m.rel_rmse == pytest.approx(float(d.norm() / x.norm()))
    assert m.cosine == pytest.approx(float((x * y).sum() / (x.norm() * y.norm())))
    rows = (x * y).sum(1) / (x.norm(dim=1) * y.norm(dim=1))
    assert m.row_cosine_min == pytest.approx(float(rows.min()))
    assert m.row_cosine_min_row == int(rows.argmin())
    assert m.row_cosine_mean == pytest.approx(float(rows.mean()))
    assert m.norm_ratio == pytest.approx(float(y.norm() / x.norm()))
    assert m.scale == pytest.approx(float((x * y).sum() / (x * x).sum()))
    ok = d.abs() <= 1e-2 + 1e-2 * x.abs()
    assert m.within == pytest.approx(float(ok.double().mean()))
    nz = x != 0
    assert m.max_rel == pytest.approx(float((d.abs()[nz] / x.abs()[nz]).max()))
    worst = int(d.abs().argmax())
    assert m.worst == divmod(worst, 48)
    # ULP: bfloat16 values are the upper 16 bits of float32; count representable steps.
    steps = [
        abs(_ordered(float(p)) - _ordered(float(q)))
        for p, q in zip(a.flatten(), b.flatten(), strict=True)
    ]
    assert m.max_ulp == max(steps)


def _ordered(value: float) -> int:
    """The bfloat16 bit pattern of ``value`` as an integer in the order of the values."""
    import struct

    bits = struct.unpack("<I", struct.pack("<f", value))[0] >> 16
    return -(bits & 0x7FFF) if bits & 0x8000 else bits


def test_zero_rows_are_identical_not_undefined() -> None:
    z = torch.zeros(4, 8)
    m = measure(z, z.clone(), tolerance("port", "float32", "float32", Overrides()))
    assert m.bit_identical and m.cosine == 1.0 and math.isfinite(m.rel_rmse)


def test_different_dtypes_are_never_bit_identical(compare, base) -> None:
    report = compare(base, [t.float() for t in base])
    item = report.pairs[0].items[0]
    assert item.metrics is not None and not item.metrics.bit_identical
    assert item.metrics.max_abs == 0 and item.metrics.max_ulp is None
    assert [c for c, _ in codes(report)] == ["compare-numerics"] * 3


def test_rows_tied_at_the_minimum_name_the_first() -> None:
    """A scaled copy has every row cosine at 1 within float64 rounding; which row's sum rounds
    lowest depends on the CPU's summation order, so the first tied row is named."""
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(36, 64, generator=gen).to(torch.bfloat16)
    tol = tolerance("port", "bfloat16", "bfloat16", Overrides())
    assert measure(a, a * 0.125, tol).row_cosine_min_row == 0
    b = a.clone()
    b[7] = -b[7]  # a real minimum is still found, ties or not
    b[20] = -b[20]
    assert measure(a, b * 0.125, tol).row_cosine_min_row == 7
