"""Every compare finding on a pair built from a real tensor by the transformation it names.

The base tensors are the repository's sample encoder outputs (samples/dumps/healthy.safetensors:
bf16 items of 24 rows (a 4×6 grid), 16 and 36 rows (a 6×6 grid), 64 wide).
"""

from __future__ import annotations

import math

import pytest
import torch
from compare_pairs import bf16, codes, f64, noisy


def test_identical_items_have_no_finding(compare, base) -> None:
    report = compare(base, base)
    assert codes(report) == [] and report.exit_code == 0
    m = report.pairs[0].items[0].metrics
    assert m is not None and m.bit_identical and m.max_abs == 0 and m.max_ulp == 0


def test_scale_by_one_over_sqrt_hidden(compare, base) -> None:
    # PaliGemma (vllm#52667): image rows scaled by 1/sqrt(hidden) on one side.
    cand = [bf16(f64(t) / math.sqrt(64)) for t in base]
    report = compare(base, cand)
    assert codes(report) == [("compare-scale", 0), ("compare-scale", 1), ("compare-scale", 2)]
    f = report.all_findings()[0]
    assert "c = 0.125" in f.message and f.hint is not None and "1/√64" in f.hint
    assert report.exit_code == 1


def test_scale_other_than_sqrt_hidden(compare, base) -> None:
    report = compare(base, [bf16(f64(t) * 0.5) for t in base])
    f = report.all_findings()[0]
    assert f.code == "compare-scale" and "c = 0.5" in f.message
    assert f.hint is not None and "√" not in f.hint


def test_missing_final_norm_is_row_norm(compare, base) -> None:
    # vllm#33167: a final RMSNorm missing on one side: rows keep their direction, each row's
    # norm ratio is 1/rms of that row, which varies from row to row.
    cand = [bf16(f64(t) / f64(t).pow(2).mean(dim=1, keepdim=True).sqrt()) for t in base]
    report = compare(base, cand)
    assert [c for c, _ in codes(report)] == ["compare-row-norm"] * 3
    assert "norm ratios vary" in report.all_findings()[0].message


def test_block_major_patch_order_is_permuted(compare, base) -> None:
    # vllm PR#52932: patches merged block-major instead of raster; token counts unchanged.
    grid = base[2]  # a 6×6 grid of patches
    order = torch.arange(36).reshape(3, 2, 3, 2).permute(0, 2, 1, 3).flatten()
    report = compare([grid], [grid[order]])
    assert codes(report) == [("compare-permuted", 0)]
    assert "6×6 grid in 2×2 block-major order" in report.all_findings()[0].message


def test_raster_against_block_major(compare, base) -> None:
    grid = base[2]
    order = torch.arange(36).reshape(3, 2, 3, 2).permute(0, 2, 1, 3).flatten()
    report = compare([grid[order]], [grid])
    assert "in raster order (REF is 2×2 block-major)" in report.all_findings()[0].message


def test_transposed_grid(compare, base) -> None:
    grid = base[0]  # 4×6
    cand = grid.reshape(4, 6, 64).transpose(0, 1).reshape(24, 64)
    report = compare([grid], [cand])
    assert codes(report) == [("compare-permuted", 0)]
    assert "4×6 grid transposed (6×4" in report.all_findings()[0].message


def test_reversed_rows(compare, base) -> None:
    report = compare(base, [t.flip(0) for t in base])
    assert [c for c, _ in codes(report)] == ["compare-permuted"] * 3
    assert "reverse order" in report.all_findings()[0].message


def test_permutation_with_rounding_noise(compare, base) -> None:
    cand = noisy(base[2], 1e-3).flip(0)
    assert codes(compare([base[2]], [cand])) == [("compare-permuted", 0)]


def test_swapped_items(compare, base) -> None:
    # Two same-size items in the other order (a per-request sort, a batching order).
    a, b = noisy(base[2], 0.0, 2), bf16(f64(base[2]).roll(5, dims=1) * 1.1)
    report = compare([a, b, base[1]], [b, a, base[1]])
    assert codes(report) == [("compare-items-swapped", 0), ("compare-items-swapped", 1)]
    assert report.all_findings()[0].message.startswith("item 0 of CAND matches item 1 of REF")


