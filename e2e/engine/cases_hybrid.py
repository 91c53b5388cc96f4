"""Cases of the engine differential with recurrent-state layers or cross-layer KV sharing.

Mamba2 hybrids here: hidden 192, 6 heads of 32 (2 KV heads), mamba_expand 1 → intermediate
192 = 6 heads × 32, state 16, one group, conv kernel 4: a conv state of (192 + 2·16) × 3 in
bf16 and an SSM state of 6 × 32 × 16 in float32 (the CPU build keeps SSM states in
float32), 13,632 bytes. The CPU conv kernel takes a conv dimension of 224 (280 is refused:
"causal_conv1d_weight_pack: invalid dim size").

The hybrid block size: vLLM 0.32 raises the attention block to a multiple of
max(kernel block, --block-size) tokens whose page holds a state
(``vllm/platforms/interface.py``, ``_align_hybrid_block_size``; the CPU kernel block is
32); mmcli rounds to 16 tokens. The states here are sized so that both give the same block
(13,632 B over 256 B a token: 64 tokens either way); the ``*-align`` cases show the gap.
"""

from __future__ import annotations

from typing import Any

from case_base import GDN_KEYS, GEMMA3N, QWEN3_5, case, text

#: The attention of the Mamba2 hybrids: 6 heads of 32, 2 KV heads (256 bytes a token).
WIDE = {"hidden_size": 192, "num_attention_heads": 6, "intermediate_size": 384}
MAMBA2_KEYS = {
    "mamba_n_heads": 6,
    "mamba_d_head": 32,
    "mamba_d_state": 16,
    "mamba_n_groups": 1,
    "mamba_d_conv": 4,
    "mamba_expand": 1,
    "mamba_chunk_size": 256,
}
GRANITE_H = text(
    "GraniteMoeHybridForCausalLM",
    "granitemoehybrid",
    num_hidden_layers=4,
    layer_types=["mamba", "attention", "mamba", "mamba"],
    num_local_experts=0,
    shared_intermediate_size=256,
    position_embedding_type="nope",
    **WIDE,
    **MAMBA2_KEYS,
)
NEMOTRON_H = text(
    "NemotronHForCausalLM",
    "nemotron_h",
    num_hidden_layers=4,
    hybrid_override_pattern="M*M-",
    head_dim=32,
    **WIDE,
    mamba_num_heads=6,
    mamba_head_dim=32,
    ssm_state_size=16,
    n_groups=1,
    conv_kernel=4,
    expand=1,
    chunk_size=256,
    mlp_hidden_act="relu2",
)
FALCON_H1 = text(
    "FalconH1ForCausalLM",
    "falcon_h1",
    num_hidden_layers=2,
    head_dim=32,
    mamba_d_ssm=192,
    **WIDE,
    **MAMBA2_KEYS,
)
ZAMBA2 = text(
    "Zamba2ForCausalLM",
    "zamba2",
    num_hidden_layers=4,
    layers_block_type=["mamba", "hybrid", "mamba", "hybrid"],
    num_key_value_heads=4,  # no GQA, as the published Zamba2 configs
    attention_head_dim=64,
    n_mamba_heads=8,
    mamba_headdim=32,
    mamba_ngroups=1,
    mamba_d_state=16,
    mamba_d_conv=4,
    mamba_expand=2,
    chunk_size=256,
    num_mem_blocks=1,
    use_shared_attention_adapter=False,
    use_mem_rope=False,
)
BAMBA = text(
    "BambaForCausalLM", "bamba", num_hidden_layers=4, attn_layer_indices=[1], **WIDE, **MAMBA2_KEYS
)
JAMBA = text(
    "JambaForCausalLM",
    "jamba",
    num_hidden_layers=4,
    attn_layer_period=2,
    attn_layer_offset=1,
    expert_layer_period=2,
    expert_layer_offset=1,
    num_experts=2,
    num_experts_per_tok=1,
    mamba_d_state=12,
    mamba_d_conv=4,
    mamba_expand=2,
    mamba_dt_rank=8,
    use_mamba_kernels=False,
)
#: vLLM's n-gram speculator: no draft model, 3 proposed tokens per step.
NGRAM_3 = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}

QWEN3_NEXT = text(
    "Qwen3NextForCausalLM",
    "qwen3_next",
    num_hidden_layers=4,
    head_dim=64,
    full_attention_interval=2,
    num_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=64,
    shared_expert_intermediate_size=64,
    decoder_sparse_step=1,
    **GDN_KEYS,
)
MAMBA1 = text(
    "MambaForCausalLM",
    "mamba",
    num_attention_heads=None,
    num_key_value_heads=None,
    state_size=16,
    expand=2,
    conv_kernel=4,
    time_step_rank=8,
    intermediate_size=256,
)
MAMBA2 = text(
    "Mamba2ForCausalLM",
    "mamba2",
    num_attention_heads=None,
    num_key_value_heads=None,
    num_heads=8,
    head_dim=32,
    expand=2,
    n_groups=1,
    state_size=16,
    conv_kernel=4,
    chunk_size=256,
)
LFM2 = text(
    "Lfm2ForCausalLM",
    "lfm2",
    num_hidden_layers=4,
    layer_types=["conv", "full_attention", "conv", "full_attention"],
    full_attn_idxs=[1, 3],
    conv_L_cache=3,
    conv_bias=False,
    conv_dim=128,
    conv_dim_out=128,
    block_dim=128,
    block_ff_dim=256,
    block_multiple_of=64,
)
MINIMAX = text(
    "MiniMaxText01ForCausalLM",
    "minimax",
    head_dim=32,
    attn_type_list=[0, 1],
    num_local_experts=2,
    num_experts_per_tok=1,
)
GEMMA4 = text(
    "Gemma4ForCausalLM",
    "gemma4_text",
    num_hidden_layers=6,
    head_dim=64,
    global_head_dim=128,
    sliding_window=128,
    layer_types=["sliding_attention"] * 2
    + ["full_attention"]
    + ["sliding_attention"] * 2
    + ["full_attention"],
    num_kv_shared_layers=2,
    hidden_size_per_layer_input=0,
)


