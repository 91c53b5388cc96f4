"""Which Hugging Face config keys the planner reads, refuses, or knows not to matter.

"Never silent": a key that changes which layers hold KV or state, or how much, and that mmcli
does not model, is refused (exit 2) naming the key, instead of planning a wrong figure.
``KEYS_IGNORED`` lists keys known not to change the KV cache (vocabulary, MLP and MoE sizes,
rope, norms, token ids, …); a key in none of the three lists is unknown to mmcli.
"""

from __future__ import annotations

from typing import Any

from mmcli.errors import InputError
from mmcli.kv.hf.context import LENGTH_KEYS
from mmcli.kv.hf.dsa import dsa_model
from mmcli.kv.hf.dsv4 import refuse_deepseek_v4
from mmcli.kv.releases import first_release

#: The keys of a sparse-attention indexer, read (not refused) on the DSA models mmcli plans.
_DSA_KEYS = frozenset({"index_topk", "index_head_dim"})

#: Keys whose values shape the plan (of the text config, or the top level for ``dtype``).
KEYS_READ: frozenset[str] = frozenset(
    {
        # geometry and size
        "model_type",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "attention_head_dim",
        "attention_hidden_size",
        "hidden_size",
        # Falcon: 1 KV head with multi_query, num_kv_heads with new_decoder_architecture
        "multi_query",
        "new_decoder_architecture",
        "num_kv_heads",
        # the length keys and RoPE scaling (max_model_len, mmcli.kv.hf.context)
        *LENGTH_KEYS,
        "original_max_position_embeddings",
        "rope_scaling",
        "rope_parameters",
        "torch_dtype",
        "dtype",
        "text_config",
        "_name_or_path",
        # sliding window
        "sliding_window",
        "sliding_window_pattern",
        "use_sliding_window",
        "max_window_layers",
        "layer_types",
        # chunked local attention (Llama 4)
        "attention_chunk_size",
        "no_rope_layers",
        "no_rope_layer_interval",
        # MLA (DeepSeek V2/V3, Kimi K2) and MTP layers
        "kv_lora_rank",
        "qk_rope_head_dim",
        "num_nextn_predict_layers",
        # Gemma 4 per-layer geometry
        "global_head_dim",
        "num_global_key_value_heads",
        "attention_k_eq_v",
        # sharing
        "num_kv_shared_layers",
        "use_cla",
        "cla_share_factor",
        # hybrid layouts
        "full_attention_interval",
        "attn_layer_period",
        "attn_layer_offset",
        "hybrid_override_pattern",
        "attn_layer_indices",
        "layers_block_type",
        "attn_type_list",
        # Gated DeltaNet state (Qwen3-Next, Qwen3.5/3.6)
        "linear_num_key_heads",
        "linear_key_head_dim",
        "linear_num_value_heads",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
        "mamba_ssm_dtype",
        # Mamba state (Jamba, Nemotron-H, Bamba, Falcon-H1, GraniteMoeHybrid, Zamba2)
        "mamba_d_state",
        "mamba_d_conv",
        "mamba_expand",
        "mamba_d_ssm",
        "mamba_n_heads",
        "mamba_d_head",
        "mamba_n_groups",
        "mamba_num_heads",
        "mamba_head_dim",
        "ssm_state_size",
        "n_groups",
        "conv_kernel",
        "n_mamba_heads",
        "mamba_headdim",
        "mamba_ngroups",
        "mamba_ssm_cache_dtype",
        "chunk_size",
        "mamba_chunk_size",
    }
)

_INDEX_SHARING = (
    "indexer sharing (layers that reuse an earlier layer's top-k keep no indexer cache: vLLM "
    f"{first_release('indexer_sharing')} and newer), whose per-layer indexer caches mmcli "
    "does not plan"
)

#: Keys that change the KV cache in a way mmcli does not model: refused when set (not null,
#: false, 0 or empty), with why. ``is_causal`` is refused when false.
KEYS_REFUSED: dict[str, str] = {
    "block_types": "RecurrentGemma's recurrent blocks, which vLLM v1 does not serve",
    "cross_attention_layers": "cross-attention layers with an encoder cache",
    "is_encoder_decoder": "an encoder-decoder model, whose cross-attention cache mmcli does "
    "not plan",
    "is_causal": "bidirectional (encoder-only) attention, which keeps no decoder KV cache",
    "use_bidirectional_attention": "bidirectional attention over the whole sequence (the "
    "window is halved and the layers are encoder-only)",
    # Planned for the DSA models of mmcli.kv.hf.dsa (DeepSeek V3.2, GLM-5), refused on others.
    "index_topk": "a sparse-attention indexer on a model type whose indexer cache mmcli does "
    "not plan (it plans DeepSeek V3.2's and GLM-5's)",
    "index_head_dim": "a sparse-attention indexer on a model type whose indexer cache mmcli "
    "does not plan (it plans DeepSeek V3.2's and GLM-5's)",
    # Refused when a layer would skip its indexer: index_topk_freq other than 1, an
    # index_topk_pattern with an "S", indexer_types with a "shared" entry.
    "index_topk_freq": _INDEX_SHARING,
    "index_topk_pattern": _INDEX_SHARING,
    "indexer_types": _INDEX_SHARING,
    "interleaved_sliding_window": "an interleaved sliding-window layout mmcli does not mirror",
    "dual_chunk_attention_config": "dual-chunk attention, whose cache layout mmcli does not plan",
    "num_memory_tokens": "memory tokens kept beside the sequence",
}

