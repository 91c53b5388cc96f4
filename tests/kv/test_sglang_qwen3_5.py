"""SGLang 0.5.9 serves Qwen3.5 / 3.6 with Qwen3-Next's GDN state pool, derived by hand from the
0.5.9 wheel:

* configs/qwen3_5.py: Qwen3_5Config / Qwen3_5MoeConfig (model_type ``qwen3_5`` /
  ``qwen3_5_moe``) build ``text_config`` as Qwen3_5TextConfig / Qwen3_5MoeTextConfig, subclasses
  of Qwen3NextConfig (:12, :111), and a default ``vision_config`` when none is given (:95).
* model_executor/model_runner.py:1578 ``hybrid_gdn_config`` returns ``get_text_config()`` for
  Qwen3NextConfig | Qwen3_5Config | Qwen3_5MoeConfig; the mixin's state and cell are then
  Qwen3-Next's: configs/qwen3_next.py:255 ``layers_block_type`` (every
  ``full_attention_interval``-th layer full attention; ``layer_types`` is taken by __init__,
  :214, and not kept), :283 ``mamba2_cache_params`` (conv ``(value_dim·value_heads +
  2·key_heads·key_dim, kernel − 1)`` bf16, SSM ``(value_heads, value_dim, key_dim)``),
  model_runner_kv_cache_mixin.py:132 the KV cell over ``full_attention_layer_ids`` only.
* configs/mamba_utils.py:76 – :83: the SSM dtype is the config's ``mamba_ssm_dtype``; the
  config handed in is the text config, so the text_config's key counts.
* server_args.py:1579 – :1597: Qwen3_5(Moe)ForConditionalGeneration take Qwen3-Next's branch
  (``_handle_mamba_radix_cache``; speculative decoding turns the radix cache off, :1760).
* configs/model_config.py:1242: both architectures are multimodal (``adjust_mem_fraction_for_vlm``,
  server_args.py:1069, :5483).

The Qwen3.6-35B-A3B config is reconstructed (tests/kv/realworld/configs/PROVENANCE.md): 40
layers, interval 4 (30 GDN, 10 full), 16 / 32 linear heads of 128, conv 4, 2 KV heads of 256.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sglang_hybrid_cases import QWEN3_NEXT, SPEC, GiB, plan_with

from mmcli.errors import InputError
from mmcli.kv.figures import EngineFigures

QWEN3_6 = (
    Path(__file__).parent / "realworld/configs/Qwen--Qwen3.6-35B-A3B.text_config.RECONSTRUCTED.json"
)
#: 30 GDN layers: conv (128·32 + 2·16·128 = 8192, 3) bf16, SSM (32, 128, 128) fp32.
CONV = 30 * 8192 * 3 * 2
SSM = 30 * 32 * 128 * 128 * 4
PER_REQ = CONV + SSM
#: 10 full-attention layers × 2 KV heads × 256 × (K + V) × bf16.
CELL = 10 * 2 * 256 * 2 * 2


def plan(path: Path, **options: Any) -> EngineFigures:
    return plan_with("0.5.9", path, **options)


def variant(tmp_path: Path, text: dict[str, Any] | None = None, **top: Any) -> Path:
    """The Qwen3.6 config with top-level keys and text_config keys replaced."""
    doc = json.loads(QWEN3_6.read_text())
    doc = {**doc, **top, "text_config": {**doc["text_config"], **(text or {})}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def dense(tmp_path: Path) -> Path:
    """Qwen3.5's dense class over the same text geometry (Qwen3_5Config, configs/qwen3_5.py:35)."""
    return variant(
        tmp_path,
        {"model_type": "qwen3_5_text"},
        architectures=["Qwen3_5ForConditionalGeneration"],
        model_type="qwen3_5",
    )