def hybrid_cases() -> list[dict[str, Any]]:
    """State-space / linear-attention hybrids and models with KV sharing."""
    no_cache = {"enable_prefix_caching": False}
    return [
        case("granite-4.0-h", "Granite-4.0-H: Mamba2 + attention", GRANITE_H),
        case("granite-4.0-h-no-prefix-caching", "prefix caching off", GRANITE_H, **no_cache),
        case(
            "granite-4.0-h-block-128",
            "Granite-4.0-H at block 128, prefix caching off",
            GRANITE_H,
            block_size=128,
            **no_cache,
        ),
        case(
            "granite-4.0-h-align",
            "a state of 26,112 B at block 32: vLLM raises to 128 tokens, mmcli to 112",
            {**GRANITE_H, "mamba_d_state": 32},
        ),
        case(
            "granite-4.0-h-block-128-align",
            "a 51,072-byte state at block 128: vLLM raises to 256 tokens, mmcli to 208",
            {**GRANITE_H, "mamba_d_state": 64},
            block_size=128,
        ),
        case("nemotron-h", "Nemotron-H: 'M*M-' pattern", NEMOTRON_H),
        case("nemotron-h-no-prefix-caching", "prefix caching off", NEMOTRON_H, **no_cache),
        case("falcon-h1", "Falcon-H1: attention and Mamba2 in every layer", FALCON_H1),
        case("falcon-h1-no-prefix-caching", "prefix caching off", FALCON_H1, **no_cache),
        case("zamba2", "Zamba2: Mamba2 and shared attention blocks", ZAMBA2),
        case("zamba2-no-prefix-caching", "prefix caching off", ZAMBA2, **no_cache),
        case("bamba", "Bamba: attn_layer_indices", BAMBA),
        case("jamba", "Jamba: Mamba1 + attention", JAMBA),
        case("jamba-no-prefix-caching", "prefix caching off", JAMBA, **no_cache),
        case("qwen3-next", "Qwen3-Next: Gated DeltaNet + full attention", QWEN3_NEXT),
        case("qwen3-next-no-prefix-caching", "prefix caching off", QWEN3_NEXT, **no_cache),
        case("qwen3.5", "Qwen3.5: Gated DeltaNet + full attention", QWEN3_5),
        case("mamba", "Mamba (Mamba1 only, attention-free)", MAMBA1, **no_cache),
        case("mamba2", "Mamba2 only, attention-free", MAMBA2, **no_cache),
        case("lfm2", "LFM2: short-conv layers + attention", LFM2, **no_cache),
        case("minimax-text-01", "MiniMax-Text-01: lightning attention", MINIMAX),
        # Speculative decoding: ngram needs no drafter model, so only the states' growth with
        # num_speculative_tokens shows; MTP adds the drafter's attention layer too.
        case(
            "qwen3-next-ngram-3",
            "3 speculative tokens: wider GDN conv, 3 more state blocks per request",
            QWEN3_NEXT,
            speculative_config=NGRAM_3,
        ),
        case(
            "granite-4.0-h-ngram-3",
            "3 speculative tokens on Mamba-2 states (prefix caching on)",
            GRANITE_H,
            speculative_config=NGRAM_3,
        ),
        case(
            "nemotron-h-ngram-2-no-prefix-caching",
            "2 speculative tokens, prefix caching off",
            NEMOTRON_H,
            speculative_config={**NGRAM_3, "num_speculative_tokens": 2},
            **no_cache,
        ),
        case(
            "jamba-ngram-3",
            "3 speculative tokens on Mamba-1 states (conv not widened)",
            JAMBA,
            speculative_config=NGRAM_3,
        ),
        case(
            "qwen3-next-mtp-2",
            "MTP drafter (1 layer) with 2 speculative tokens",
            {**QWEN3_NEXT, "num_nextn_predict_layers": 1},
            speculative_config={"method": "mtp", "num_speculative_tokens": 2},
        ),
        case("gemma3n", "Gemma 3n: the last 2 layers share the cache", GEMMA3N),
        case("gemma4", "Gemma 4: global_head_dim, the last 2 layers share", GEMMA4),
        case(
            "gemma4-last-sliding",
            "Gemma 4 whose layer_types end sliding: transformers makes the last layer full",
            {
                **GEMMA4,
                "layer_types": ["sliding_attention"] * 2
                + ["full_attention"]
                + ["sliding_attention"] * 3,
            },
        ),
        case(
            "qwen3.5-mtp-1",
            "Qwen3.5 with its MTP layer (mtp_num_hidden_layers 1), 1 speculative token",
            {**QWEN3_5, "mtp_num_hidden_layers": 1},
            speculative_config={"method": "mtp", "num_speculative_tokens": 1},
        ),
    ]
