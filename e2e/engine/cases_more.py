"""Cases of the engine differential: multimodal wrappers and more architectures.

Multimodal wrappers run with ``language_model_only=True`` (every modality limit 0, so the
engine builds no vision tower and needs no processor): what is checked is the language
model's KV cache as the wrapper names it (``language_model.model.layers.N…``). Their vision
configs are tiny but complete, so that transformers can parse them.
"""

from __future__ import annotations

from typing import Any

from case_base import GDN_KEYS, GEMMA3, GEMMA3N, LLAMA, LLAMA4, MISTRAL, QWEN3_5, case, text

TEXT_ONLY = {"language_model_only": True}


def _text(config: dict[str, Any]) -> dict[str, Any]:
    """A text config for a wrapper's ``text_config`` (no architectures, no dtype)."""
    return {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype")}


SIGLIP = {
    "model_type": "siglip_vision_model",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "image_size": 32,
    "patch_size": 16,
}
CLIP = {**SIGLIP, "model_type": "clip_vision_model", "projection_dim": 64}
GEMMA3_MM = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "text_config": _text(GEMMA3),
    "vision_config": SIGLIP,
    "mm_tokens_per_image": 4,
    "torch_dtype": "bfloat16",
}
LLAVA = {
    "architectures": ["LlavaForConditionalGeneration"],
    "model_type": "llava",
    "text_config": _text(LLAMA),
    "vision_config": CLIP,
    "image_token_index": 511,
    "projector_hidden_act": "gelu",
    "vision_feature_layer": -1,
    "vision_feature_select_strategy": "default",
    "torch_dtype": "bfloat16",
}
PIXTRAL = {
    "model_type": "pixtral",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "head_dim": 32,
    "image_size": 32,
    "patch_size": 16,
}
MISTRAL3 = {
    "architectures": ["Mistral3ForConditionalGeneration"],
    "model_type": "mistral3",
    "text_config": _text(MISTRAL),
    "vision_config": PIXTRAL,
    "image_token_index": 511,
    "spatial_merge_size": 2,
    "vision_feature_layer": -1,
    "torch_dtype": "bfloat16",
}
LLAMA4_MM = {
    "architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4",
    "text_config": _text(LLAMA4),
    "vision_config": {
        "model_type": "llama4_vision_model",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 32,
        "patch_size": 16,
        "vision_output_dim": 64,
        "projector_input_dim": 64,
        "projector_output_dim": 128,
        "pixel_shuffle_ratio": 0.5,
    },
    "image_token_index": 511,
    "torch_dtype": "bfloat16",
}
QWEN3_5_MOE = text(
    "Qwen3_5MoeForCausalLM",
    "qwen3_5_moe_text",
    num_hidden_layers=4,
    head_dim=64,
    full_attention_interval=2,
    num_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=64,
    shared_expert_intermediate_size=64,
    **GDN_KEYS,
)
GRANITE = text("GraniteForCausalLM", "granite")
EXAONE4 = text(
    "Exaone4ForCausalLM",
    "exaone4",
    num_hidden_layers=4,
    sliding_window=128,
    sliding_window_pattern="LLLG",
    layer_types=["sliding_attention"] * 3 + ["full_attention"],
)
GLM4 = text("Glm4ForCausalLM", "glm4", head_dim=32, partial_rotary_factor=0.5)
STARCODER2 = text("Starcoder2ForCausalLM", "starcoder2", sliding_window=128)
GEMMA = text("GemmaForCausalLM", "gemma", head_dim=64)
COHERE = text("CohereForCausalLM", "cohere", logit_scale=0.25)


def more_cases() -> list[dict[str, Any]]:
    """Multimodal wrappers, option variants of hybrids, and more decoder families."""
    return [
        case("gemma3-mm", "Gemma 3 multimodal wrapper (language_model.…)", GEMMA3_MM, **TEXT_ONLY),
        case("llava", "LLaVA wrapper around Llama", LLAVA, **TEXT_ONLY),
        case("mistral3", "Mistral 3 wrapper around a sliding Mistral", MISTRAL3, **TEXT_ONLY),
        case("llama4-mm", "Llama 4 multimodal wrapper", LLAMA4_MM, **TEXT_ONLY),
        case(
            "llama4-chunked-as-full",
            "Llama 4 with VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0",
            LLAMA4,
            env={"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "0"},
        ),
        case("qwen3.5-moe", "Qwen3.5-MoE: Gated DeltaNet + full attention", QWEN3_5_MOE),
        case(
            "qwen3.5-no-prefix-caching",
            "Qwen3.5, prefix caching off",
            QWEN3_5,
            enable_prefix_caching=False,
        ),
        case(
            "gemma3n-no-layer-types",
            "Gemma 3n without layer_types (every 5th layer full, sharing targets by rule)",
            {k: v for k, v in GEMMA3N.items() if k != "layer_types"},
        ),
        case("granite", "Granite (dense)", GRANITE),
        case("exaone4", "EXAONE 4: 3 sliding, 1 full", EXAONE4),
        case("glm4", "GLM-4", GLM4),
        case("starcoder2", "StarCoder2 with a sliding window", STARCODER2),
        case("gemma", "Gemma (1)", GEMMA),
        case("cohere", "Cohere (Command-R)", COHERE),
    ]
