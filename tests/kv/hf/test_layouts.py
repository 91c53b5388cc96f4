"""HF configs read as the engine reads them: layer kinds, geometry, states, sharing targets,
and the keys read or refused — for every model family mmcli plans."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.hf.keys import KEYS_IGNORED, KEYS_READ, KEYS_REFUSED
from mmcli.kv.inputs.layer_config import load_config
from mmcli.kv.model import ModelConfig
from mmcli.kv.spec import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)
from mmcli.kv.state import MambaSpec

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
REALWORLD = Path(__file__).resolve().parents[1] / "realworld" / "configs"
ALL_CONFIGS = sorted(CONFIGS.glob("*.json")) + sorted(REALWORLD.glob("*.json"))


def hf(**text: Any) -> ModelConfig:
    return parse_hf_config(text, default_name="test", where="config.json")


def kinds(config: ModelConfig) -> Counter[str]:
    return Counter(layer.attention for layer in config.layers)


def indices(config: ModelConfig, attention: str) -> list[int]:
    """Decoder indices (``…layers.{i}.…``, under a multimodal wrapper's ``language_model.`` too)."""
    return [
        int(layer.name.removeprefix("language_model.").split(".")[2])
        for layer in config.layers
        if layer.attention == attention
    ]


def real(name: str) -> ModelConfig:
    return load_config(CONFIGS / name)


BASE: dict[str, Any] = {
    "num_hidden_layers": 8,
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 4096,
}


# --- the six real configs (tests/kv/configs, see PROVENANCE.md) ---------------------------


def test_qwen3_next_80b_is_12_full_and_36_gdn() -> None:
    config = real("Qwen--Qwen3-Next-80B-A3B-Thinking.json")
    assert config.model_type == "qwen3_next"
    assert kinds(config) == {"full": 12, "mamba": 36}
    assert indices(config, "full") == list(range(3, 48, 4))
    full = config.layers[3].spec
    assert full == FullAttentionSpec(16, 2, 256, "bfloat16")
    state = config.layers[0].spec
    assert isinstance(state, MambaSpec) and state.kind == "gdn"
    assert (state.key_heads, state.key_dim, state.value_heads, state.value_dim) == (
        16,
        128,
        32,
        128,
    )
    # conv (2·16·128 + 32·128 = 8192, 3) bf16 + recurrent (32, 128, 128) bf16
    assert state.state_bytes == 8192 * 3 * 2 + 32 * 128 * 128 * 2 == 1_097_728
    assert state.ssm_dtype == "bfloat16" and config.ssm_dtype_by_release == ()
    assert config.layers[0].name == "model.layers.0.linear_attn"  # as vLLM names it


def test_jamba_15_mini_attention_at_4_12_20_28() -> None:
    config = real("ai21labs--AI21-Jamba-1.5-Mini.json")
    assert kinds(config) == {"full": 4, "mamba": 28}
    assert indices(config, "full") == [4, 12, 20, 28]
    assert config.layers[4].spec == FullAttentionSpec(16, 8, 128, "bfloat16")
    state = config.layers[0].spec
    assert isinstance(state, MambaSpec) and state.kind == "mamba1"
    assert (state.intermediate, state.state_size, state.conv_kernel) == (8192, 16, 4)
    assert state.state_bytes == 8192 * 3 * 2 + 8192 * 16 * 2 == 311_296
    assert config.layers[0].name == "model.layers.0.mixer"  # as vLLM names it
    assert config.layers[4].name == "model.layers.4.attn"


def test_nemotron_h_8b_is_4_attention_24_mamba2_24_mlp() -> None:
    config = real("nvidia--Nemotron-H-8B-Base-8K.json")
    assert kinds(config) == {"full": 4, "mamba": 24, "none": 24}
    pattern = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
    assert indices(config, "full") == [i for i, c in enumerate(pattern) if c == "*"]
    assert indices(config, "full") == [7, 18, 29, 40]
    assert config.layers[7].spec == FullAttentionSpec(16, 8, 128, "bfloat16")
    state = config.layers[0].spec
    assert isinstance(state, MambaSpec) and state.kind == "mamba2"
    assert (state.num_heads, state.head_dim, state.intermediate) == (128, 64, 8192)
    assert (state.state_size, state.n_groups, state.conv_kernel) == (128, 8, 4)
    # the newest release's SSM dtype (float32); older ones are recorded as data
    assert state.dtype == "bfloat16" and state.ssm_dtype == "float32"
    assert state.state_bytes == 10240 * 3 * 2 + 128 * 64 * 128 * 4 == 4_255_744
    assert config.ssm_dtype_by_release == (("0.15", "float16"), ("0.20", "float32"))
    assert config.mamba_chunk_size == 128
    assert config.layers[1].name == "model.layers.1.mlp"


def test_deepseek_v3_is_61_mla_layers_and_one_mtp_layer() -> None:
    config = real("deepseek-ai--DeepSeek-R1.as-DeepSeek-V3.json")
    assert kinds(config) == {"mla": 61}
    spec = config.layers[0].spec
    assert spec == MLAAttentionSpec(16, 1, 576, "bfloat16")
    assert spec is not None and spec.bytes_per_token == 1152
    assert [layer.name for layer in config.mtp_layers] == ["model.layers.61.self_attn.attn"]
    assert config.mtp_layers[0].spec == spec


def test_llama4_scout_is_36_chunked_and_12_full() -> None:
    config = real("meta-llama--Llama-4-Scout-17B-16E-Instruct.subset.json")
    assert kinds(config) == {"chunked": 36, "full": 12}
    assert indices(config, "full") == list(range(3, 48, 4))
    assert config.layers[0].spec == ChunkedLocalAttentionSpec(16, 8, 128, "bfloat16", 8192)
    assert config.layers[3].spec == FullAttentionSpec(16, 8, 128, "bfloat16")


def test_gemma2_9b_alternates_sliding_and_full() -> None:
    config = real("google--gemma-2-9b.subset.json")
    assert kinds(config) == {"sliding": 21, "full": 21}
    assert indices(config, "sliding") == list(range(0, 42, 2))
    assert config.layers[0].spec == SlidingWindowSpec(16, 8, 256, "bfloat16", 4096)
    assert config.layers[1].spec == FullAttentionSpec(16, 8, 256, "bfloat16")


# --- realworld configs --------------------------------------------------------------------


def test_published_gemma3_27b_plans_like_the_one_with_the_pattern() -> None:
    plain = load_config(REALWORLD / "google--gemma-3-27b-it_config.json")
    patterned = load_config(
        REALWORLD / "google--gemma-3-27b-it_config.plus-sliding_window_pattern.json"
    )
    assert plain.layers == patterned.layers
    assert kinds(plain) == {"sliding": 52, "full": 10}
    assert indices(plain, "full") == list(range(5, 62, 6))
    assert plain.max_model_len == 131072  # transformers' default; the file has none


def test_gemma4_e4b_full_layers_use_the_global_head() -> None:
    config = load_config(REALWORLD / "google--gemma-4-E4B-it.text_config.json")
    owners = [layer for layer in config.layers if layer.kv_sharing_target is None]
    assert Counter(layer.attention for layer in owners) == {"sliding": 20, "full": 4}
    full = next(layer.spec for layer in owners if layer.attention == "full")
    assert full == FullAttentionSpec(16, 2, 512, "bfloat16")
    slide = owners[0].spec
    assert slide == SlidingWindowSpec(16, 2, 256, "bfloat16", 512)
    # the last 18 layers share the last non-shared layer of their type (22 sliding, 23 full)
    targets = {layer.kv_sharing_target for layer in config.layers[24:]}
    # the multimodal wrapper's layers carry vLLM's language_model. prefix (gemma4_mm.py)
    assert targets == {
        "language_model.model.layers.22.self_attn.attn",
        "language_model.model.layers.23.self_attn.attn",
    }
    assert config.attention_k_eq_v is False


def test_qwen36_gdn_state_takes_mamba_ssm_dtype() -> None:
    path = REALWORLD / "Qwen--Qwen3.6-35B-A3B.text_config.RECONSTRUCTED.json"
    doc = json.loads(path.read_text())
    assert doc["text_config"]["mamba_ssm_dtype"] == "float32"  # as every published config
    without = json.loads(path.read_text())
    del without["text_config"]["mamba_ssm_dtype"]
    assert parse_hf_config(without, default_name="x", where="x").ssm_dtype_by_release == ()
    config = load_config(path)
    assert kinds(config) == {"full": 10, "mamba": 30}
    state = config.layers[0].spec
    assert isinstance(state, MambaSpec) and state.ssm_dtype == "float32"
    assert state.state_bytes == 8192 * 3 * 2 + 32 * 128 * 128 * 4 == 2_146_304
    assert config.ssm_dtype_by_release == (("0.17", "float32"),)
    # vLLM 0.17.0 model_executor/models/config.py first reads mamba_ssm_dtype for Qwen3.5
    # (0.16.0 has no such rule): under 0.16 the state takes the model dtype.


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=lambda p: p.name)
def test_every_key_of_the_real_configs_is_read_refused_or_known_harmless(path: Path) -> None:
    doc = json.loads(path.read_text())
    keys = set(doc) | set(doc.get("text_config") or {})
    unknown = keys - KEYS_READ - KEYS_IGNORED - set(KEYS_REFUSED)
    assert not unknown, f"{path.name}: classify {sorted(unknown)} in mmcli.kv.hf.keys"


