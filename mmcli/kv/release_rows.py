"""The rows of vLLM's release table (:data:`CHANGES`), read by :mod:`mmcli.kv.releases`: each
names the first release whose planner behaves differently and what changed; the fields are
documented on :class:`mmcli.kv.releases.EngineRules`."""

from __future__ import annotations

from typing import Final

#: The newest release whose rules are mirrored: the default.
NEWEST: Final = "0.34"

#: DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES of config/vllm.py, as the rows below change it.
_QWEN3: Final = ("Qwen3ForCausalLM",)
_DENSE_24: Final = ("LlamaForCausalLM", "MistralForCausalLM", *_QWEN3)
_MOE_24: Final = ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "Qwen2MoeForCausalLM")
_V2_26: Final = (
    *_MOE_24,
    "InklingForCausalLM",
    "InklingForConditionalGeneration",
    "LongcatFlashNgramForCausalLM",
)
_V2_27: Final = (*_V2_26, "KimiK3ForConditionalGeneration")

#: (first release, what changed). The first row is the oldest behaviour mirrored.
#: The model types normalising pixel values on the GPU by default from 0.32: Qwen2-VL,
#: Qwen2.5-VL, Qwen3-VL (and Qwen3.5 / 3.6, whose classes subclass it), Kimi K2.5, Mistral 3 and
#: GLM-4.1V / 4.5V (``supports_mm_device_do_normalize = True`` in each model file).
DEVICE_NORMALIZE_032: Final = (
    "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "kimi_k25",
    "mistral3", "glm4v", "glm4v_moe",
)  # fmt: skip

