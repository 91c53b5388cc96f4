"""Helpers of the compare tests (tests/compare/): finding codes of a report, float64."""

from __future__ import annotations

import torch

from mmcli.compare import CompareReport


def codes(report: CompareReport) -> list[tuple[str, int | None]]:
    """(code, item) of every finding, in order."""
    return [(f.code, f.item) for f in report.all_findings()]


def f64(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float64)


def bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16)


def noisy(t: torch.Tensor, sigma: float, seed: int = 1) -> torch.Tensor:
    """``t`` plus Gaussian noise of standard deviation ``sigma``, clipped at 3 sigma, in
    float64 and then rounded back to ``t``'s dtype (a second kernel's rounding)."""
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(t.shape, generator=gen, dtype=torch.float64).clamp_(-3, 3) * sigma
    return (f64(t) + noise).to(t.dtype)