def test_key_lists_are_disjoint() -> None:
    assert not KEYS_READ & KEYS_IGNORED
    assert not KEYS_READ & set(KEYS_REFUSED)
    assert not KEYS_IGNORED & set(KEYS_REFUSED)


# --- sliding-window rules -----------------------------------------------------------------


def test_gemma3_default_pattern_is_6_and_an_explicit_one_wins() -> None:
    gemma3 = {**BASE, "model_type": "gemma3_text", "num_hidden_layers": 12}
    config = hf(**gemma3, sliding_window=1024)
    assert indices(config, "full") == [5, 11]
    config = hf(**gemma3, sliding_window=1024, sliding_window_pattern=4)
    assert indices(config, "full") == [3, 7, 11]


def test_gemma2_without_window_gets_transformers_default() -> None:
    config = hf(**BASE, model_type="gemma2")
    assert config.layers[0].spec == SlidingWindowSpec(16, 2, 128, "bfloat16", 4096)


def test_mistral_window_applies_to_every_layer() -> None:
    config = hf(**BASE, model_type="mistral", sliding_window=4096)
    assert kinds(config) == {"sliding": 8}
    assert [f.code for f in config.findings] == ["sliding-all-layers"]
    assert kinds(hf(**BASE, model_type="mistral", sliding_window=None)) == {"full": 8}
    assert kinds(hf(**BASE, model_type="mistral", sliding_window=0)) == {"full": 8}


