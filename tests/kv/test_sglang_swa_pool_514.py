"""SGLang 0.5.14 / 0.5.15's hybrid sliding-window pool (mmcli/kv/sglang/swa.py, swa_lists.py).

Read from the wheels (sglang/srt):
* configs/model_config.py ``is_hybrid_swa_model``: 0.5.14 :1842 is 0.5.13's list (Llama 4,
  DeepSeek-V4 / NextN, GPT-OSS, MiMo-V2 / Flash / MTP, Step-3.5 / MTP, Step-3.7, Gemma 4 / 4
  Unified, Laguna; Laguna only with a sliding_window, :1863) and a config's ``is_hybrid_swa``
  opt-in (:1873; 0.5.13 :1703); 0.5.15 :1833 adds UnlimitedOCRForCausalLM.
* model_executor/pool_configurator.py: 0.5.14 HybridSWAPoolConfigurator (:236) keeps 0.5.13's
  cell ``F·n_full + r·S·n_swa``, ``full = align(int(available_bytes // cell))``, ``swa =
  align(int(full × r))`` (:313, :314); create_memory_pool_configurator (:640) picks
  SWAChunkCapPoolConfigurator (:339) only when ``is_applicable`` (:389): --max-running-requests
  given and the radix cache off. 0.5.15 the same (:284; EAGLE draft layers join the cell).
* model_runner_kv_cache_mixin.py ``_apply_token_constraints`` (0.5.14 :952) caps the full pool
  at --max-total-tokens; ``_resolve_memory_pool_config`` re-solves (:1063 – :1069).
* ``swa_full_tokens_ratio`` defaults to 0.8 (0.5.14 server_args.py:753, 0.5.15 :734). GPT-OSS's
  SM100 default backend is trtllm_mha (0.5.14 :3813) and no longer turns the pool off; it is
  off for Gemma 2/3/3n (0.5.14 :4056; 0.5.15 arg_groups/overrides.py:462) and Olmo 2 (0.5.14
  :4122; 0.5.15 overrides.py:909).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sglang_hybrid_cases import plan_doc as plan

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import read_document

KV = Path(__file__).parent
GPT_OSS_20B = KV / "gpu_logs" / "configs" / "openai--gpt-oss-20b.json"
LLAMA4_SCOUT = KV / "configs" / "meta-llama--Llama-4-Scout-17B-16E-Instruct.subset.json"
GEMMA3_27B = KV / "realworld" / "configs" / "google--gemma-3-27b-it_config.json"
GiB = 2**30
MIRRORED = ("0.5.14", "0.5.15")


@pytest.mark.parametrize("release", MIRRORED)
def test_gpt_oss_budget_solve(release: str) -> None:
    # GPT-OSS-20B: 12 full + 12 sliding layers, 8 kv heads × (64 + 64) × 2 B = 2,048 B per token
    # per layer. cell = 12 × 2,048 + 0.8 × 12 × 2,048 = 44,236.8; full = int(2^30 // 44,236.8)
    # = 24,272; swa = int(24,272 × 0.8) = int(19,417.6) = 19,417 (page 1).
    result = plan(GPT_OSS_20B, release=release, memory_bytes=GiB)
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (24_272, 19_417)
    assert result.log_lines[0] == (
        "Use sliding window memory pool. full_layer_tokens=24272, swa_layer_tokens=19417"
    )


@pytest.mark.parametrize("release", MIRRORED)
def test_gpt_oss_page_floors_each_pool(release: str) -> None:
    # Page 64: full = 24,272 // 64 × 64 = 24,256; swa = int(24,256 × 0.8) = 19,404 → 19,392.
    result = plan(GPT_OSS_20B, release=release, memory_bytes=GiB, page_size=64)
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (24_256, 19_392)


@pytest.mark.parametrize("release", MIRRORED)
def test_llama4_scout_budget_solve(release: str) -> None:
    # Llama 4 Scout: 12 full + 36 chunked layers ((i + 1) % 4 != 0), 8 × (128 + 128) × 2 B =
    # 4,096 B. cell = 12 × 4,096 + 0.8 × 36 × 4,096 = 167,116.8; full = int(2^30 // cell) =
    # 6,425; swa = int(6,425 × 0.8) = 5,140.
    result = plan(LLAMA4_SCOUT, release=release, memory_bytes=GiB)
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (6_425, 5_140)


@pytest.mark.parametrize("release", MIRRORED)
def test_max_total_tokens_caps_the_full_pool(release: str) -> None:
    # full = min(24,272, 10,000) = 10,000 re-solved: swa = int(10,000 × 0.8) = 8,000.
    result = plan(GPT_OSS_20B, release=release, memory_bytes=GiB, max_total_tokens=10_000)
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (10_000, 8_000)


@pytest.mark.parametrize("release", MIRRORED)
def test_gpt_oss_on_b200_keeps_the_hybrid_pool(release: str) -> None:
    result = plan(GPT_OSS_20B, release=release, memory_bytes=GiB, gpu_name="B200")
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (24_272, 19_417)


@pytest.mark.parametrize("release", MIRRORED)
def test_gemma3_off_the_list_is_charged_on_every_layer(release: str) -> None:
    # Gemma 3 27B: 62 layers, 16 kv heads × (128 + 128) × 2 B = 8,192 B each, 507,904 B per
    # token on every layer: 2^30 // 507,904 = 2,114 tokens, no SWA pool.
    result = plan(GEMMA3_27B, release=release, memory_bytes=GiB)
    assert result.value("pool_tokens") == 2_114
    assert result.value("swa_pool_tokens") is None
    assert any("52 sliding layers keep every token" in n for n in result.notes)


def test_unlimited_ocr_joins_the_list_in_0515() -> None:
    doc = {**read_document(GPT_OSS_20B), "architectures": ["UnlimitedOCRForCausalLM"]}
    with pytest.raises(InputError, match="0.5.15 gives UnlimitedOCRForCausalLM a hybrid"):
        plan(GPT_OSS_20B, doc, release="0.5.15", memory_bytes=GiB)
    # 0.5.14's list lacks it: every layer keeps the 2^30 // 49,152 = 21,845 tokens.
    assert plan(GPT_OSS_20B, doc, release="0.5.14", memory_bytes=GiB).value("pool_tokens") == (
        21_845
    )


@pytest.mark.parametrize("release", ("0.5.13", *MIRRORED))
def test_is_hybrid_swa_opt_in_is_refused(release: str) -> None:
    doc = {**read_document(GPT_OSS_20B), "architectures": ["MistralForCausalLM"]}
    doc["is_hybrid_swa"] = True
    with pytest.raises(InputError, match=f"{release}: the config's is_hybrid_swa"):
        plan(GPT_OSS_20B, doc, release=release, memory_bytes=GiB)
    # 0.5.12 (model_config.py:1663) reads no opt-in: every layer keeps every token.
    assert plan(GPT_OSS_20B, doc, release="0.5.12", memory_bytes=GiB).value("pool_tokens") == (
        21_845
    )
