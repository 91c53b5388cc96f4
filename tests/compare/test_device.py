"""``--device``: the same report on CUDA as on CPU (float64 on both)."""

from __future__ import annotations

import math

import pytest
import torch
from compare_pairs import bf16, codes, f64, noisy


@pytest.mark.cuda
def test_cuda_report_equals_cpu(compare, base) -> None:
    cases = [
        [noisy(t, 2e-3, 11) for t in base],
        [bf16(f64(t) / math.sqrt(64)) for t in base],
        [t.flip(0) for t in base],
    ]
    for cand in cases:
        on_cpu = compare(base, cand, device="cpu")
        on_cuda = compare(base, cand, device="cuda")
        assert on_cuda.device.startswith("cuda")
        assert codes(on_cuda) == codes(on_cpu)
        for a, b in zip(on_cpu.pairs[0].items, on_cuda.pairs[0].items, strict=True):
            assert a.metrics is not None and b.metrics is not None
            assert b.metrics.cosine == pytest.approx(a.metrics.cosine, abs=1e-12)
            assert b.metrics.max_abs == a.metrics.max_abs
            assert b.metrics.max_ulp == a.metrics.max_ulp


def test_device_auto_without_cuda_is_cpu(compare, base) -> None:
    if torch.cuda.is_available():
        pytest.skip("auto picks CUDA here")
    assert compare(base, base, device="auto").device == "cpu"