def test_qwen2_sliding_rules() -> None:
    qwen = {**BASE, "model_type": "qwen2", "sliding_window": 4096}
    assert kinds(hf(**qwen, use_sliding_window=False)) == {"full": 8}
    assert kinds(hf(**qwen)) == {"full": 8}  # use_sliding_window defaults to false
    assert kinds(hf(**qwen, use_sliding_window=True, max_window_layers=8)) == {"full": 8}
    assert kinds(hf(**qwen, use_sliding_window=True, max_window_layers=0)) == {"sliding": 8}
    with pytest.raises(InputError) as info:
        hf(**qwen, use_sliding_window=True, max_window_layers=4)
    assert str(info.value) == (
        "config.json: use_sliding_window is true and max_window_layers is 4, less than "
        "num_hidden_layers 8: only layers 4… would slide, which the engine refuses ('Sliding "
        "window for some but all layers is not supported')"
    )


def test_layer_types_win_and_unknown_values_are_refused() -> None:
    types = ["sliding_attention", "full_attention"] * 4
    config = hf(**BASE, model_type="gemma3_text", sliding_window=512, layer_types=types)
    assert indices(config, "full") == [1, 3, 5, 7]
    with pytest.raises(InputError) as info:
        hf(**BASE, layer_types=["full_attention"] * 7 + ["diagonal"])
    assert str(info.value) == (
        "config.json: layer_types[7] is 'diagonal', a layer type mmcli does not know"
    )


# --- hybrid layouts -----------------------------------------------------------------------


MAMBA2 = {
    "mamba_n_heads": 16,
    "mamba_d_head": 64,
    "mamba_d_state": 64,
    "mamba_n_groups": 1,
    "mamba_d_conv": 4,
    "mamba_expand": 1,
}


def test_bamba_attn_layer_indices() -> None:
    config = hf(**BASE, **MAMBA2, model_type="bamba", attn_layer_indices=[2, 6])
    assert indices(config, "full") == [2, 6]
    state = config.layers[0].spec
    assert isinstance(state, MambaSpec) and state.kind == "mamba2"
    assert (state.intermediate, state.num_heads, state.head_dim) == (1024, 16, 64)
    with pytest.raises(InputError, match="attn_layer_indices names layer 9, but the model"):
        hf(**BASE, **MAMBA2, model_type="bamba", attn_layer_indices=[9])


