"""Hugging Face configs the tests build (importable from any test: ``tests`` is on pytest's
``pythonpath``)."""

from __future__ import annotations

from typing import Any

#: Meta-Llama-3-8B's config.json (the keys the tests read): hidden 4096, intermediate 14336,
#: vocab 128256, 32 heads, 8 KV heads, 32 layers, bfloat16.
LLAMA3_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "torch_dtype": "bfloat16",
}


def gemma(n: int, **extra: Any) -> dict[str, Any]:
    """A Gemma-3-like text config of ``n`` layers: 4 KV heads × 256 (a 65,536-byte bf16 page),
    a 1024-token window, every sixth layer full; ``extra`` adds or replaces keys."""
    return {
        "model_type": "gemma3_text",
        "num_hidden_layers": n,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_size": 2048,
        "sliding_window": 1024,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
        "layer_types": [
            "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)
        ],
        **extra,
    }