def test_boundary_rows(compare, base) -> None:
    # A CLS / begin-of-image row computed differently: only row 0 differs.
    cand = base[2].clone()
    cand[0] = torch.randn(64, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    report = compare([base[2]], [cand])
    assert codes(report) == [("compare-boundary", 0)]
    assert "only the first 1 rows differ" in report.all_findings()[0].message


def test_first_and_last_rows(compare, base) -> None:
    cand = base[2].clone()
    cand[[0, 1, 35]] = -cand[[0, 1, 35]]
    assert "the first 2 and the last 1" in compare([base[2]], [cand]).all_findings()[0].message


def test_last_row_only_is_boundary_not_drift(compare, base) -> None:
    # The rows that agree exactly all have error 0: tied, not ordered by their index.
    cand = base[2].clone()
    cand[35] = -cand[35]
    f = compare([base[2]], [cand]).all_findings()[0]
    assert f.code == "compare-boundary" and "only the last 1 rows differ" in f.message


def test_outlier_late_in_the_item_is_not_drift(compare, base) -> None:
    cand = base[2].clone()
    cand[31] = bf16(f64(cand[31]) * 0.3 + f64(cand[2]))
    assert codes(compare([base[2]], [cand])) == [("compare-outlier", 0)]


def test_drift_grows_with_row_index(compare, base) -> None:
    # llama.cpp PR#25781: position-embedding interpolation, the error grows along the rows.
    gen = torch.Generator().manual_seed(4)
    t = base[2]
    growth = torch.linspace(0.0, 0.5, 36, dtype=torch.float64)[:, None]
    cand = bf16(f64(t) + torch.randn(t.shape, generator=gen, dtype=torch.float64) * growth)
    report = compare([t], [cand])
    assert codes(report) == [("compare-drift", 0)]
    assert "grows with the row index" in report.all_findings()[0].message


def test_one_outlier_row(compare, base) -> None:
    # TensorRT-Edge-LLM#185: one token at a low cosine while the item's stays high.
    cand = base[2].clone()
    cand[17] = bf16(f64(cand[17]) * 0.3 + f64(cand[9]))
    report = compare([base[2]], [cand])
    assert codes(report) == [("compare-outlier", 0)]
    assert "rows 17 (" in report.all_findings()[0].message


@pytest.mark.parametrize(
    ("sigma", "band"),
    [(0.3, "preprocessing"), (3.0, "wrong weights")],
)
def test_uniform_divergence(compare, base, sigma: float, band: str) -> None:
    cand = [noisy(t, sigma, 5) for t in base]
    report = compare(base, cand)
    assert [c for c, _ in codes(report)] == ["compare-divergent"] * 3
    hint = report.all_findings()[0].hint
    assert hint is not None and band in hint


def test_unrelated_tensor_is_wrong_weights(compare, base) -> None:
    cand = torch.randn(36, 64, generator=torch.Generator().manual_seed(6)).to(torch.bfloat16)
    f = compare([base[2]], [cand]).all_findings()[0]
    assert f.code == "compare-divergent" and f.hint is not None and "wrong weights" in f.hint


def test_nonfinite_on_one_side(compare, base) -> None:
    cand = [t.clone() for t in base]
    cand[1][3, 5] = float("nan")
    report = compare(base, cand)
    assert codes(report) == [("compare-nonfinite", 1)]
    f = report.all_findings()[0]
    assert "first at row 3, column 5 (in CAND)" in f.message


def test_fp16_overflow_hint(compare, base) -> None:
    ref = [t.to(torch.float16) for t in base]
    cand = [t.clone() for t in ref]
    cand[0][2] = float("inf")
    f = compare(ref, cand).all_findings()[0]
    assert f.code == "compare-nonfinite" and "64 NaN/inf" in f.message
    assert f.hint is not None and "fp16 overflow" in f.hint


def test_nan_on_both_sides_agrees(compare, base) -> None:
    ref = [t.clone() for t in base]
    ref[0][1, 1] = float("nan")
    report = compare(ref, ref)
    assert codes(report) == [] and report.exit_code == 0
    m = report.pairs[0].items[0].metrics
    assert m is not None and m.nonfinite_both == 1


@pytest.mark.parametrize(
    ("cand_shape", "words"),
    [
        ((36, 32), "tensor-parallel shard: CAND holds one of 2 ranks"),
        ((144, 16), "spatial merge / pixel shuffle (2×2) not applied in CAND"),
        ((38, 64), "CAND has +2 rows"),
        ((34, 64), "CAND has -2 rows"),
        ((54, 64), "preprocessing"),
        ((36, 48), "projector missing or different"),
        ((1, 36, 64), "batch dim kept"),
    ],
)
def test_shape_cases(compare, base, cand_shape: tuple[int, ...], words: str) -> None:
    t = base[2]
    cand = torch.zeros(cand_shape, dtype=t.dtype)
    flat = t.flatten()[: cand.numel()]
    cand.view(-1)[: flat.numel()] = flat
    report = compare([t], [cand])
    assert codes(report) == [("compare-shape", 0)]
    f = report.all_findings()[0]
    assert words in f.message + " " + (f.hint or "")
    assert report.pairs[0].items[0].metrics is None


def test_tp_sharded_width_taken_from_the_real_shard(compare, base) -> None:
    # Rank 0's half of a column-parallel projector output: the first half of every row.
    f = compare([base[2]], [base[2][:, :32].contiguous()]).all_findings()[0]
    assert "CAND rows are 32 wide, REF's 64 = 32 × 2" in f.message


def test_item_count(compare, base) -> None:
    report = compare(base, base[:2])
    assert codes(report) == [("compare-item-count", None)]
    assert "REF has 3 items, CAND 2" in report.all_findings()[0].message
    assert len(report.pairs[0].items) == 2


def test_masks_differ(compare, base) -> None:
    mask = torch.ones(25, dtype=torch.bool)
    mask[12] = False
    other = torch.ones(25, dtype=torch.bool)
    other[0] = False
    report = compare(
        base[:1], base[:1], ref_meta={"is_embed": [mask]}, cand_meta={"is_embed": [other]}
    )
    assert codes(report) == [("compare-mask", 0)]
    assert "first at 0 (REF True, CAND False)" in report.all_findings()[0].message


def test_absent_mask_equals_an_all_true_one(compare, base) -> None:
    full = [torch.ones(t.shape[0], dtype=torch.bool) for t in base]
    assert codes(compare(base, base, ref_meta={"is_embed": full})) == []


def _engine_noise(t: torch.Tensor, relative: float, seed: int) -> torch.Tensor:
    """``t`` (float32) plus seeded noise of ``relative`` × its own spread, rounded to bf16: what
    a second engine's bf16 kernels leave (the port profile's bf16 row floor is 0.99)."""
    return noisy(t.float(), relative * float(t.float().std()), seed).to(torch.bfloat16)


@pytest.mark.parametrize("relative", [0.05, 0.1])
def test_reversed_rows_under_bf16_noise(compare, base, relative: float) -> None:
    ref = base[2].float()
    cand = _engine_noise(ref, relative, 7)
    row_cos = torch.nn.functional.cosine_similarity(f64(ref), f64(cand), dim=1)
    assert float(row_cos.min()) > 0.99  # in order, this much noise is within the bf16 row floor
    assert codes(compare([ref], [cand])) != [("compare-permuted", 0)]
    report = compare([ref], [cand.flip(0)])
    assert codes(report) == [("compare-permuted", 0)]
    assert "reverse order" in report.all_findings()[0].message


def _alike_rows() -> torch.Tensor:
    """36 rows sharing one large direction (every pair of rows at cosine > 0.99), as encoder
    outputs with a dominant common component are."""
    gen = torch.Generator().manual_seed(3)
    common = torch.randn(64, generator=gen, dtype=torch.float64)
    return (4 * common + 0.1 * torch.randn(36, 64, generator=gen, dtype=torch.float64)).float()


def test_alike_rows_reversed_under_noise_are_permuted_not_numerics(compare) -> None:
    ref = _alike_rows()
    unit = torch.nn.functional.normalize(f64(ref), dim=1)
    assert float((unit @ unit.T).min()) > 0.99
    cand = _engine_noise(ref, 0.002, 8).flip(0)
    report = compare([ref], [cand])
    item = report.pairs[0].items[0]
    assert item.metrics is not None and item.metrics.passed  # out of order, within tolerance
    assert codes(report) == [("compare-permuted", 0)]


def test_alike_rows_with_noise_only_stay_numerics(compare) -> None:
    ref = _alike_rows()
    assert codes(compare([ref], [_engine_noise(ref, 0.002, 8)])) == [("compare-numerics", 0)]
