"""SGLang 0.5.10 – 0.5.13's hybrid sliding-window pool (mmcli/kv/sglang/swa.py).

Read from the wheels (sglang/srt):
* configs/model_config.py ``is_hybrid_swa_model``: 0.5.10 :1438 (0.5.9's list: Llama 4,
  GPT-OSS, MiMo-V2-Flash / MTP, Step-3.5 / MTP); 0.5.11 :1546 adds MiMoV2ForCausalLM,
  Gemma4ForCausalLM and Gemma4ForConditionalGeneration; 0.5.12 :1663 DeepseekV4ForCausalLM /
  NextN and LagunaForCausalLM; 0.5.13 :1685 Step3p7ForConditionalGeneration and
  Gemma4UnifiedForConditionalGeneration.
* server_args.py: GPT-OSS's SM100 default backend is still trtllm_mha (0.5.10 :1701), but the
  0.5.9 "Disable hybrid SWA memory for GPT-OSS model with trtllm_mha" (0.5.9 :1358 – :1361) is
  gone; Gemma 2/3/3n and Olmo 2 keep ``disable_hybrid_swa_memory`` (0.5.10 :1877, :1894).
* 0.5.10 model_executor/model_runner_kv_cache_mixin.py: ``_resolve_token_capacity`` (:808) caps
  and page-floors the profiled tokens, ``_resolve_hybrid_swa_tokens`` (:287) solves
  ``full = align(int(capacity × (F·n_full + S·n_swa) / (F·n_full + r·S·n_swa)))`` and
  ``swa = align(int(full × r))`` from the page-floored full pool; ``_resolve_max_num_reqs``
  (:840) takes the full pool's tokens.
* 0.5.11 model_executor/pool_configurator.py:184 HybridSWAPoolConfigurator: cell
  ``F·n_full + r·S·n_swa``, ``full = align(int(available_bytes // cell))``, ``swa =
  align(int(full × r))``; mixin ``_apply_token_constraints`` caps the full pool at
  --max-total-tokens and the configurator re-solves (0.5.12 :471, 0.5.13 :478 the same).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang

KV = Path(__file__).parent
GPT_OSS_20B = KV / "gpu_logs" / "configs" / "openai--gpt-oss-20b.json"
LLAMA4_SCOUT = KV / "configs" / "meta-llama--Llama-4-Scout-17B-16E-Instruct.subset.json"
GEMMA4 = (
    KV / "configs" / "google--gemma-4-26B-A4B-it.text_config.json",
    KV / "configs" / "google--gemma-4-31B-it.text_config.json",
)
GiB = 2**30
BUDGET = ("0.5.11", "0.5.12", "0.5.13")


def plan(path: Path, **options: Any):  # type: ignore[no-untyped-def]
    return plan_sglang(load_config(path), read_document(path), SglangOptions(**options))


def test_0510_takes_the_swa_pool_from_the_page_floored_full_pool() -> None:
    # GPT-OSS-20B: 12 full + 12 sliding layers, 2,048 B per token per layer (8 × 128 × 2 B).
    # Profiled 2^30 // 49,152 = 21,845, page-floored to 21,824; full = int(21,824 × 49,152 /
    # 44,236.8) = int(24,248.9) = 24,248 → 24,192. 0.5.10: int(24,192 × 0.8) = 19,353 → 19,328;
    # 0.5.9 floors int(24,248 × 0.8) = 19,398 → 19,392.
    new = plan(GPT_OSS_20B, release="0.5.10", memory_bytes=GiB, page_size=64)
    old = plan(GPT_OSS_20B, release="0.5.9", memory_bytes=GiB, page_size=64)
    assert new.value("pool_tokens") == old.value("pool_tokens") == 24_192
    assert new.value("swa_pool_tokens") == 19_328
    assert old.value("swa_pool_tokens") == 19_392
    assert new.log_lines[0] == (
        "Use sliding window memory pool. full_layer_tokens=24192, swa_layer_tokens=19328"
    )


@pytest.mark.parametrize("release", BUDGET)
def test_configurator_solves_the_budget_for_the_full_pool(release: str) -> None:
    # Llama 4 Scout: 12 full + 36 chunked layers, 8 × (128 + 128) × 2 B = 4,096 B per token per
    # layer. full = int(2^30 // (12 × 4,096 + 0.8 × 36 × 4,096 = 167,116.8)) = 6,425; swa =
    # int(6,425 × 0.8) = 5,140. 0.5.10 splits the profiled 2^30 // 196,608 = 5,461 tokens:
    # int(5,461 × 196,608 / 167,116.8) = 6,424, int(6,424 × 0.8) = 5,139.
    result = plan(LLAMA4_SCOUT, release=release, memory_bytes=GiB)
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (6_425, 5_140)
    older = plan(LLAMA4_SCOUT, release="0.5.10", memory_bytes=GiB)
    assert (older.value("pool_tokens"), older.value("swa_pool_tokens")) == (6_424, 5_139)


@pytest.mark.parametrize("release", BUDGET)
def test_max_total_tokens_caps_the_full_pool_from_0511(release: str) -> None:
    # 0.5.11 on: full = min(24,272, 10,000), swa = 8,000. 0.5.10 caps the profiled tokens
    # first: int(10,000 × 49,152 / 44,236.8) = 11,111, int(11,111 × 0.8) = 8,888.
    result = plan(GPT_OSS_20B, release=release, memory_bytes=GiB, max_total_tokens=10_000)
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (10_000, 8_000)
    older = plan(GPT_OSS_20B, release="0.5.10", memory_bytes=GiB, max_total_tokens=10_000)
    assert (older.value("pool_tokens"), older.value("swa_pool_tokens")) == (11_111, 8_888)


@pytest.mark.parametrize("release", ("0.5.10", *BUDGET))
def test_gpt_oss_on_b200_keeps_the_hybrid_pool(release: str) -> None:
    # full = int(2^30 // 44,236.8) = 24,272 (0.5.11 on) or int(21,845 × 49,152 / 44,236.8) =
    # 24,272 (0.5.10); swa = int(24,272 × 0.8) = 19,417, on B200 as on H100.
    result = plan(GPT_OSS_20B, release=release, memory_bytes=GiB, gpu_name="B200")
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (24_272, 19_417)
    # The 0.5.9 row still turns it off there: every layer keeps the 21,845 profiled tokens.
    assert (
        plan(GPT_OSS_20B, release="0.5.9", memory_bytes=GiB, gpu_name="B200").value("pool_tokens")
        == 21_845
    )


def test_gemma4_before_the_list_keeps_the_geometry_refusal() -> None:
    with pytest.raises(InputError, match="different head geometry"):
        plan(GEMMA4[1], release="0.5.10", memory_bytes=GiB)
