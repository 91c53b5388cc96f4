"""The cases of the engine differential: tiny Hugging Face configs and the engine options.

Each case is a dict: ``name``, ``about`` (what it checks), ``config`` (a config.json; the
engine builds the model from it with random weights), ``engine_args`` (keyword arguments
of ``vllm.LLM``) and ``env`` (environment of the engine process). Dimensions are tiny
(hidden 64-128, 2-6 layers, head sizes the CPU attention kernel takes: 32, 64, 80, …,
512) so that every engine starts in seconds; the KV arithmetic does not care about size.

The engine's options, the builders and the configs the tables share are in
``case_base.py``; this table is the top one, ``all_cases`` gathers every table.
"""

from __future__ import annotations

from typing import Any

# Sibling modules (run_engine.py's folder, on sys.path).
from case_base import GEMMA3, LLAMA, LLAMA4, MISTRAL, case, text
from cases_hybrid import hybrid_cases
from cases_more import more_cases

#: 4 KV heads × 256 × 2 layers, bf16: 8 KiB a token, so a few MiB hold a long request.
LLAMA_WIDE = text(
    "LlamaForCausalLM", "llama", num_attention_heads=4, num_key_value_heads=4, head_dim=256
)
QWEN2 = text("Qwen2ForCausalLM", "qwen2", use_sliding_window=False)
QWEN3 = text("Qwen3ForCausalLM", "qwen3", head_dim=64, num_hidden_layers=3)
QWEN3_MOE = text(
    "Qwen3MoeForCausalLM",
    "qwen3_moe",
    head_dim=64,
    num_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=64,
    decoder_sparse_step=1,
)
GEMMA2 = text(
    "Gemma2ForCausalLM",
    "gemma2",
    num_hidden_layers=4,
    head_dim=64,
    sliding_window=128,
    query_pre_attn_scalar=64,
)
COHERE2 = text(
    "Cohere2ForCausalLM",
    "cohere2",
    num_hidden_layers=4,
    sliding_window=128,
    layer_types=["sliding_attention"] * 3 + ["full_attention"],
)
OLMO2 = text("Olmo2ForCausalLM", "olmo2")
OLMO3_TYPES = ["sliding_attention"] * 3 + ["full_attention"]
OLMO3 = text(
    "Olmo3ForCausalLM", "olmo3", num_hidden_layers=4, sliding_window=128, layer_types=OLMO3_TYPES
)
PHI3 = text("Phi3ForCausalLM", "phi3", sliding_window=256, num_key_value_heads=4)
FALCON_7B = {
    **text("FalconForCausalLM", "falcon", num_key_value_heads=None),
    "multi_query": True,
    "new_decoder_architecture": False,
    "parallel_attn": True,
    "bias": False,
    "alibi": False,
}
FALCON_40B = {
    **text("FalconForCausalLM", "falcon", num_key_value_heads=None),
    "num_kv_heads": 2,
    "multi_query": True,
    "new_decoder_architecture": True,
    "parallel_attn": True,
    "bias": False,
    "alibi": False,
}
GPT_OSS = text(
    "GptOssForCausalLM",
    "gpt_oss",
    num_hidden_layers=4,
    head_dim=64,
    sliding_window=128,
    layer_types=["sliding_attention", "full_attention"] * 2,
    num_local_experts=4,
    num_experts_per_tok=2,
    intermediate_size=128,
)
DEEPSEEK_V2 = text(
    "DeepseekV2ForCausalLM",
    "deepseek_v2",
    kv_lora_rank=64,
    q_lora_rank=None,
    qk_rope_head_dim=32,
    qk_nope_head_dim=32,
    v_head_dim=32,
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=64,
    n_shared_experts=1,
    first_k_dense_replace=1,
    topk_method="greedy",
)
DEEPSEEK_V3 = {
    **DEEPSEEK_V2,
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "q_lora_rank": 64,
    "topk_method": "noaux_tc",
    "n_group": 1,
    "topk_group": 1,
}
MINIMAX_M2 = text(
    "MiniMaxM2ForCausalLM",
    "minimax_m2",
    head_dim=64,
    num_local_experts=4,
    num_experts_per_tok=2,
    rotary_dim=32,
)
HUNYUAN = text(
    "HunYuanDenseV1ForCausalLM",
    "hunyuan_v1_dense",
    num_hidden_layers=4,
    use_cla=True,
    cla_share_factor=2,
)