def test_granite_moe_hybrid_layer_types() -> None:
    types = ["mamba"] * 3 + ["attention"] + ["mamba"] * 3 + ["attention"]
    config = hf(**BASE, **MAMBA2, model_type="granitemoehybrid", layer_types=types)
    assert kinds(config) == {"full": 2, "mamba": 6}
    missing = {k: v for k, v in MAMBA2.items() if k != "mamba_d_state"}
    with pytest.raises(InputError) as info:
        hf(**BASE, **missing, model_type="granitemoehybrid", layer_types=types)
    assert str(info.value) == (
        "config.json: the config has Mamba2 layers, but mamba_d_state is not set, so their "
        "state size is unknown"
    )


def test_falcon_h1_layers_hold_attention_and_mamba2() -> None:
    config = hf(**BASE, **MAMBA2, model_type="falcon_h1", mamba_d_ssm=2048)
    assert kinds(config) == {"full": 8, "mamba": 8}
    assert [layer.name for layer in config.layers[:2]] == [
        "model.layers.0.self_attn.attn",
        "model.layers.0.mamba",
    ]
    state = config.layers[1].spec
    assert isinstance(state, MambaSpec) and state.intermediate == 2048


def test_zamba2_hybrid_layers_add_attention() -> None:
    zamba = {
        **BASE,
        "model_type": "zamba2",
        "layers_block_type": ["mamba", "hybrid"] * 4,
        "attention_head_dim": 256,
        "n_mamba_heads": 32,
        "mamba_headdim": 64,
        "mamba_ngroups": 1,
        "mamba_d_state": 64,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
    }
    del zamba["head_dim"]
    config = hf(**zamba)
    assert kinds(config) == {"mamba": 8, "full": 4}
    attention = [layer for layer in config.layers if layer.attention == "full"]
    assert attention[0].name == "model.layers.1.self_attn.attn"
    assert attention[0].spec == FullAttentionSpec(16, 8, 256, "bfloat16")
    state = config.layers[0].spec
    assert isinstance(state, MambaSpec) and state.intermediate == 2048


def test_minimax_attn_type_list_linear_state() -> None:
    config = hf(**BASE, model_type="minimax", attn_type_list=[0, 0, 0, 1] * 2)
    assert indices(config, "full") == [3, 7]
    state = config.layers[0].spec
    assert isinstance(state, MambaSpec) and state.kind == "linear"
    assert state.shapes() == ((8, 128, 128),)
    with pytest.raises(InputError, match="attn_type_list must hold 8 entries of 0"):
        hf(**BASE, model_type="minimax", attn_type_list=[0, 2] * 4)


def test_qwen3_next_interval_defaults_to_4() -> None:
    config = hf(**BASE, model_type="qwen3_next")
    assert indices(config, "full") == [3, 7]
    config = hf(**BASE, model_type="qwen3_next", full_attention_interval=2)
    assert indices(config, "full") == [1, 3, 5, 7]


def test_nemotron_pattern_length_and_letters_are_checked() -> None:
    with pytest.raises(InputError, match="hybrid_override_pattern must be a string of 8"):
        hf(**BASE, model_type="nemotron_h", hybrid_override_pattern="M*")
    with pytest.raises(InputError, match=r"hybrid_override_pattern\[1\] is 'X'"):
        hf(**BASE, model_type="nemotron_h", hybrid_override_pattern="MXMMMMMM")


def test_nemotron_config_ssm_dtype_wins() -> None:
    nemotron = {
        **BASE,
        "model_type": "nemotron_h",
        "hybrid_override_pattern": "M*M*M*M*",
        "mamba_num_heads": 8,
        "mamba_head_dim": 64,
        "ssm_state_size": 16,
        "n_groups": 1,
        "conv_kernel": 4,
        "mamba_ssm_cache_dtype": "bfloat16",
    }
    config = hf(**nemotron)
    state = config.layers[0].spec
    assert isinstance(state, MambaSpec) and state.ssm_dtype == "bfloat16"
    assert config.ssm_dtype_by_release == (("0.15", "bfloat16"),)


def test_llama4_default_no_rope_interval_and_other_model_types_refused() -> None:
    config = hf(**BASE, model_type="llama4_text", attention_chunk_size=8192)
    assert indices(config, "full") == [3, 7]
    with pytest.raises(InputError) as info:
        hf(**BASE, model_type="llama", attention_chunk_size=8192)
    assert str(info.value) == (
        "config.json: attention_chunk_size is set, but which layers chunk is model code mmcli "
        "mirrors only for Llama 4 (model_type 'llama')"
    )


