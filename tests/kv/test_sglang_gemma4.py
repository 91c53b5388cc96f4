"""Gemma 4 on SGLang 0.5.11 – 0.5.21: the hybrid sliding-window pool (mmcli/kv/sglang/gemma4.py).

Read from the wheels (sglang/srt):
* configs/model_config.py: ``is_hybrid_swa_model`` lists Gemma4ForCausalLM and
  Gemma4ForConditionalGeneration from 0.5.11 (:1555); ``get_hybrid_layer_ids`` (0.5.11 :1607)
  takes the full / sliding layers from layer_types.
* utils/hf_transformers/config.py (0.5.11 :176 – :199; 0.5.21 :218 – :247, the same): for a
  model_type "gemma4" config the sliding layers keep head_dim / num_key_value_heads
  (swa_head_dim = swa_v_head_dim = head_dim), the full layers take global_head_dim and
  num_global_key_value_heads, v_head_dim = the full head_dim. 0.5.22 / 0.5.23 read both shapes
  from transformers' per-layer config (``_gemma4_attention_shapes``, 0.5.23 :79): refused.
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

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang

KV = Path(__file__).parent
G31B = KV / "configs" / "google--gemma-4-31B-it.text_config.json"
G26B = KV / "configs" / "google--gemma-4-26B-A4B-it.text_config.json"
E4B = KV / "realworld" / "configs" / "google--gemma-4-E4B-it.text_config.json"
GiB = 2**30
MIRRORED = tuple(f"0.5.{n}" for n in range(11, 22))


def plan(path: Path, doc: dict[str, Any] | None = None, **options: Any):  # type: ignore[no-untyped-def]
    document = read_document(path) if doc is None else doc
    return plan_sglang(load_config(path), document, SglangOptions(**options))


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


@pytest.mark.parametrize("release", ("0.5.22", "0.5.23"))
def test_per_layer_config_releases_are_refused_naming_the_newest(release: str) -> None:
    with pytest.raises(InputError, match=r"per-layer config .* \(newest mirrored: 0.5.21\)") as err:
        plan(G31B, release=release, memory_bytes=40 * GiB)
    assert err.value.hint is not None and "--sglang-version 0.5.21" in err.value.hint


def test_before_the_list_keeps_the_geometry_refusal() -> None:
    with pytest.raises(InputError, match="different head geometry"):
        plan(G31B, release="0.5.10", memory_bytes=40 * GiB)


def test_kv_shared_layers_are_refused_by_name() -> None:
    # E4B: num_kv_shared_layers 18.
    with pytest.raises(InputError, match="num_kv_shared_layers"):
        plan(E4B, release="0.5.16", memory_bytes=40 * GiB)


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