def attention_cases() -> list[dict[str, Any]]:
    """Attention-only models and the option variants."""
    return [
        case("llama", "Llama: one full-attention group", LLAMA),
        case(
            "llama-cpu-default-block",
            "no block size: the CPU platform's default (128)",
            LLAMA,
            block_size=None,
        ),
        case("llama-block-128", "block size 128", LLAMA, block_size=128),
        case("llama-no-prefix-caching", "prefix caching off", LLAMA, enable_prefix_caching=False),
        case("llama-fp8", "an fp8 KV cache (1 byte)", LLAMA, kv_cache_dtype="fp8"),
        case(
            "llama-config-length",
            "no max_model_len: the config's max_position_embeddings",
            LLAMA,
            max_model_len=None,
        ),
        case(
            "llama-odd-memory",
            "a KV budget that is not a whole number of blocks",
            LLAMA_WIDE,
            kv_cache_memory_bytes=300 * 2**20 + 12345,
            env={"VLLM_CPU_KVCACHE_SPACE": None},
        ),
        case(
            "llama-memory-too-small",
            "a budget that cannot hold one request: the engine refuses to start",
            LLAMA_WIDE,
            max_model_len=4096,
            kv_cache_memory_bytes=16 * 2**20,
            env={"VLLM_CPU_KVCACHE_SPACE": None},
        ),
        # One request of 4096 tokens: 128 blocks of 256 KiB (2 layers × 32 tokens × 4 KiB);
        # from 0.29 the engine also holds back one null block.
        case(
            "llama-memory-just-fits",
            "a budget of one request at max_model_len and the null block",
            LLAMA_WIDE,
            max_model_len=4096,
            kv_cache_memory_bytes=129 * 2**18,
            env={"VLLM_CPU_KVCACHE_SPACE": None},
        ),
        case(
            "llama-memory-one-byte-short",
            "a byte less than llama-memory-just-fits",
            LLAMA_WIDE,
            max_model_len=4096,
            kv_cache_memory_bytes=129 * 2**18 - 1,
            env={"VLLM_CPU_KVCACHE_SPACE": None},
        ),
        case("mistral", "Mistral with sliding_window: every layer slides", MISTRAL),
        case(
            "mistral-sliding-no-prefix-caching",
            "sliding layers without prefix caching",
            MISTRAL,
            enable_prefix_caching=False,
        ),
        case(
            "mistral-no-window-key",
            "Mistral without a sliding_window key (transformers' default 4096)",
            {k: v for k, v in MISTRAL.items() if k != "sliding_window"},
        ),
        case(
            "mistral-window-null",
            "Mistral with sliding_window null: full attention",
            {**MISTRAL, "sliding_window": None},
        ),
        case("qwen2", "Qwen2 without use_sliding_window", QWEN2),
        case(
            "qwen2-sliding",
            "Qwen2, use_sliding_window with max_window_layers 0: every layer slides",
            {**QWEN2, "use_sliding_window": True, "sliding_window": 128, "max_window_layers": 0},
        ),
        case("qwen3", "Qwen3 (head_dim 64 ≠ hidden/heads)", QWEN3),
        case("qwen3-moe", "Qwen3-MoE", QWEN3_MOE),
        case("gemma2", "Gemma 2: sliding and full layers alternate", GEMMA2),
        case("gemma3", "Gemma 3: 5 sliding layers, then one full", GEMMA3),
        case(
            "gemma3-layer-types",
            "Gemma 3 with explicit layer_types",
            {**GEMMA3, "layer_types": ["sliding_attention", "full_attention"] * 3},
        ),
        case(
            "gemma3-long",
            "Gemma 3 at a length past the window and prefill chunk",
            GEMMA3,
            max_model_len=4096,
            max_num_batched_tokens=512,
        ),
        case("cohere2", "Cohere2: 3 sliding, 1 full", COHERE2),
        case("olmo2", "Olmo2 (Transformers backend)", OLMO2),
        case("olmo3", "Olmo3 with layer_types", OLMO3),
        case(
            "olmo3-no-layer-types",
            "Olmo3 without layer_types (transformers: 3 sliding, 1 full)",
            {k: v for k, v in OLMO3.items() if k != "layer_types"},
        ),
        case("phi3", "Phi-3 with a sliding window", PHI3),
        case("falcon-7b", "Falcon-7B: multi_query, one KV head", FALCON_7B),
        case("falcon-40b", "Falcon-40B: new_decoder_architecture, num_kv_heads", FALCON_40B),
        case("gpt-oss", "GPT-OSS: sliding and full layers alternate", GPT_OSS),
        case("llama4", "Llama 4: chunked local attention, a full NoPE layer", LLAMA4),
        case("deepseek-v2", "DeepSeek-V2: MLA (one latent of 64 + 32)", DEEPSEEK_V2),
        case("deepseek-v3", "DeepSeek-V3: MLA with q_lora_rank", DEEPSEEK_V3),
        case("minimax-m2", "MiniMax-M2: full attention", MINIMAX_M2),
        case("hunyuan-cla", "Hunyuan with use_cla: the engine does not share", HUNYUAN),
    ]


def all_cases() -> list[dict[str, Any]]:
    """Every case, attention models first."""
    found = attention_cases() + hybrid_cases() + more_cases()
    names = [c["name"] for c in found]
    if len(set(names)) != len(names):
        raise ValueError("two cases share a name")
    return found
