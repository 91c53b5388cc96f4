"""What the case tables of the engine differential share: the engine's options, the two
builders (``case``, ``text``) and the model configs more than one table uses.

Below the tables (``cases.py``, ``cases_hybrid.py``, ``cases_more.py``): it imports none of
them, and they import it, so the imports run one way.

Options: vLLM's CPU attention needs blocks of a multiple of 32 tokens
(``vllm/v1/attention/backends/cpu_attn.py``, ``get_supported_kernel_block_sizes``), so the
cases run at block 32 unless they say otherwise; without a block size the CPU platform
picks 128 (``vllm/platforms/cpu.py``).
"""

from __future__ import annotations

import copy
from typing import Any

#: The engine process's environment (single process, offline; VLLM_CPU_KVCACHE_SPACE is
#: the KV memory in GiB: vllm/platforms/cpu.py turns it into kv_cache_memory_bytes).
ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_PLUGINS": "",
    # One thread, no core binding: the tiny models need no more, and the machine is shared.
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "OMP_NUM_THREADS": "1",
}

#: The ``vllm.LLM`` arguments every case starts from.
ENGINE_ARGS: dict[str, Any] = {
    "max_model_len": 1024,
    "max_num_seqs": 4,
    "max_num_batched_tokens": 256,
    "block_size": 32,
    "enforce_eager": True,
    "load_format": "dummy",
    "skip_tokenizer_init": True,
    "seed": 0,
}


def case(
    name: str,
    about: str,
    config: dict[str, Any],
    *,
    env: dict[str, str | None] | None = None,
    **engine_args: Any,
) -> dict[str, Any]:
    """A case: ``engine_args`` replace the defaults (None removes one)."""
    args = {**ENGINE_ARGS, **engine_args}
    return {
        "name": name,
        "about": about,
        "config": copy.deepcopy(config),
        "engine_args": {k: v for k, v in args.items() if v is not None},
        "env": {**ENV, **(env or {})},
    }


def text(arch: str, model_type: str, **keys: Any) -> dict[str, Any]:
    """A tiny decoder config: 2 layers, hidden 128, 4 heads of 32, 2 KV heads, bf16."""
    base: dict[str, Any] = {
        "architectures": [arch],
        "model_type": model_type,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
    }
    return {k: v for k, v in {**base, **keys}.items() if v is not None}


# -- configs more than one table uses ------------------------------------------------------

LLAMA = text("LlamaForCausalLM", "llama", num_hidden_layers=3)
MISTRAL = text("MistralForCausalLM", "mistral", sliding_window=128)
GEMMA3 = text(
    "Gemma3ForCausalLM",
    "gemma3_text",
    num_hidden_layers=6,
    head_dim=64,
    sliding_window=128,
    query_pre_attn_scalar=64,
    rope_scaling=None,
)
LLAMA4 = text(
    "Llama4ForCausalLM",
    "llama4_text",
    num_hidden_layers=4,
    head_dim=64,
    attention_chunk_size=128,
    no_rope_layers=[1, 1, 1, 0],
    num_local_experts=2,
    num_experts_per_tok=1,
    intermediate_size_mlp=256,
    interleave_moe_layer_step=1,
)
GDN_KEYS = {
    "linear_num_key_heads": 2,
    "linear_key_head_dim": 32,
    "linear_num_value_heads": 6,
    "linear_value_head_dim": 32,
    "linear_conv_kernel_dim": 4,
}
QWEN3_5 = text(
    "Qwen3_5ForCausalLM",
    "qwen3_5_text",
    num_hidden_layers=4,
    head_dim=64,
    full_attention_interval=2,
    **GDN_KEYS,
)
GEMMA3N_TYPES = ["sliding_attention"] * 4 + ["full_attention"]
GEMMA3N = text(
    "Gemma3nForCausalLM",
    "gemma3n_text",
    num_hidden_layers=7,
    head_dim=64,
    sliding_window=128,
    layer_types=GEMMA3N_TYPES + ["sliding_attention", "full_attention"],
    num_kv_shared_layers=2,
    hidden_size_per_layer_input=32,
    vocab_size_per_layer_input=512,
    laurel_rank=16,
    altup_num_inputs=4,
    activation_sparsity_pattern=[0.0] * 7,
    query_pre_attn_scalar=64,
)
