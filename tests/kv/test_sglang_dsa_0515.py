"""SGLang 0.5.15 – 0.5.23's pool for DeepSeek sparse attention (V3.2 NSA), against 0.5.14.

Facts (SGLang wheels, sglang/srt/):
* Defaults of a DSA model on CUDA (Hopper): page 64 (arg_groups/overrides.py "Setting page
  size to 64 for DeepSeek DSA": 0.5.15 :386, 0.5.16 :402, 0.5.17 :630, 0.5.18 :672;
  arg_groups/model_overrides/deepseek_v2.py 0.5.19 :102, 0.5.20 :145, 0.5.21 :138, 0.5.22 :174,
  0.5.23 :171-173 ``64 * index_kpool``, index_kpool 1 unless the config sets it,
  configs/model_config.py:530); --kv-cache-dtype auto is "fp8_e4m3" if major >= 10 else
  "bfloat16" (arg_groups/overrides.py 0.5.15 :1084, 0.5.16 :1236, 0.5.17 :1539, 0.5.18 :1627,
  0.5.19 :631; 0.5.20 :605 – 0.5.23 :534 also bfloat16 with learnable_sink, which V3.2 lacks);
  fp8 on Hopper takes the flashmla_kv backends, on SM100 trtllm (0.5.15 overrides.py:1143).
  DP attention is set only with --enable-prefill-cp (0.5.15 overrides.py:331-337; 0.5.23
  deepseek_v2.py:106 – :133 sets attn_dp_size under it), so at --dp 1 attention stays
  tensor-parallel.
* Budget cell, model_executor/pool_configurator.py ``_compute_cell_size``: 0.5.15 :186 /
  0.5.16 :189 (kv_lora_rank + qk_rope_head_dim) · layers · element size, as 0.5.14; 0.5.17
  :205, 0.5.18 :258, 0.5.19 :271, 0.5.20 :335, 0.5.21 :318, 0.5.22 :374, 0.5.23 :380
  ``calculate_mla_kv_cache_dim(...) · layers · element size``, the allocated row (0.5.17
  mem_cache/kv_cache_configurator.py:1985; 0.5.23 :3412: 512 + 512 // 128 · 4 + 64 · 2 = 656
  with fp8_e4m3 under flashmla_kv, 576 under trtllm or bfloat16). The indexer, 132 B per layer,
  is added in each (0.5.15 :203, 0.5.17 :226, 0.5.23 :400; from 0.5.18
  ``_compute_dsa_indexer_cell_size``, every layer for a config without shared top-k).
* Allocation: DSATokenToKVPool (0.5.23 mem_cache/memory_pool.py:5279) rows of size + page,
  index_buf_size = size at dcp 1 (:5339-5342, either branch), (size + page + 1) // page index pages
  (mem_cache/index_key_cache.py:24) of page · 132 B: the 0.5.4 layout.
* Default fraction: the breakable prefill graphs are off for every MLA model in 0.5.15
  (server_args.py:3352) and 0.5.16 (:3774); 0.5.17 exempts DSA (:4469 "MLA attention
  (non-DSA)"), and reserve_for_graph_mb (:4912) adds 1.5 GiB for MLA prefill graphs; 0.5.18 on
  keeps them for every MLA model (tests/kv/test_sglang_fraction_0518.py).
* The V3.2 config (tests/kv/configs/deepseek-ai--DeepSeek-V3.2.as-DeepSeek-V3.2-Exp.json):
  61 layers, kv_lora_rank 512, qk_rope_head_dim 64, index_head_dim 128, bfloat16.

Hand sums: fp8 budget through 0.5.16 (576 + 132) · 61 = 43,188 B; from 0.5.17 (656 + 132) · 61
= 48,068 B, the allocation; bf16 (576 · 2 + 132) · 61 = 78,324 B in every release.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang

V32 = Path(__file__).parent / "configs" / "deepseek-ai--DeepSeek-V3.2.as-DeepSeek-V3.2-Exp.json"
GiB = 2**30
ROW_BUDGET = [f"0.5.{n}" for n in range(17, 24)]
#: (975,488 · 656 + 15,242 · 64 · 132) · 61 = 46,889,757,184 B = 43.67 GiB for 975,424 tokens.
FP8_LINE = "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 975424, KV size: 43.67 GB"


def plan(doc: dict[str, Any] | None = None, **options: Any):  # type: ignore[no-untyped-def]
    return plan_sglang(load_config(V32), doc or read_document(V32), SglangOptions(**options))


@pytest.mark.parametrize("release", ["0.5.15", "0.5.16"])
def test_0515_and_0516_budget_the_latent_at_the_dtype_size(release: str) -> None:
    result = plan(release=release, tp=8, memory_bytes=975_424 * 43_188, kv_dtype="fp8")
    assert result.value("bytes_per_token") == 43_188
    assert result.value("allocated_bytes_per_token") == 48_068
    assert result.value("pool_tokens") == 975_424
    assert result.value("block_tokens") == 64
    assert result.log_lines[0] == FP8_LINE
    assert any("more than their budget" in n for n in result.notes)


@pytest.mark.parametrize("release", ROW_BUDGET)
def test_0517_on_budget_the_allocated_fp8_row(release: str) -> None:
    # The budget cell is the allocation: 975,424 · 48,068 B hold 975,424 tokens (a multiple
    # of 64), and the KV line is 0.5.4's 43.67 GB.
    result = plan(release=release, tp=8, memory_bytes=975_424 * 48_068, kv_dtype="fp8")
    assert result.value("bytes_per_token") == 48_068
    assert result.value("allocated_bytes_per_token") == 48_068
    assert result.value("pool_tokens") == 975_424
    assert result.log_lines[0] == FP8_LINE
    assert not any("more than their budget" in n for n in result.notes)
    assert any("allocated row 656 B + indexer 132" in n for n in result.notes)
    # The 0.5.16 budget for 975,424 tokens holds fewer here: 42,126,411,712 // 48,068 =
    # 876,404, floored to 64: 876,352.
    fewer = plan(release=release, tp=8, memory_bytes=975_424 * 43_188, kv_dtype="fp8")
    assert fewer.value("pool_tokens") == 876_352


@pytest.mark.parametrize("release", ["0.5.15", *ROW_BUDGET])
def test_bf16_budget_is_the_same(release: str) -> None:
    # 40 GiB // 78,324 = 548,352 (42,949,672,960 / 78,324 = 548,359.7, floored to 64).
    result = plan(release=release, memory_bytes=40 * GiB, kv_dtype="bfloat16")
    assert result.value("bytes_per_token") == 78_324
    assert result.value("allocated_bytes_per_token") == 78_324
    assert result.value("pool_tokens") == 548_352
    assert result.log_lines[0].startswith("KV Cache is allocated. dtype: torch.bfloat16, ")


@pytest.mark.parametrize(
    ("release", "tokens", "graphs"),
    [
        # 14,848 MiB at tp 8 on 81,920 MiB (chunk 8,192, decode graphs to batch 512), no
        # prefill graphs: round(67,072 / 81,920, 3) = 0.819; int(80 GiB × 0.819) − 80 GiB / 8
        # = 59,614,146,068 B; // 78,324 = 761,122, floored to 64: 761,088.
        ("0.5.15", 761_088, "no piecewise graphs for this model"),
        ("0.5.16", 761_088, "no piecewise graphs for this model"),
        # + 1,536 MiB: round(65,536 / 81,920, 3) = 0.8; 57,982,058,496 B // 78,324 = 740,284,
        # floored to 64: 740,224.
        *((r, 740_224, "piecewise graphs 1,536 MiB (MLA)") for r in ROW_BUDGET),
    ],
)
def test_default_fraction_on_hopper(release: str, tokens: int, graphs: str) -> None:
    result = plan(release=release, tp=8, gpu_bytes=80 * GiB, weights_bytes=80 * GiB)
    assert result.value("pool_tokens") == tokens
    assert graphs in str(result.to_json())
    assert any("keeps attention tensor-parallel at --dp 1" in n for n in result.notes)


def test_the_default_release_plans_v32() -> None:
    result = plan(tp=8, gpu_bytes=80 * GiB, weights_bytes=80 * GiB)
    assert result.value("pool_tokens") == 740_224


@pytest.mark.parametrize("release", ["0.5.16", "0.5.23"])
def test_fp8_on_blackwell_is_noted(release: str) -> None:
    result = plan(release=release, tp=8, memory_bytes=40 * GiB, kv_dtype="fp8")
    whose = "the budget's" if release == "0.5.16" else "budgeted and allocated"
    assert any(f"trtllm NSA backends, whose row is {whose} 576 B" in n for n in result.notes)


def test_auto_on_sm100_and_dp_attention_stay_refused() -> None:
    with pytest.raises(InputError, match="picks fp8_e4m3"):
        plan(release="0.5.23", gpu_bytes=180 * GiB, weights_bytes=GiB, gpu_name="B200")
    with pytest.raises(InputError, match="--enable-dp-attention is given"):
        plan(
            release="0.5.23", tp=8, gpu_bytes=80 * GiB, weights_bytes=GiB, enable_dp_attention=True
        )


@pytest.mark.parametrize(("key", "value"), [("index_kpool", 2), ("cli_factor", 2)])
def test_pooled_or_shared_indexer_is_refused(key: str, value: int) -> None:
    # 0.5.23 page 64 · index_kpool (deepseek_v2.py:171) and index rows per kpool
    # (pool_configurator.py:567 ceil_div by get_dsa_index_kpool); cli_factor shares top-k
    # (configs/model_config.py:498).
    doc = read_document(V32)
    doc[key] = value
    with pytest.raises(InputError, match=f"{key}: an NSA indexer shared"):
        plan(doc, release="0.5.23", memory_bytes=40 * GiB)