def test_mla_needs_the_rope_dim_and_kimi_plans_like_deepseek() -> None:
    config = hf(**BASE, model_type="kimi_k2", kv_lora_rank=512, qk_rope_head_dim=64)
    assert kinds(config) == {"mla": 8}
    assert config.mtp_layers == []
    with pytest.raises(InputError, match="qk_rope_head_dim is not"):
        hf(**BASE, kv_lora_rank=512)


def test_gemma4_global_kv_heads_only_with_k_eq_v() -> None:
    gemma4 = {
        **BASE,
        "model_type": "gemma4_text",
        "num_hidden_layers": 6,
        "head_dim": 256,
        "global_head_dim": 512,
        "num_global_key_value_heads": 1,
    }
    config = hf(**gemma4)
    assert indices(config, "full") == [5]  # pattern 6, last layer full
    assert config.layers[5].spec == FullAttentionSpec(16, 2, 512, "bfloat16")
    config = hf(**gemma4, attention_k_eq_v=True)
    assert config.layers[5].spec == FullAttentionSpec(16, 1, 512, "bfloat16")
    assert config.attention_k_eq_v


# --- refusals -----------------------------------------------------------------------------


def test_recurrent_gemma_is_refused_by_model_type() -> None:
    with pytest.raises(InputError) as info:
        hf(**BASE, model_type="recurrent_gemma", block_types=["recurrent", "attention"])
    assert str(info.value) == (
        "config.json: model_type 'recurrent_gemma': vLLM v1 does not support RecurrentGemma "
        "(recurrent_gemma), so there is no engine KV cache to plan"
    )
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("block_types", ["recurrent"]),
        ("index_topk", 2048),
        ("cross_attention_layers", [3, 8]),
        ("is_encoder_decoder", True),
        ("is_causal", False),
        ("interleaved_sliding_window", 4096),
    ],
)
def test_refused_keys_name_themselves(key: str, value: Any) -> None:
    with pytest.raises(InputError) as info:
        hf(**BASE, **{key: value})
    assert str(info.value).startswith(f"config.json: {key} is set ({value!r}): the config uses ")
    assert str(info.value).endswith("which mmcli does not model")


def test_refused_keys_that_are_off_are_fine() -> None:
    assert kinds(hf(**BASE, is_encoder_decoder=False, is_causal=True, index_topk=None)) == {
        "full": 8
    }


def test_kv_cache_scheme_in_quantization_config_is_read() -> None:
    # planned per release (tests/kv/hf/test_checkpoint_kv.py), no longer refused outright
    doc = {**BASE, "quantization_config": {"kv_cache_scheme": {"num_bits": 8}}}
    declared = parse_hf_config(doc, default_name="m", where="config.json").checkpoint_kv
    assert declared is not None and declared.kind == "scheme" and declared.dtype == "fp8"


# --- sharing ------------------------------------------------------------------------------


def test_hunyuan_cla_is_a_what_if() -> None:
    config = hf(**BASE, model_type="hunyuan_v1_dense", use_cla=True, cla_share_factor=2)
    targets = [layer.kv_sharing_target for layer in config.layers]
    assert targets[:4] == [
        None,
        "model.layers.0.self_attn.attn",
        None,
        "model.layers.2.self_attn.attn",
    ]
    assert config.engine_shares is False
    (finding,) = config.map_findings
    assert (finding.code, finding.severity) == ("cla-not-shared-by-engine", "warning")
    assert finding.message == (
        "the config asks for cross-layer attention (use_cla, cla_share_factor 2), but vLLM "
        "does not share these layers' KV cache: the engine's figures are those without "
        "sharing; sharing 4 of 8 layers is shown as a what-if (it would save 50% of the KV "
        "bytes per token)"
    )


def test_gemma3n_sharing_is_the_engines() -> None:
    types = ["sliding_attention"] * 4 + ["full_attention"]
    config = hf(
        **{**BASE, "num_hidden_layers": 10},
        model_type="gemma3n_text",
        sliding_window=512,
        layer_types=types * 2,
        num_kv_shared_layers=5,
    )
    assert config.engine_shares
    targets = [layer.kv_sharing_target for layer in config.layers[5:]]
    assert targets == ["model.layers.3.self_attn.attn"] * 4 + ["model.layers.4.self_attn.attn"]
