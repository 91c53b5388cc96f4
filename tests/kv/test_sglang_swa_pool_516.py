"""SGLang 0.5.16 – 0.5.23's hybrid sliding-window pool (mmcli/kv/sglang/swa.py, swa_lists.py).

Read from the wheels (sglang/srt):
* mem_cache/kv_cache_configurator.py (0.5.16 on) calls model_executor/pool_configurator.py's
  ``create_memory_pool_configurator`` (0.5.16 :837, 0.5.23 :1715): HybridSWAPoolConfigurator
  (0.5.16 :301, 0.5.23 :656) unless SWAChunkCap / SWARequestCap applies (--max-running-requests
  with the radix cache off). Its cell is 0.5.13's ``F·n_full + r·S·n_swa``; ``full =
  align(int(available_bytes // cell))``, ``swa = align(int(full × r))`` (0.5.16 :424, :425);
  ``_apply_token_constraints`` caps the full pool at --max-total-tokens (0.5.16
  kv_cache_configurator.py:1599).
* New in 0.5.16 (:427): ``sliding_window_size + page_size >= swa_tokens`` raises "SWA pool (…)
  cannot hold even one request" (0.5.20 on ``validate_swa_pool_size``, 0.5.23 :198). The window
  is ``resolve_sliding_window_size`` (0.5.16 model_runner_components/load_model_utils.py:111):
  GPT-OSS's ``get_attention_sliding_window_size`` = sliding_window − 1 (models/gpt_oss.py:119),
  Llama 4's ``attention_chunk_size`` (its config has no sliding_window key).
* ``swa_full_tokens_ratio`` 0.8 (0.5.16 server_args.py:795; 0.5.20 on None with fallback 0.8,
  arg_groups/fields/schedule.py:162).
* ``is_hybrid_swa_model`` (configs/model_config.py): 0.5.16 :1903 adds DeepseekV4ForCausalLMDSpark,
  MellumForCausalLM, InklingForConditionalGeneration / MTP; 0.5.18 :2050 MuseGlimmer; 0.5.19
  :2115 GraniteSWAForCausalLM / GraniteMoeSWAForCausalLM (SWA_SINK_ARCHS :54, with GPT-OSS);
  0.5.21 :2454 DiffusionGemmaForBlockDiffusion, IQuestQ1ForCausalLM / MTP; 0.5.22 :2536
  EmbeddingGemma2Model; 0.5.23 :2651 BeamForCausalLM.
* Gemma 2/3/3n's pool is off (0.5.16 arg_groups/overrides.py:564; 0.5.23
  arg_groups/model_overrides/gemma2_gemma3.py:26).
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
RELEASES = tuple(f"0.5.{n}" for n in range(16, 24))


@pytest.mark.parametrize("release", RELEASES)
def test_gpt_oss_budget_solve(release: str) -> None:
    # 12 full + 12 sliding layers, 8 kv heads × (64 + 64) × 2 B = 2,048 B per token per layer:
    # cell = 12 × 2,048 + 0.8 × 12 × 2,048 = 44,236.8; full = int(2^30 // cell) = 24,272;
    # swa = int(24,272 × 0.8) = 19,417 > window 127 + page 1.
    result = plan(GPT_OSS_20B, release=release, memory_bytes=GiB)
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (24_272, 19_417)
    assert result.log_lines[0] == (
        "Use sliding window memory pool. full_layer_tokens=24272, swa_layer_tokens=19417"
    )


@pytest.mark.parametrize("release", RELEASES)
def test_max_total_tokens_caps_the_full_pool(release: str) -> None:
    # full = min(24,272, 10,000) = 10,000; swa = int(10,000 × 0.8) = 8,000.
    result = plan(GPT_OSS_20B, release=release, memory_bytes=GiB, max_total_tokens=10_000)
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (10_000, 8_000)


@pytest.mark.parametrize("release", RELEASES)
def test_gpt_oss_pool_at_the_admission_floor_is_refused(release: str) -> None:
    # --max-total-tokens 160: swa = int(160 × 0.8) = 128 ≤ 127 + 1: SGLang raises at start-up.
    with pytest.raises(InputError, match=r"SWA pool \(128 tokens\) cannot hold even one"):
        plan(GPT_OSS_20B, release=release, memory_bytes=GiB, max_total_tokens=160)
    # 162: swa = int(129.6) = 129 > 128: planned.
    result = plan(GPT_OSS_20B, release=release, memory_bytes=GiB, max_total_tokens=162)
    assert result.value("swa_pool_tokens") == 129
    # 0.5.15 has no such check (pool_configurator.py:376 splits without it).
    assert plan(GPT_OSS_20B, release="0.5.15", memory_bytes=GiB, max_total_tokens=160).value(
        "swa_pool_tokens"
    ) == (128)


@pytest.mark.parametrize("release", RELEASES)
def test_llama4_scout_needs_its_chunk_in_the_swa_pool(release: str) -> None:
    # 12 full + 36 chunked layers, 8 × (128 + 128) × 2 B = 4,096 B: cell = 12 × 4,096 + 0.8 ×
    # 36 × 4,096 = 167,116.8. At 1 GiB full = 6,425, swa = 5,140 ≤ 8,192 + 1: refused.
    with pytest.raises(InputError, match=r"SWA pool \(5140 tokens\).*sliding_window_size 8192"):
        plan(LLAMA4_SCOUT, release=release, memory_bytes=GiB)
    # At 4 GiB full = int(2^32 // 167,116.8) = 25,700, swa = int(20,560.0) = 20,560.
    result = plan(LLAMA4_SCOUT, release=release, memory_bytes=4 * GiB)
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (25_700, 20_560)


@pytest.mark.parametrize("release", RELEASES)
def test_gemma3_off_the_list_is_charged_on_every_layer(release: str) -> None:
    # 62 layers × 16 kv heads × (128 + 128) × 2 B = 507,904 B per token: 2^30 // it = 2,114.
    # Its vision tower is left out: from 0.5.18 a multimodal budget is refused (pool.py).
    doc = {k: v for k, v in read_document(GEMMA3_27B).items() if k != "vision_config"}
    result = plan(GEMMA3_27B, doc, release=release, memory_bytes=GiB)
    assert result.value("pool_tokens") == 2_114
    assert result.value("swa_pool_tokens") is None


@pytest.mark.parametrize(
    ("release", "arch", "before"),
    [
        ("0.5.16", "MellumForCausalLM", "0.5.15"),
        ("0.5.16", "InklingForConditionalGeneration", "0.5.15"),
        ("0.5.18", "MuseGlimmerForCausalLM", "0.5.17"),
        ("0.5.19", "GraniteSWAForCausalLM", "0.5.18"),
        ("0.5.21", "IQuestQ1ForCausalLM", "0.5.20"),
        ("0.5.22", "EmbeddingGemma2Model", "0.5.21"),
        ("0.5.23", "BeamForCausalLM", "0.5.22"),
    ],
)
def test_new_names_on_the_list_are_refused_by_name(release: str, arch: str, before: str) -> None:
    doc = {**read_document(GPT_OSS_20B), "architectures": [arch]}
    with pytest.raises(InputError, match=f"{release} gives {arch} a hybrid"):
        plan(GPT_OSS_20B, doc, release=release, memory_bytes=GiB)
    # The release before lacks it: every layer keeps 2^30 // (24 × 2,048) = 21,845 tokens.
    assert plan(GPT_OSS_20B, doc, release=before, memory_bytes=GiB).value("pool_tokens") == (21_845)
