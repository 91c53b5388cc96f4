"""CAND = REF + noise within tolerance never yields an error finding (hypothesis)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from hypothesis import given
from hypothesis import strategies as st

import mmcli
from mmcli.compare.tolerance import KERNEL, SAME_KERNEL

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


@st.composite
def pairs(draw: st.DrawFn) -> tuple[list[torch.Tensor], list[torch.Tensor], str]:
    profile = draw(st.sampled_from(["same-kernel", "kernel", "port"]))
    dtype_name = draw(st.sampled_from(sorted(DTYPES)))
    dtype = DTYPES[dtype_name]
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    sizes = draw(
        st.lists(st.tuples(st.integers(0, 40), st.integers(1, 48)), min_size=1, max_size=3)
    )
    scale = draw(st.sampled_from([1e-3, 1.0, 30.0]))
    refs, cands = [], []
    for rows, width in sizes:
        ref = (torch.randn(rows, width, generator=gen, dtype=torch.float64) * scale).to(dtype)
        r = ref.to(torch.float64)
        u = torch.rand(rows, width, generator=gen, dtype=torch.float64) * 2 - 1
        if profile == "port":
            # Relative noise up to 1 %: each row's cosine stays >= 0.9999, its relative
            # error <= 1 % (plus one rounding), under the 0.99 / 0.999 / 0.0447 bars.
            cand64 = r + u * 1e-2 * r.abs()
            if dtype == torch.float32:
                cand64 = r + u * 1e-4 * r.abs()
        else:
            # Half the elementwise bound, in float64, then rounded only where the dtype can
            # hold the result exactly (float32 rounding is far below the bound).
            rtol, atol = (SAME_KERNEL if profile == "same-kernel" else KERNEL)[dtype_name]
            cand64 = r + u * 0.5 * (atol + rtol * r.abs())
            dtype_out = torch.float32 if dtype == torch.float32 else torch.float64
            refs.append(ref)  # the tolerance is taken for its dtype, the lower precision
            cands.append(cand64.to(dtype_out))
            continue
        refs.append(ref)
        cands.append(cand64.to(dtype))
    return refs, cands, profile


@given(pairs())
def test_noise_within_tolerance_is_never_an_error(case) -> None:
    refs, cands, profile = case
    with tempfile.TemporaryDirectory() as tmp:
        a = mmcli.dump_encoder_outputs(Path(tmp) / "ref.safetensors", refs)
        b = mmcli.dump_encoder_outputs(Path(tmp) / "cand.safetensors", cands)
        report = mmcli.compare_dumps(a, b, profile=profile, device="cpu")
    errors = [f for f in report.all_findings() if f.severity == "error"]
    assert not errors, errors
    assert report.exit_code == 0