CHANGES: Final[tuple[tuple[str, dict[str, object]], ...]] = (
    (
        "0.10",
        {
            "group_threshold": None,
            "check": "per-layer",
            "tokens_from_concurrency": False,
            "in_flight_reserve": False,
            "hybrid_prefix_caching_default": False,
            "mamba_all_mode": True,
            "null_block": False,
            "pad_unequal_pages": False,
            "pp_global_groups": False,
            "pp_whole_model_check": False,
            "pp_stage_pages": False,
            "yarn_scales_max_len": True,
            "modelopt_kv_dtype": False,
            "kv_scheme_fp8": "unverified",
            "mm_prefix_batch_floor": False,
            "hunyuan_cla_starts": False,
            "hybrid_align_to_block_size": False,
            "mla_hybrid_alignment": 64,
            "mamba2_prefill_checkpoint": False,
            "speculative_states": "qwen3_next",
            "speculative_state_blocks": False,
            "state_prefix_caching": "refused",
            "full_graph_state_check": False,
            "chunked_local_hybrid": "always",
            "cohere2_window_plus_one": False,
            "max_len_tera": False,
            "max_len_auto": False,
            "dotted_o_cc": False,
            "default_block_size": 16,
            "default_gpu_memory_utilization": 0.9,
            "flashinfer_sampler": "installed",
            "native_top_k_top_p": "sort",
            "v2_sampler": "copy",
            "extensible_kv_cache": False,
            "cudagraph_estimate_subtracted": False,
            "runner_buffers_counted": False,
            "largest_batch_tier": False,
            "gb10_small_tier": False,
            "v2_runner_default": "never",
            "v2_runner_architectures": (),
            "v2_cudagraph_estimate": "zero",
            "dsa_auto_ds_mla": False,
            "dsa_fp8_hook": False,
            "dsa_fp8_backend": False,
            "dsa_block_forced": True,
            "dsa_glm_blackwell_fp8": False,
            "all_mode_speculative_blocks": False,
            "indexer_sharing": False,
            "nemotron_h_ssm_dtype": "model",
            "qwen3_5_named_ssm_dtype": False,
            "state_models_v1_default": False,
            "skip_mm_profiling_flag": False,
            "mm_items_per_prompt": "limit",
            "qwen_vl_video": "less-image-16",
            "qwen_vl_image": "square",
            "mm_tie_later_name": False,
            "v2_encoder_profile": False,
            "qwen_vl_vision_stage": "rotary-each-fp32",
            "siglip_vision_stage": "envelope",
            "qwen3_vl_vision_stage": "envelope",
            "qwen3_vl_video": "none",
            "mm_dummy_tokens": "embeds",
            "mistral3_image_size": "vision-config",
            "gemma4_image_tokens": "unserved",
            "kimi_k25_dummy": "none",
            "mm_device_normalize": (),
            "skip_unused_towers": False,
            "towers_unmarked": (),
            "language_model_only_flag": False,
            "internvl_video_text": "qwen2",
            "llava_ov_video": "less-image",
            "glm4v_image": "frames-16",
            "mm_encoded_item_len": "item",
            "glm4v_video": "sampled",
        },
    ),
    (
        "0.10.1",
        {
            "chunked_local_hybrid": "off",
            "skip_mm_profiling_flag": True,
            "mm_items_per_prompt": "length",
            "mm_dummy_tokens": "placeholder",
            "mm_encoded_item_len": "batched",
        },
    ),
    (
        "0.10.2",
        {
            "state_prefix_caching": "off",
            "state_models_v1_default": True,
            "qwen_vl_video": "seq-16",
            "internvl_video_text": "qwen2-qwen3-gpt-oss",
            "llava_ov_video": "seq",
        },
    ),
    (
        "0.11",
        {
            "pp_global_groups": True,
            "dsa_auto_ds_mla": True,
            "dsa_fp8_hook": True,
            "qwen_vl_video": "seq-14",
            "mm_encoded_item_len": "max-model-len",
            "qwen_vl_vision_stage": "rotary-cat-fp32",
            "qwen3_vl_video": "frames-12.5",
            "qwen3_vl_vision_stage": "rotary-cat-fp32",
        },
    ),
    (
        "0.11.1",
        {
            "dsa_auto_ds_mla": False,
            "qwen_vl_vision_stage": "rotary-reshape-fp32",
            "qwen3_vl_vision_stage": "rotary-reshape-fp32",
        },
    ),
    (
        "0.12",
        {
            "group_threshold": 1.25,
            "state_prefix_caching": "supported",
            "flashinfer_sampler": "opt-in",
            "dotted_o_cc": True,
            "qwen_vl_vision_stage": "rotary-reshape-native-norm",
            "qwen3_vl_vision_stage": "rotary-reshape-model",
        },
    ),
    (
        "0.13",
        {
            "max_len_tera": True,
            "dotted_o_cc": False,
            "qwen3_vl_video": "frames",
            "qwen_vl_image": "factor",
            "mm_dummy_tokens": "embeds",
            "siglip_vision_stage": "siglip-qkv-views",
            "glm4v_video": "fit",
        },
    ),
    (
        "0.14",
        {
            "check": "first-group",
            "pp_whole_model_check": True,
            "modelopt_kv_dtype": True,
            "chunked_local_hybrid": "on",
            "max_len_auto": True,
        },
    ),
    (
        "0.15",
        {
            "speculative_state_blocks": True,
            "state_prefix_caching": "modes",
            "nemotron_h_ssm_dtype": "float16",
            "qwen3_vl_video": "two-frames",
            "kimi_k25_dummy": "image-or-chunk",
            "skip_unused_towers": True,
            "towers_unmarked": ("kimi_k25",),
        },
    ),
    ("0.16", {"kv_scheme_fp8": "always", "towers_unmarked": ()}),
    (
        "0.17",
        {
            "language_model_only_flag": True,
            "pp_whole_model_check": False,
            "pp_stage_pages": True,
            "speculative_states": "gdn",
            "qwen3_5_named_ssm_dtype": True,
            "mm_tie_later_name": True,
            "qwen_vl_vision_stage": "rotary-copy-native-norm",
            "qwen3_vl_vision_stage": "rotary-copy-model",
            "glm4v_image": "processor",
            "native_top_k_top_p": "triton",
        },
    ),
    ("0.18", {"group_threshold": 1.5, "dsa_fp8_backend": True, "dsa_block_forced": False}),
    ("0.19", {"check": "all-groups", "gemma4_image_tokens": "config"}),
    (
        "0.20",
        {
            "hybrid_align_to_block_size": True,
            "full_graph_state_check": True,
            "default_gpu_memory_utilization": 0.92,
            "cudagraph_estimate_subtracted": True,
            "dsa_fp8_hook": False,
            "nemotron_h_ssm_dtype": "float32",
        },
    ),
    ("0.20.1", {"tokens_from_concurrency": True}),
    (
        "0.21",
        {"indexer_sharing": True, "gemma4_image_tokens": "kwargs", "flashinfer_sampler": "default"},
    ),
    (
        "0.22",
        {
            "kv_scheme_fp8": "auto",
            "mm_prefix_batch_floor": True,
            "all_mode_speculative_blocks": True,
            "v2_runner_default": "listed-dense",
            "v2_runner_architectures": ("Qwen3ForCausalLM",),
        },
    ),
    (
        "0.23",
        {
            "v2_runner_architectures": ("LlamaForCausalLM", "MistralForCausalLM", *_QWEN3),
            "glm4v_video": "fit-budget",
        },
    ),
    (
        "0.24",
        {
            "v2_runner_default": "listed",
            "v2_runner_architectures": (*_DENSE_24, *_MOE_24),
            "flashinfer_sampler": "default-sm80",
        },
    ),
    ("0.25", {"v2_runner_default": "dense-or-listed", "v2_runner_architectures": _MOE_24}),
    (
        "0.26",
        {
            "in_flight_reserve": True,
            "hybrid_prefix_caching_default": True,
            "v2_runner_architectures": _V2_26,
            "glm4v_video": "most-budget",
            "v2_sampler": "logits",
        },
    ),
    (
        "0.27",
        {
            "mla_hybrid_alignment": 128,
            "v2_runner_architectures": _V2_27,
            "runner_buffers_counted": True,
        },
    ),
    (
        "0.28",
        {
            "largest_batch_tier": True,
            "v2_runner_default": "hybrid-listed",
            "v2_runner_architectures": (*_V2_27, "DeepseekV4ForCausalLM"),
        },
    ),
    (
        "0.29",
        {
            "null_block": True,
            "mamba_all_mode": False,
            "pad_unequal_pages": True,
            "hunyuan_cla_starts": True,
            "cohere2_window_plus_one": True,
            "v2_runner_default": "always",
            "v2_cudagraph_estimate": "profiled",
            "v2_encoder_profile": True,
            "mistral3_image_size": "processor",
        },
    ),
    (
        "0.30",
        {"yarn_scales_max_len": False, "mm_device_normalize": ("qwen2_vl", "qwen2_5_vl")},
    ),
    ("0.31", {"flashinfer_sampler": "default-sm80-sms"}),
    (
        "0.32",
        {
            "mamba2_prefill_checkpoint": True,
            "speculative_states": "all",
            "dsa_glm_blackwell_fp8": True,
            "mm_device_normalize": DEVICE_NORMALIZE_032,
        },
    ),
    ("0.33", {"gb10_small_tier": True, "v2_sampler": "warmup"}),
    (
        NEWEST,
        {
            "default_block_size": 64,
            "default_gpu_memory_utilization": 1.0,
            "extensible_kv_cache": True,
            "v2_runner_default": "only",
            "v2_cudagraph_estimate": "unless-extensible",
            "mm_device_normalize": (*DEVICE_NORMALIZE_032, "gemma3", "gemma4"),
        },
    ),
)