@pytest.mark.parametrize("budget", [40, 60])
@pytest.mark.parametrize("moe", [True, False])
def test_qwen3_5_takes_qwen3_next_s_ratio_solve(budget: int, moe: bool, tmp_path: Path) -> None:
    assert PER_REQ == 64_389_120
    # mixin :186 – :202: int(rest × 0.9 / 1.9 × 2^30 // per_req); the rest to the token pool.
    slots = int(budget * 0.9 / (1 + 0.9) * GiB // PER_REQ)
    tokens = int((budget - slots * PER_REQ / GiB) * GiB // CELL)
    result = plan(QWEN3_6 if moe else dense(tmp_path), memory_bytes=budget * GiB)
    assert result.value("state_slots") == slots
    assert result.value("pool_tokens") == tokens
    assert result.value("bytes_per_token") == CELL
    assert f"{PER_REQ:,} B per request" in result.notes[0]
    assert "requests capped at slots // 3" in result.notes[0]
    assert result.log_lines[0] == (
        f"Mamba Cache is allocated. max_mamba_cache_size: {slots}, "
        f"conv_state size: {CONV * (slots + 1) / GiB:.2f}GB, "
        f"ssm_state size: {SSM * (slots + 1) / GiB:.2f}GB"
    )


@pytest.mark.parametrize("moe", [True, False])
def test_mtp_turns_the_radix_cache_off(moe: bool, tmp_path: Path) -> None:
    # NEXTN / MTP, 3 steps, top-k 1: D = 4; 48 requests' intermediate states reserved first
    # (mixin :156 – :171), then 48 fixed slots (:178 – :185), requests capped at slots // 1.
    rest = 40 - PER_REQ * 48 * 4 / GiB
    tokens = int((rest - 48 * PER_REQ / GiB) * GiB // CELL)
    result = plan(QWEN3_6 if moe else dense(tmp_path), memory_bytes=40 * GiB, **SPEC)
    assert result.value("state_slots") == 48
    assert result.value("pool_tokens") == tokens
    assert result.value("max_running_requests") == 48


@pytest.mark.parametrize(("dtype", "ssm_bytes"), [("bfloat16", 2), ("float32", 4)])
def test_the_text_config_s_mamba_ssm_dtype_sizes_the_state(
    dtype: str, ssm_bytes: int, tmp_path: Path
) -> None:
    per_req = 30 * (8192 * 3 * 2 + 32 * 128 * 128 * ssm_bytes)
    slots = int(40 * 0.9 / (1 + 0.9) * GiB // per_req)
    path = variant(tmp_path, {"mamba_ssm_dtype": dtype})
    assert plan(path, memory_bytes=40 * GiB).value("state_slots") == slots


def test_a_top_level_mamba_ssm_dtype_is_not_the_text_config_s(tmp_path: Path) -> None:
    # mamba2_state_dtype is handed the text config, which has no text_config of its own.
    path = variant(tmp_path, {"mamba_ssm_dtype": None}, mamba_ssm_dtype="bfloat16")
    slots = int(40 * 0.9 / (1 + 0.9) * GiB // PER_REQ)
    assert plan(path, memory_bytes=40 * GiB).value("state_slots") == slots


@pytest.mark.parametrize(
    ("release", "match"),
    [
        ("0.5.8", "has no hybrid state pool in SGLang 0.5.8"),
    ],
)
def test_releases_whose_qwen3_5_pool_is_not_mirrored_refuse(release: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        plan(QWEN3_6, release=release, memory_bytes=40 * GiB)


@pytest.mark.parametrize(
    ("text", "top", "match"),
    [
        ({"full_attention_interval": None}, {}, "full_attention_interval"),
        ({"full_attention_interval": 2}, {}, "layer_types differ from full_attention_interval"),
        ({}, {"model_type": "qwen3_5"}, "model_type 'qwen3_5'"),
    ],
)
def test_configs_sglang_would_read_otherwise_are_refused(
    text: dict[str, Any], top: dict[str, Any], match: str, tmp_path: Path
) -> None:
    path = variant(tmp_path, text, **top)
    if text.get("full_attention_interval", 0) is None:
        doc = json.loads(path.read_text())
        del doc["text_config"]["full_attention_interval"]
        path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError, match=match):
        plan(path, memory_bytes=40 * GiB)


def test_a_default_fraction_needs_the_vision_config(tmp_path: Path) -> None:
    # Qwen3_5Config builds a default vision_config (hidden_size 1152, configs/qwen3_vl.py:11)
    # that scales the default fraction; a config without one is refused, not planned as text.
    gpu = {"gpu_bytes": 80 * GiB, "weights_bytes": 30 * 10**9, "gpu_name": "H100"}
    with pytest.raises(InputError, match="no vision_config"):
        plan(QWEN3_6, **gpu)
    given = plan(QWEN3_6, mem_fraction_static=0.8, **gpu)
    assert given.value("budget_bytes") == int(80 * GiB * 0.8) - 30 * 10**9
    # Qwen3.5's vision_config names its layers "depth": getattr(…, "num_hidden_layers", 24)
    # (server_args.py:5493) reads 24; 24 × 1152² / (24 × 1024²) = 1.265625, factor
    # 0.95 × (1 − 0.1 × 0.265625) = 0.924765625 of the text-only fraction (Qwen3-Next's on
    # the same GPU: the reserve does not depend on the model).
    text_only = plan(QWEN3_NEXT, **gpu).value("budget_bytes") + 30 * 10**9
    vision = variant(tmp_path, vision_config={"depth": 27, "hidden_size": 1152})
    scaled = plan(vision, **gpu)
    fraction = round(text_only / (80 * GiB), 3)
    assert scaled.value("budget_bytes") == int(80 * GiB * (fraction * 0.924765625)) - 30 * 10**9
    assert "scaled down for the vision encoder" in scaled.reserves
