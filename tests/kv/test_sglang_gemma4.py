"""Gemma 4 on SGLang 0.5.11 – 0.5.23: the hybrid sliding-window pool (mmcli/kv/sglang/gemma4.py).

Read from the wheels (sglang/srt):
* configs/model_config.py: ``is_hybrid_swa_model`` lists Gemma4ForCausalLM and
  Gemma4ForConditionalGeneration from 0.5.11 (:1555); ``get_hybrid_layer_ids`` (0.5.11 :1607)
  takes the full / sliding layers from layer_types.
* utils/hf_transformers/config.py (0.5.11 :176 – :199; 0.5.21 :218 – :247, the same): for a
  model_type "gemma4" config the sliding layers keep head_dim / num_key_value_heads
  (swa_head_dim = swa_v_head_dim = head_dim), the full layers take global_head_dim and
  num_global_key_value_heads, v_head_dim = the full head_dim. 0.5.22 / 0.5.23 read both shapes
  from transformers' per-layer config (``_gemma4_attention_shapes``, 0.5.22 :74, 0.5.23 :79,
  one (head_dim, num_key_value_heads) per layer type). Both wheels pin transformers==5.19.0
  (METADATA Requires-Dist), whose Gemma4TextConfig.__post_init__ (models/gemma4/
  configuration_gemma4.py:210 – :225) builds per_layer_config for the full_attention layers:
  head_dim = ``global_head_dim`` (``kwargs.pop("global_head_dim", 512)``), num_key_value_heads
  = ``num_global_key_value_heads`` only when ``attention_k_eq_v`` (else the sliding value).
* models/gemma4_causal.py (0.5.11 :285; 0.5.23 :397 – :434): a KV-shared layer (the last
  num_kv_shared_layers) attends with ``layer_id`` = the last earlier layer of its type and does
  not save KV (:540), but get_hybrid_layer_ids (configs/model_config.py:2700 in 0.5.23) takes
  every entry of layer_types, so its pool slots are allocated and budgeted all the same (no
  pool code reads num_kv_shared_layers in 0.5.11 – 0.5.23).
* configs/model_config.py 0.5.23: Gemma4ForConditionalGeneration is on multimodal_model_archs
  (:2400) and not on mm_disabled_models (:692 – :697), so it is multimodal by default.
* model_executor/pool_configurator.py HybridSWAPoolConfigurator (0.5.11 :184): full per token
  ``get_num_kv_heads(tp) · (head_dim + v_head_dim) · kv_size`` (:206), SWA per token
  ``get_swa_num_kv_heads(tp) · (swa_head_dim + swa_v_head_dim) · kv_size`` (:213), cell
  ``F·n_full + 0.8·S·n_swa`` (:231); full = available // cell, swa = int(full × 0.8) (:261).
* mem_cache/memory_pool.py (0.5.11 :811 – :816): the SWA pool's MHATokenToKVPool takes
  swa_head_num / swa_head_dim; both pools keep a V buffer (:907), so attention_k_eq_v saves
  nothing.
* models/gemma4_mm.py:240 (0.5.11; 0.5.21 :316): the window is ``sliding_window - 1``, the
  admission floor's from 0.5.16 (pool_configurator.py:427).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sglang_hybrid_cases import plan_doc as plan

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import read_document

KV = Path(__file__).parent
G31B = KV / "configs" / "google--gemma-4-31B-it.text_config.json"
G26B = KV / "configs" / "google--gemma-4-26B-A4B-it.text_config.json"
E4B = KV / "realworld" / "configs" / "google--gemma-4-E4B-it.text_config.json"
GiB = 2**30
MIRRORED = tuple(f"0.5.{n}" for n in range(11, 24))


@pytest.mark.parametrize("release", MIRRORED)
def test_31b_two_pool_geometry(release: str) -> None:
    # 10 full layers (every 6th in layer_types), 50 sliding. Full: 4 global kv heads ×
    # (512 + 512) × 2 B = 8,192 B; sliding: 16 × (256 + 256) × 2 B = 16,384 B.
    # cell = 10 × 8,192 + 0.8 × 50 × 16,384 = 737,280; full = 40 GiB // 737,280 = 58,254;
    # swa = int(58,254 × 0.8) = 46,603.
    result = plan(G31B, release=release, memory_bytes=40 * GiB)
    assert result.value("bytes_per_token") == 737_280
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (58_254, 46_603)
    assert result.log_lines[0] == (
        "Use sliding window memory pool. full_layer_tokens=58254, swa_layer_tokens=46603"
    )
    # K of the SWA pool: (46,603 + 1) × 16 × 256 × 2 B × 50 = 19,089,018,880 B = 17.78 GiB;
    # of the full pool: (58,254 + 1) × 4 × 512 × 2 B × 10 = 2,386,124,800 B = 2.22 GiB.
    assert "#tokens: 46603, K size: 17.78 GB" in result.log_lines[1]
    assert "#tokens: 58254, K size: 2.22 GB" in result.log_lines[2]


@pytest.mark.parametrize("release", MIRRORED)
def test_26b_a4b_two_pool_geometry(release: str) -> None:
    # 5 full, 25 sliding. Full: 2 × 1,024 × 2 = 4,096 B; sliding: 8 × 512 × 2 = 8,192 B.
    # cell = 5 × 4,096 + 0.8 × 25 × 8,192 = 184,320; full = 40 GiB // 184,320 = 233,016;
    # swa = int(233,016 × 0.8) = 186,412.
    result = plan(G26B, release=release, memory_bytes=40 * GiB)
    assert result.value("bytes_per_token") == 184_320
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (233_016, 186_412)


def test_tensor_parallel_divides_each_kind_of_head() -> None:
    # tp 2: full 2 heads × 1,024 × 2 = 4,096 B; sliding 8 × 512 × 2 = 8,192 B per rank:
    # cell = 10 × 4,096 + 0.8 × 50 × 8,192 = 368,640; full = 40 GiB // 368,640 = 116,508.
    result = plan(G31B, release="0.5.21", memory_bytes=40 * GiB, tp=2)
    assert result.value("bytes_per_token") == 368_640
    assert result.value("pool_tokens") == 116_508


def test_admission_floor_uses_sliding_window_minus_one() -> None:
    # 0.5.16: window 1,024 − 1 = 1,023; --max-total-tokens 1,280: swa = 1,024 ≤ 1,023 + 1.
    with pytest.raises(InputError, match=r"SWA pool \(1024 tokens\) cannot hold even one"):
        plan(G31B, release="0.5.16", memory_bytes=40 * GiB, max_total_tokens=1280)
    # 1,282: swa = int(1,025.6) = 1,025 > 1,024: planned; 0.5.15 has no floor.
    ok = plan(G31B, release="0.5.16", memory_bytes=40 * GiB, max_total_tokens=1282)
    assert ok.value("swa_pool_tokens") == 1025
    old = plan(G31B, release="0.5.15", memory_bytes=40 * GiB, max_total_tokens=1280)
    assert old.value("swa_pool_tokens") == 1024


def test_before_the_list_keeps_the_geometry_refusal() -> None:
    with pytest.raises(InputError, match="different head geometry"):
        plan(G31B, release="0.5.10", memory_bytes=40 * GiB)


@pytest.mark.parametrize("release", ("0.5.16", "0.5.21", "0.5.23"))
def test_e4b_kv_shared_layers_keep_their_pool_slots(release: str) -> None:
    # E4B: 42 layers, every 6th full (7 full, 35 sliding), num_kv_shared_layers 18 counted all
    # the same. attention_k_eq_v false, no num_global_key_value_heads: the full layers keep 2
    # KV heads of global_head_dim 512: F = 2 × (512 + 512) × 2 B = 4,096 B; sliding
    # S = 2 × (256 + 256) × 2 B = 2,048 B. cell = 7 × 4,096 + 0.8 × 35 × 2,048 = 86,016;
    # full = 40 GiB // 86,016 = 499,321; swa = int(499,321 × 0.8) = 399,456.
    result = plan(E4B, release=release, memory_bytes=40 * GiB)
    assert result.value("bytes_per_token") == 86_016
    assert (result.value("pool_tokens"), result.value("swa_pool_tokens")) == (499_321, 399_456)


def test_kv_shared_layers_stay_refused_before_gemma4_pools() -> None:
    # 0.5.10 has no Gemma 4 on is_hybrid_swa_model: the one-cell pool keeps the refusal.
    with pytest.raises(InputError, match="num_kv_shared_layers"):
        plan(E4B, release="0.5.10", memory_bytes=40 * GiB)


def _e4b_with(**changes: Any) -> dict[str, Any]:
    doc = read_document(E4B)
    text = {k: v for k, v in doc["text_config"].items() if k != "global_head_dim"}
    return {**doc, "text_config": {**text, **changes}}


def test_transformers_per_layer_defaults_on_0_5_22_on() -> None:
    # No global_head_dim: transformers 5.19.0 gives the full layers 512 (configuration_gemma4.py
    # :210); num_global_key_value_heads 4 without attention_k_eq_v is not applied (:216), so F
    # stays 2 × 1,024 × 2 = 4,096 B and the cell 86,016 as for E4B itself.
    doc = _e4b_with(num_global_key_value_heads=4)
    assert plan(E4B, doc, release="0.5.23", memory_bytes=40 * GiB).value("bytes_per_token") == (
        86_016
    )
    # With attention_k_eq_v the full layers take 4 heads: F = 4 × 1,024 × 2 = 8,192 B;
    # cell = 7 × 8,192 + 57,344 = 114,688.
    doc = _e4b_with(num_global_key_value_heads=4, attention_k_eq_v=True)
    assert plan(E4B, doc, release="0.5.22", memory_bytes=40 * GiB).value("bytes_per_token") == (
        114_688
    )
    # 0.5.21's own override takes num_global_key_value_heads whatever attention_k_eq_v says
    # (utils/hf_transformers/config.py:229 – :242 in 0.5.21): 114,688 there.
    doc = _e4b_with(num_global_key_value_heads=4, global_head_dim=512)
    assert plan(E4B, doc, release="0.5.21", memory_bytes=40 * GiB).value("bytes_per_token") == (
        114_688
    )


def test_no_global_head_dim_is_refused_before_0_5_22() -> None:
    # 0.5.21 reads getattr(text_config, "global_head_dim", None) (config.py:229), which
    # transformers 5.12.1 (its pin) defaults to 512 (configuration_gemma4.py:183): refused there.
    with pytest.raises(InputError, match="without an integer global_head_dim"):
        plan(E4B, _e4b_with(), release="0.5.21", memory_bytes=40 * GiB)


def test_a_stated_per_layer_config_is_refused() -> None:
    doc = _e4b_with(per_layer_config={"5": {"head_dim": 512}})
    with pytest.raises(InputError, match="its own per_layer_config is not mirrored"):
        plan(E4B, doc, release="0.5.23", memory_bytes=40 * GiB)


@pytest.mark.parametrize(
    "changes",
    ({"use_bidirectional_attention": "all"}, {"layer_types": ["sliding_attention"] * 42}),
)
def test_what_transformers_rewrites_is_refused(changes: dict[str, Any]) -> None:
    # configuration_gemma4.py (5.19.0): "all" halves sliding_window (:188), and the last
    # layer is forced to full_attention (:201).
    with pytest.raises(InputError, match="transformers rewrites layer_types / sliding_window"):
        plan(E4B, _e4b_with(global_head_dim=512, **changes), release="0.5.23", memory_bytes=GiB)


def test_conditional_generation_is_multimodal_by_default() -> None:
    # Not on mm_disabled_models (the Gemma 3 gate; 0.5.23 model_config.py:692 – :697).
    from mmcli.kv.sglang.multimodal import is_multimodal
    from mmcli.kv.sglang.releases import sglang_rules

    assert is_multimodal(read_document(G31B), sglang_rules("0.5.23"), from_gpu=True)


def test_causal_and_unified_stay_refused_by_name() -> None:
    # Only model_type "gemma4" configs are turned around (config.py:176 in 0.5.11); the
    # text-only class's pool would read swa_num_key_value_heads it does not have.
    doc = {**read_document(G31B), "architectures": ["Gemma4ForCausalLM"]}
    with pytest.raises(InputError, match="0.5.16 gives Gemma4ForCausalLM a hybrid"):
        plan(G31B, doc, release="0.5.16", memory_bytes=40 * GiB)
    doc = {**read_document(G31B), "architectures": ["Gemma4UnifiedForConditionalGeneration"]}
    with pytest.raises(InputError, match="0.5.16 gives Gemma4UnifiedForConditionalGeneration"):
        plan(G31B, doc, release="0.5.16", memory_bytes=40 * GiB)


def test_layer_types_that_do_not_cover_the_layers_are_refused() -> None:
    doc = read_document(G31B)
    text = doc["text_config"]
    broken = {**doc, "text_config": {**text, "layer_types": text["layer_types"][:-1]}}
    with pytest.raises(InputError, match="layer_types must give num_hidden_layers"):
        plan(G31B, broken, release="0.5.16", memory_bytes=40 * GiB)