#: Model types vLLM v1 does not serve: refused whatever the keys say.
MODEL_TYPES_REFUSED: dict[str, str] = {
    "recurrent_gemma": "vLLM v1 does not support RecurrentGemma (recurrent_gemma)",
}

#: Keys known not to change the KV cache (vocabulary, MLP/MoE, rope, norms, ids, metadata).
KEYS_IGNORED: frozenset[str] = frozenset(
    {
        "_note",
        "name",
        "architectures",
        "auto_map",
        "transformers_version",
        "vocab_size",
        "vocab_size_per_layer_input",
        "hidden_size_per_layer_input",
        "tie_word_embeddings",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "boi_token_index",
        "eoi_token_index",
        "image_token_index",
        "mm_tokens_per_image",
        "vision_config",
        "audio_config",
        "quantization_config",
        "initializer_range",
        "use_cache",
        "num_logits_to_keep",
        "output_router_logits",
        "pretraining_tp",
        # MLP / MoE
        "intermediate_size",
        "moe_intermediate_size",
        "shared_expert_intermediate_size",
        "mlp_only_layers",
        "decoder_sparse_step",
        "num_experts",
        "num_experts_per_tok",
        "top_k_experts",
        "n_routed_experts",
        "n_shared_experts",
        "n_group",
        "topk_group",
        "topk_method",
        "scoring_func",
        "routed_scaling_factor",
        "norm_topk_prob",
        "router_aux_loss_coef",
        "first_k_dense_replace",
        "moe_layer_freq",
        "ep_size",
        "expert_layer_offset",
        "expert_layer_period",
        "enable_moe_block",
        "use_double_wide_mlp",
        "mlp_bias",
        "mlp_hidden_act",
        "hidden_act",
        # attention details that do not change what is cached
        "attention_bias",
        "attention_dropout",
        "hidden_dropout",
        "query_pre_attn_scalar",
        "final_logit_softcapping",
        "attn_logit_softcapping",
        "partial_rotary_factor",
        "q_lora_rank",
        "qk_nope_head_dim",
        "v_head_dim",
        # the sparse-attention indexer's query heads and RoPE layout (not cached), and the
        # offset of a sharing pattern (refused above when it applies)
        "index_n_heads",
        "indexer_rope_interleave",
        "index_skip_topk_offset",
        # rope and norms
        "rope_theta",
        "rms_norm_eps",
        "layer_norm_epsilon",
        "rescale_prenorm_residual",
        "residual_in_fp32",
        # Mamba kernels and projections (not the state's size)
        "expand",
        "mamba_conv_bias",
        "mamba_proj_bias",
        "mamba_dt_rank",
        "mamba_hidden_act",
        "use_bias",
        "use_conv_bias",
        "use_mamba_kernels",
    }
)


def _is_set(key: str, value: Any) -> bool:
    if key == "is_causal":
        return value is False
    if key == "index_topk_freq":
        return value != 1 and value is not None  # 1: every layer keeps its indexer
    if key == "index_topk_pattern":
        return isinstance(value, (str, list)) and "S" in value
    if key == "indexer_types":
        return isinstance(value, list) and "shared" in value
    if key == "use_bidirectional_attention" and value == "vision":
        # Gemma 4: two-way attention over image spans only; the cache is an ordinary decoder
        # cache (vLLM's Gemma4 model, transformers' Gemma4TextConfig: only "all" halves the
        # window and turns is_causal off).
        return False
    return value is not None and value is not False and value != 0 and value != [] and value != {}


def refuse_unmodelled(doc: dict[str, Any], text: dict[str, Any], where: str) -> None:
    """Raise :class:`InputError` for a refused model type or a refused key that is set."""
    model_type = str(text.get("model_type") or doc.get("model_type") or "")
    if model_type in MODEL_TYPES_REFUSED:
        raise InputError(
            f"{where}: model_type {model_type!r}: {MODEL_TYPES_REFUSED[model_type]}, so there "
            "is no engine KV cache to plan",
            hint="plan a model that vLLM v1 serves",
        )
    refuse_deepseek_v4(doc, text, where)
    planned = dsa_model(doc, text) is not None  # its indexer keys are read, not refused
    quant = doc.get("quantization_config")
    sources = [text] if text is doc else [text, doc]
    if isinstance(quant, dict):
        sources.append(quant)
    for source in sources:
        for key, why in KEYS_REFUSED.items():
            if planned and key in _DSA_KEYS:
                continue
            if key in source and _is_set(key, source[key]):
                raise InputError(
                    f"{where}: {key} is set ({source[key]!r}): the config uses {why}, which "
                    "mmcli does not model",
                    hint="describe the layers in an mmcli layer config (docs/kv-configs.md) "
                    "to plan it anyway",
                )
