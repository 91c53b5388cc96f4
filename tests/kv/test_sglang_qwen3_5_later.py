"""Qwen3.5 / 3.6 on SGLang 0.5.10 – 0.5.23: served as Qwen3-Next is, derived
by hand from each wheel (the 0.5.9 reading is in tests/kv/test_sglang_qwen3_5.py):

* the state and cell come from ``text_config``: ``hybrid_gdn_config`` returns
  ``get_text_config()`` for Qwen3_5Config / Qwen3_5MoeConfig (0.5.10 model_executor/
  model_runner.py:1832 – :1843, 0.5.11 :2129, 0.5.12 :2258, 0.5.13 :2162; 0.5.16
  configs/hybrid_arch.py:48, 0.5.23 :55); configs/qwen3_5.py / qwen3_next.py read the layers
  and the state shapes as 0.5.9 does (0.5.13 on only add ``__init__`` pass-throughs and
  ``output_gate_type``).
* 0.5.10 – 0.5.13: server_args.py takes Qwen3-Next's branch for both architectures (0.5.13
  :2476 – :2534: ``_handle_mamba_radix_cache`` with the same arguments), so the default
  no_buffer strategy, page 1 from 0.5.11, and speculative decoding under the radix cache
  stopping the start are Qwen3-Next's.
* 0.5.14 – 0.5.23: both are on the extra_buffer list (0.5.14 server_args.py:4338), from 0.5.16
  on ``_MAMBA_RADIX_CACHE_ARCHS`` and ``_MAMBA_EXTRA_BUFFER_ARCHS`` (0.5.16
  arg_groups/overrides.py:1111, :1133; 0.5.23 :369, :404), so "auto" resolves to extra_buffer
  (0.5.23 :454 ``_mamba_radix_cache_resolution``) and requests are capped at slots // 5;
  ``_qwen3_5_hybrid_overrides`` is registered for Qwen3-Next as well (0.5.23
  arg_groups/model_overrides/qwen3_5.py:17). Neither is on the auto draft-path list of NEXTN
  (0.5.23 arg_groups/speculative_hook.py:1121), so a path-less MTP run adds no draft layers
  to the cell (the text_config has no num_nextn_predict_layers; spec_aux_hidden_state.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sglang_hybrid_cases import SPEC, GiB, plan_with

from mmcli.errors import InputError

QWEN3_6 = (
    Path(__file__).parent / "realworld/configs/Qwen--Qwen3.6-35B-A3B.text_config.RECONSTRUCTED.json"
)
#: 30 GDN layers: conv (128·32 + 2·16·128 = 8192, 3) bf16, SSM (32, 128, 128) fp32.
PER_REQ = 30 * 8192 * 3 * 2 + 30 * 32 * 128 * 128 * 4
#: 10 full-attention layers × 2 KV heads × 256 × (K + V) × bf16.
CELL = 10 * 2 * 256 * 2 * 2
SHARE = 40 * 0.9 / (1 + 0.9) * GiB


@pytest.mark.parametrize("release", ["0.5.10", "0.5.11", "0.5.12", "0.5.13"])
def test_0_5_10_to_0_5_13_take_qwen3_next_s_ratio_solve(release: str) -> None:
    # 0.5.10 mixin :179 – :238: int(rest × 0.9 / 1.9 × 2^30 // per_req), capped at slots // 3.
    slots = int(SHARE // PER_REQ)
    result = plan_with(release, QWEN3_6, memory_bytes=40 * GiB)
    assert result.value("state_slots") == slots
    assert result.value("pool_tokens") == int((40 - slots * PER_REQ / GiB) * GiB // CELL)
    assert "requests capped at slots // 3" in result.notes[0]


@pytest.mark.parametrize("release", ["0.5.10", "0.5.13"])
def test_0_5_10_to_0_5_13_refuse_mtp_under_the_radix_cache(release: str) -> None:
    # 0.5.10 server_args.py:2207 raises ValueError("Speculative decoding for … is not
    # compatible with radix cache when using --mamba-scheduler-strategy no_buffer.").
    with pytest.raises(InputError, match="is not compatible with radix cache"):
        plan_with(release, QWEN3_6, memory_bytes=40 * GiB, **SPEC)


@pytest.mark.parametrize(
    ("release", "pad"),
    [
        ("0.5.14", 0),
        ("0.5.15", 0),
        ("0.5.16", 0),
        ("0.5.17", 1),
        ("0.5.20", 1),
        ("0.5.23", 1),
        (None, 1),
    ],
)
def test_0_5_14_on_take_the_configurator_s_solve(release: str | None, pad: int) -> None:
    # 0.5.14 / 0.5.15 list both architectures for extra_buffer (0.5.14 server_args.py:4338 –
    # :4341 _support_mamba_cache_extra_buffer, 0.5.15 arg_groups/overrides.py:982) and solve as
    # 0.5.16 does (model_runner_kv_cache_mixin.py:122 in 0.5.14, :141 in 0.5.15).
    # 0.5.16 kv_cache_configurator.py:1703 int(share // per_req); 0.5.17 on (:1935 – :1977,
    # 0.5.23 :3364 – :3405) int((share − per_req) // per_req), slots + 1 off the budget.
    slots = int((SHARE - pad * PER_REQ) // PER_REQ)
    result = plan_with(release, QWEN3_6, memory_bytes=40 * GiB)
    assert result.value("state_slots") == slots
    tokens = int((40 - (slots + pad) * PER_REQ / GiB) * GiB // CELL)
    assert result.value("pool_tokens") == tokens
    assert "requests capped at slots // 5" in result.notes[0]


def test_0_5_23_solves_mtp_jointly() -> None:
    # 0.5.23 :3364 – :3405 with D = 4 (NEXTN, 3 steps, top-k 1), r = 5: slots
    # int((share − per_req × 5) // (per_req × (1 + 4/5))), then per_req × (min(48, slots // 5)
    # + 1) × 4 reserved; --max-running-requests 48 by default with speculative decoding.
    slots = int((SHARE - PER_REQ * 5) // (PER_REQ * (1 + 4 / 5)))
    reserve = PER_REQ * (min(48, slots // 5) + 1) * 4
    result = plan_with("0.5.23", QWEN3_6, memory_bytes=40 * GiB, **SPEC)
    assert result.value("state_slots") == slots
    rest = 40 - reserve / GiB
    assert result.value("pool_tokens") == int((rest - (slots + 1) * PER_REQ / GiB) * GiB // CELL)


@pytest.mark.parametrize(("release", "refused"), [("0.5.19", False), ("0.5.20", True)])
def test_a_target_num_nextn_predict_layers_is_refused_where_it_scales_the_cell(
    release: str, refused: bool, tmp_path: Path
) -> None:
    # 0.5.20 spec_aux_hidden_state.py:88 – :98: a path-less NEXTN run takes the target's
    # num_nextn_predict_layers (ModelConfig reads the text config) as eagle_draft_num_layers,
    # which pool_configurator.py adds to the cell; 0.5.19 :80 – :84 only with a draft path.
    doc = json.loads(QWEN3_6.read_text())
    doc["text_config"]["num_nextn_predict_layers"] = 1
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    if refused:
        with pytest.raises(InputError, match="num_nextn_predict_layers"):
            plan_with(release, path, memory_bytes=40 * GiB, **SPEC)
    else:
        plan_with(release, path, memory_bytes=40 * GiB, **SPEC)
    assert plan_with(release, path, memory_bytes=40 * GiB).value("state_slots") > 0
