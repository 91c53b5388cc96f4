"""Which vLLM release's KV-cache planning rules to mirror: one declarative table of changes.

Each row of :data:`CHANGES` names the first release whose planner behaves differently, and what
changed; :func:`rules_for` folds the rows up to a release into one :class:`EngineRules` (older
than the first row: the oldest rules; newer than the last: the newest). Facts from each release's
``vllm/v1/core/kv_cache_utils.py``, ``kv_cache_interface.py``, ``vllm/config/``, mamba configs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from mmcli.errors import InputError
from mmcli.kv.release_rows import CHANGES as CHANGES
from mmcli.kv.release_rows import NEWEST as NEWEST
from mmcli.kv.served_releases import FIRST_SERVED as FIRST_SERVED
from mmcli.kv.served_releases import LAST_SERVED as LAST_SERVED
from mmcli.kv.served_releases import V1_FROM as V1_FROM


@dataclass(frozen=True)
class EngineRules:
    """The planner behaviours that differ between vLLM releases."""

    #: The release these rules are for, as the user gave it (or the default).
    release: str
    #: The mirrored release whose rules apply (the last table row at or before ``release``).
    mirrored: str
    #: Largest bucket < threshold × smallest → group size = largest bucket (None: the smallest).
    group_threshold: float | None
    #: What the start-up memory check counts for one request: "per-layer" (every layer's own
    #: blocks × page), "first-group" (group 0's blocks × the group size), "all-groups" (every
    #: group's blocks × the group size, so padding layers are paid for).
    check: str
    #: "GPU KV cache size" is printed as int(max_concurrency × max_model_len)
    #: (before: num_blocks // num_groups × block_size).
    tokens_from_concurrency: bool
    #: A sliding or chunked layer's reserve counts in-flight tokens (concurrent batches ×
    #: max_num_batched_tokens; 2 batches under async scheduling) instead of one batch.
    in_flight_reserve: bool
    #: Prefix caching is on by default for hybrid (attention + state) models.
    hybrid_prefix_caching_default: bool
    #: With prefix caching on, state layers of models that support it keep a state per block
    #: ("all" mode); otherwise, and always from 0.29, two states per request ("align" mode).
    mamba_all_mode: bool
    #: One block of the pool is held back (the null block) in the start-up check and auto-fit.
    null_block: bool
    #: A page that does not divide the largest page is padded (else the engine gives up).
    pad_unequal_pages: bool
    #: Pipeline parallelism. Groups are formed over the whole model and projected onto each
    #: stage (False: each stage groups its own layers, which mmcli does not model).
    pp_global_groups: bool
    #: The start-up check counts the whole model against the smallest stage's memory (else
    #: each stage checks its own layers against its own memory).
    pp_whole_model_check: bool
    #: A uniform-type stage divides its memory by its own layers' pages (else by the whole
    #: model's, so every stage gets the blocks of one GPU holding every layer).
    pp_stage_pages: bool
    #: A YaRN RoPE scaling multiplies the length: the derived max_model_len is its
    #: ``original_max_position_embeddings`` × factor (from 0.30: YaRN leaves
    #: ``max_position_embeddings`` as it is, already the scaled length).
    yarn_scales_max_len: bool
    #: ``--kv-cache-dtype auto`` takes a ModelOpt checkpoint's ``kv_cache_quant_algo``
    #: (``resolve_kv_cache_dtype_string``, from 0.14; before: the model dtype).
    modelopt_kv_dtype: bool
    #: An llm-compressor ``kv_cache_scheme``: "unverified" (not mirrored: refused under
    #: ``auto``), "always" (the cache is fp8 whatever ``--kv-cache-dtype`` says, 0.16-0.21),
    #: "auto" (fp8 unless another ``--kv-cache-dtype`` is given, from 0.22).
    kv_scheme_fp8: str
    #: A multimodal prefix-LM model (Gemma 4) raises an unset ``max_num_batched_tokens`` to
    #: its largest multimodal item (from 0.22).
    mm_prefix_batch_floor: bool
    #: Hunyuan with cross-layer attention (``use_cla``) starts: from 0.29 the registry serves
    #: HunYuan*V1ForCausalLM through the Transformers backend; before, vLLM's own model builds
    #: each sharing layer as cross-attention, whose ``get_kv_cache_spec`` asserts a decoder.
    hunyuan_cla_starts: bool
    #: A hybrid (state + attention) model's attention block is a multiple of
    #: max(kernel alignment, ``--block-size``) (before 0.20: of the kernel alignment alone).
    hybrid_align_to_block_size: bool
    #: The kernel alignment of a hybrid MLA model's block: 64 tokens, 128 from 0.27.
    mla_hybrid_alignment: int
    #: Under prefix caching ("align" mode) a Mamba-2 state (``MambaMixer2``) keeps one more
    #: block per request, its prefill checkpoint (``num_prefill_checkpoint_blocks``, 0.32).
    mamba2_prefill_checkpoint: bool
    #: Which models with recurrent states speculative decoding is planned for: "qwen3_next"
    #: (0.10.2-0.16: the engine refuses every other state model, "Mamba with speculative
    #: decoding is not supported yet", gpu_model_runner.py / layers/mamba/abstract.py),
    #: "gdn" (0.17-0.31: the engine serves every state model; mmcli mirrors the GDN models,
    #: Qwen3-Next and Qwen3.5, and refuses the others), "all" (0.32: every state model, the
    #: engine differential's release). The GDN conv state is ``num_speculative_tokens``
    #: columns wider in every release that serves the model (``num_spec``, mamba_utils.py).
    speculative_states: str
    #: The start-up check and the concurrency count a state's speculative blocks
    #: (``MambaSpec.max_memory_usage_bytes``: page × (1 + K), or (2 + K) in "align" mode,
    #: 0.15); before, one page, though a request is allocated 1 + K of them.
    speculative_state_blocks: bool
    #: With FULL decode CUDA graphs (the default; not with ``--enforce-eager``) a model with
    #: recurrent states refuses to start when max_num_seqs exceeds the pool's blocks
    #: (``CompilationConfig``, config/compilation.py, 0.20).
    full_graph_state_check: bool
    #: What ``--enable-prefix-caching`` does on a model with recurrent states: "refused"
    #: (0.10.0-0.10.1: the runner raises "Prefix caching is not supported for Mamba yet"),
    #: "off" (0.10.2-0.11: turned off for every such model, models/config.py), "supported"
    #: (0.12-0.14: turned off unless the model supports Mamba prefix caching), "modes" (0.15:
    #: ``mamba_cache_mode`` "all" or "align").
    state_prefix_caching: str
    #: Chunked local attention beside the hybrid KV cache manager: "always" (0.10.0, no switch),
    #: else ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE``'s default, "off" (0.10.1,
    #: the manager is turned off and chunked layers are full attention) or "on" (0.14).
    chunked_local_hybrid: str
    #: Cohere2 (``Cohere2ForCausalLM``, ``Cohere2MoeForCausalLM``) builds its sliding layers
    #: with a window of ``sliding_window + 1`` (it attends to [pos - window, pos]), which the
    #: KV cache's eviction uses too (``commandr.py``, ``cohere2_moe.py``, from 0.29).
    cohere2_window_plus_one: bool
    #: The block size without ``--block-size`` (``CacheConfig.DEFAULT_BLOCK_SIZE``,
    #: config/cache.py): 16, 64 from 0.34 (the attention backend keeps it when it supports it,
    #: ``get_preferred_block_size``; FlashMLA and FlashAttention do).
    default_block_size: int
    #: The profile's sampler on CUDA (:mod:`mmcli.kv.whatif.sampler`): FlashInfer's when installed
    #: ("installed"), with VLLM_USE_FLASHINFER_SAMPLER=1 ("opt-in", 0.12), unless it is 0
    #: ("default", 0.21; "-sm80": capability 8.0+, 0.24; "-sms": over 16 SMs, 0.31).
    flashinfer_sampler: str
    #: vLLM's own top-k / top-p: a sort ("sort"), a Triton mask of 8+ rows from 0.17 ("triton").
    native_top_k_top_p: str
    #: The V2 runner's profile sampler: greedy rows, the float32 copy kept (``"copy"``, 0.22) or
    #: not (``"logits"``, 0.26); from 0.33 a second call with every sampling parameter set
    #: (``"warmup"``: FlashInfer's or vLLM's own top-k / top-p), v1/worker/gpu/model_runner.py.
    v2_sampler: str
    #: ``--gpu-memory-utilization``'s default (config/cache.py): 0.9, 0.92 from 0.20, and from
    #: 0.34 1.0 under the extensible KV cache (``resolved_gpu_memory_utilization``).
    default_gpu_memory_utilization: float
    #: The extensible KV cache (0.34, on by default on CUDA and ROCm): sized from measured
    #: memory after warmup, keeping a margin of max(1 GiB, 0.75 × the transient peak)
    #: (v1/worker/extensible_kv_cache.py ``measure_kv_cache_bytes``).
    extensible_kv_cache: bool
    #: The CUDA-graph memory estimate is taken off the KV memory
    #: (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, envs.py: absent before 0.18, default
    #: "0" in 0.18 and 0.19, "1" from 0.20; v1/worker/gpu_worker.py
    #: ``determine_available_memory`` subtracts ``profile_cudagraph_memory()`` when on).
    cudagraph_estimate_subtracted: bool
    #: The profile counts all the worker consumed (``total_consumed``, utils/mem_utils.py, 0.27),
    #: so the model runner's buffers beyond the weights count against the KV cache.
    runner_buffers_counted: bool
    #: ``get_batch_defaults`` (engine/arg_utils.py): a GPU with at least 160 GiB takes the
    #: largest tier, 16384 batched tokens for ``vllm serve`` too (0.28; before, 8192).
    largest_batch_tier: bool
    #: The model runner a model starts on by default (``use_v2_model_runner``, config/vllm.py;
    #: ``VLLM_USE_V2_MODEL_RUNNER`` unset): "never" (V1 only), "listed-dense" (0.22: V2 for
    #: a listed architecture that is neither MoE nor quantized), "listed" (0.24: any listed
    #: one), "dense-or-listed" (0.25: not hybrid nor attention-free, and listed or not MoE),
    #: "hybrid-listed" (0.28: a hybrid only when listed), "always" (0.29), "only" (0.34: the
    #: V1 model runner, v1/worker/gpu_model_runner.py, is removed).
    v2_runner_default: str
    #: ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` (config/vllm.py).
    v2_runner_architectures: tuple[str, ...]
    #: The V2 runner's ``profile_cudagraph_memory`` (v1/worker/gpu/model_runner.py): "zero"
    #: (returns 0, 0.22), "profiled" (a real estimate, 0.29), "unless-extensible" (0 again
    #: when the extensible KV cache is on, 0.34).
    v2_cudagraph_estimate: str
    #: The GB10 (DGX Spark, compute capability 12.1) stays on the small tier though it has
    #: the memory of a large GPU (0.33).
    gb10_small_tier: bool
    #: ``--max-model-len`` takes the ``t`` / ``T`` suffixes (``human_readable_int``, 0.13).
    max_len_tera: bool
    #: ``--max-model-len auto`` / ``-1``: the largest length that fits (0.14).
    max_len_auto: bool
    #: A serve line's ``-O.KEY`` is ``-cc.KEY`` though ``-O`` is ``--optimization-level`` (0.12).
    dotted_o_cc: bool
    #: DeepSeek sparse attention (:mod:`mmcli.kv.engine.sparse`). ``--kv-cache-dtype auto``
    #: caches DeepSeek V3.2 as ``fp8_ds_mla`` (0.11.0 only: its config hook,
    #: ``DeepseekV32ForCausalLM`` in model_executor/models/config.py, takes ``auto`` with the
    #: fp8 dtypes; 0.11.1 takes the fp8 dtypes alone).
    dsa_auto_ds_mla: bool
    #: That hook turns any fp8 ``--kv-cache-dtype`` of DeepSeek V3.2 into ``fp8_ds_mla``
    #: (0.11–0.19; 0.20 drops it).
    dsa_fp8_hook: bool
    #: The FlashMLA-sparse backend turns an fp8 cache of any DSA model into ``fp8_ds_mla``
    #: (``MLAAttention``, model_executor/layers/attention/mla_attention.py, from 0.18).
    dsa_fp8_backend: bool
    #: ``platforms/cuda.py`` forces 64-token blocks on a DSA model whatever ``--block-size``
    #: says (0.11–0.17); from 0.18 the backends' preferred size (64) applies only when no
    #: ``--block-size`` is given.
    dsa_block_forced: bool
    #: On Blackwell (SM10x) GLM-5's config hook makes ``--kv-cache-dtype auto`` fp8
    #: (``GlmMoeDsaForCausalLM``, model_executor/models/config.py, from 0.32): a note.
    dsa_glm_blackwell_fp8: bool
    #: In "all" mode a state keeps its speculative blocks too (``num_speculative_blocks``
    #: added to the per-block states, v1/core/single_type_kv_cache_manager.py, 0.22).
    all_mode_speculative_blocks: bool
    #: Layers that reuse an earlier layer's indexer top-k keep no indexer cache (DeepSeek-V4's
    #: indexer sharing, model_executor/models/, 0.21); mmcli refuses such configs.
    indexer_sharing: bool
    #: Nemotron-H's SSM state dtype under ``--mamba-ssm-cache-dtype auto``: "model" (the
    #: conv / model dtype), "float16" (0.15: the config's ``mamba_ssm_cache_dtype`` or
    #: float16, configs/nemotron_h.py hook), "float32" (0.20).
    nemotron_h_ssm_dtype: str
    #: Qwen3.5's config names the state dtype (``mamba_ssm_dtype``, read by
    #: Qwen3_5ForConditionalGenerationConfig from 0.17, the first release serving it).
    qwen3_5_named_ssm_dtype: bool
    #: A model with recurrent states runs on the V1 engine by default (0.10.2). Before, its
    #: ``_is_v1_supported_oracle`` falls back to V0 ("V1 mamba models are unoptimized",
    #: engine/arg_utils.py) unless VLLM_USE_V1=1 is set, and V1 then turns prefix caching
    #: on, which its runner refuses for Mamba layers.
    state_models_v1_default: bool
    #: ``--skip-mm-profiling`` (engine/arg_utils.py, ``MultiModalConfig.skip_mm_profiling``,
    #: from 0.10.1): the profile run leaves out the multimodal encoder and encoder cache.
    skip_mm_profiling_flag: bool
    #: Multimodal items a prompt in the encoder profile: the ``--limit-mm-per-prompt`` count
    #: (``"limit"``, 0.10.0's profile_run) or at most ``max_model_len // tokens`` of them too
    #: (``"length"``, ``MultiModalBudget.get_max_items`` from 0.10.1).
    mm_items_per_prompt: str
    #: Qwen2-VL's dummy video (qwen2_vl.py ``get_num_frames_with_most_features``): frames that
    #: fit max_model_len less one image, at most 16 (``"less-image-16"``); that fit max_model_len,
    #: at most 16 (``"seq-16"``, 0.10.2) or 14 (``"seq-14"``, 0.11).
    qwen_vl_video: str
    #: Qwen2-VL's image of most features: a huge square resized (``"square"``) or, from 0.13,
    #: the closest factor pair of max_pixels // unit² (``"factor"``).
    qwen_vl_image: str
    #: Modalities tied on tokens an item: the later name is profiled (``max`` keyed on
    #: (tokens, name), encoder_budget.py from 0.17), else the first listed.
    mm_tie_later_name: bool
    #: Qwen3-VL's dummy video (qwen3_vl.py ``get_max_video_tokens``, mm_qwen3.py): the most
    #: frames under max_model_len, its placeholder tokens 12.5 an encoder token
    #: (``"frames-12.5"``) or one (``"frames"``); from 0.15 two frames at the video processor's
    #: longest_edge // temporal_patch_size pixels whatever max_model_len (``"two-frames"``);
    #: ``"none"``: no Qwen3-VL (before 0.11).
    qwen3_vl_video: str
    #: Model Runner V2 profiles the multimodal encoder (``profile_encoder_cache``, from 0.29).
    v2_encoder_profile: bool
    #: Qwen2.5-VL's vision block's peak a patch (qwen2_5_vl.py ``Qwen2_5_VisionAttention``): q and
    #: k rotated one by one in float32 (``"rotary-each-fp32"``, 0.10), their cat
    #: (``"rotary-cat-fp32"``, 0.11) or a rearranged copy (``"rotary-reshape-fp32"``, 0.11.1)
    #: rotated in float32; ``"rotary-reshape-native-norm"`` (0.12): the rearranged copy rotated out
    #: of place in the model dtype, the attention stage's peak at the output projection, the fused
    #: residual norm out of place (RMSNorm's native forward: inductor's default custom_ops "none";
    #: ``"rotary-reshape-model"`` under --enforce-eager); ``"envelope"``: the generic per-patch
    #: envelope; ``"rotary-copy-native-norm"`` (0.17): a contiguous copy of q/k rotated out of
    #: place in the model dtype, the attention stage's peak at the output projection, the norm out
    #: of place as in 0.12 (from 0.21 the native IR kernel, first under the default compiled mode);
    #: ``"rotary-copy-model"``: the same under --enforce-eager (the in-place fused residual norm).
    qwen_vl_vision_stage: str
    #: Gemma 3's SigLIP vision block: the generic per-patch envelope (``"envelope"``) or, from
    #: 0.13, the tallied block (``"siglip-qkv-views"``: q/k/v views of the qkv output into
    #: flash attention, out-of-place LayerNorm and GELU, the embeddings kept in a list).
    siglip_vision_stage: str
    #: Qwen3-VL's (and Qwen3.5's) vision block: the generic per-patch envelope (``"envelope"``,
    #: no Qwen3-VL before 0.11) or its attention stage, that of Qwen2.5-VL's attention class it
    #: builds (:data:`~mmcli.kv.whatif.encoder.VISION_STAGES`): ``"rotary-cat-fp32"`` (0.11),
    #: ``"rotary-reshape-fp32"`` (0.11.1), ``"rotary-reshape-model"`` (0.12),
    #: ``"rotary-copy-model"`` (0.17); its LayerNorms are out of place whatever
    #: ``--enforce-eager``, its MLP not gated, its position embeddings and deepstack outputs kept.
    qwen3_vl_vision_stage: str
    #: A dummy item of a model without its own count (``get_mm_max_tokens_per_item`` None)
    #: counted by its encoder outputs (``"embeds"``, ``get_num_embeds``) or, 0.10.1 – 0.12
    #: (``get_mm_max_contiguous_tokens``), by its placeholder tokens (``"placeholder"``,
    #: Mistral 3's row breaks and end token too).
    mm_dummy_tokens: str
    #: Mistral 3's dummy image side: ``vision_config.image_size`` (``"vision-config"``) or, from
    #: 0.29, the image processor's ``size["longest_edge"]`` (``"processor"``).
    mistral3_image_size: str
    #: Gemma 4's dummy image tokens: no Gemma 4 multimodal model (``"unserved"``), from 0.19
    #: ``vision_config.default_output_length`` (``"config"``), from 0.21 the
    #: ``--mm-processor-kwargs`` ``max_soft_tokens`` where given (``"kwargs"``).
    gemma4_image_tokens: str
    #: Kimi K2.5's dummy vision chunk: not served (``"none"``) or, from 0.15 (kimi_k25.py), the
    #: larger of a 3,000-pixel square image and a chunk of such frames (``"image-or-chunk"``).
    kimi_k25_dummy: str
    #: The model types whose pixel values reach the GPU as the image's raw ``uint8`` bytes, to
    #: be rescaled and normalised there (``supports_mm_device_do_normalize`` of the model class,
    #: on by default, ``--mm-device-do-normalize``; config/model.py, from 0.30); any other
    #: model's processor returns float32 pixel values.
    mm_device_normalize: tuple[str, ...]
    #: Whether the model's encoder towers are left out (not built, their weights not loaded)
    #: when every modality they serve is off (``--limit-mm-per-prompt`` 0, from 0.17
    #: ``--language-model-only``): ``_mark_tower_model``, model_executor/models/interfaces.py,
    #: from 0.15 (before: some models, such as Qwen2.5-VL, on their own).
    skip_unused_towers: bool
    #: The model types whose class does not yet build its towers in ``_mark_tower_model``
    #: (kimi_k25.py: from 0.16), so they are loaded whatever the limits.
    towers_unmarked: tuple[str, ...]
    #: ``--language-model-only`` (config/multimodal.py, from 0.17): every modality's limit 0.
    language_model_only_flag: bool
    #: InternVL's dummy video (internvl.py ``get_video_token`` / ``ctx_video_token``): served for a
    #: ``qwen2`` text model (``"qwen2"``) or, from 0.10.2, a ``qwen2``, ``qwen3``, ``qwen3_moe`` or
    #: ``gpt_oss`` one (``"qwen2-qwen3-gpt-oss"``), if the tokenizer has the video token.
    internvl_video_text: str
    #: LLaVA-OneVision's dummy video (llava_onevision.py ``get_num_frames_with_most_features``):
    #: the frames that fit max_model_len less one image when images are on (``"less-image"``)
    #: or, from 0.10.2, max_model_len (``"seq"``), at most 16.
    llava_ov_video: str
    #: GLM-4.1V's dummy image (glm4_1v.py ``get_image_size_with_most_features``): a huge square
    #: resized as 16 frames at 28 · 28 · 2 · 30,000 pixels (``"frames-16"``) or, from 0.17, as
    #: one frame at the image processor's ``size["longest_edge"]`` (``"processor"``).
    glm4v_image: str
    #: The length the profile run builds the dummy item it encodes at (with that modality
    #: alone): the item's counted tokens (``"item"``, 0.10.0's profile_run), from 0.10.1
    #: ``max_num_batched_tokens`` (``"batched"``, ``_get_mm_dummy_batch``) and from 0.11
    #: ``max_model_len`` (``"max-model-len"``); read for InternVL's dummy video, whose frames
    #: grow with it.
    mm_encoded_item_len: str
    #: GLM-4.1V's dummy video (glm4_1v.py ``get_num_frames_with_most_features``): frames sampled
    #: by the video processor (``"sampled"``), from 0.13 the most frames (at least two) whose
    #: vision tokens at 28 · 28 · 2 · 30,000 pixels fit ``max_model_len`` less one image
    #: (``"fit"``), from 0.23 with a tokenizer-bounded video for a processor other than
    #: ``Glm4vProcessor`` (``"fit-budget"``), from 0.26 the frame count of most tokens at the
    #: video processor's ``longest_edge`` (``"most-budget"``).
    glm4v_video: str


#: The rules that matter only with pipeline stages (``--pipeline-parallel-size`` > 1).
PIPELINE_FIELDS: Final = frozenset({"pp_global_groups", "pp_whole_model_check", "pp_stage_pages"})

#: The rules that matter only for DeepSeek sparse attention (a config with an indexer).
DSA_FIELDS: Final = frozenset({"dsa_auto_ds_mla", "dsa_fp8_hook", "dsa_fp8_backend",
                               "dsa_block_forced", "dsa_glm_blackwell_fp8"})  # fmt: skip

#: The rules that change only how the command line is read, not any plan.
CLI_FIELDS: Final = frozenset({"max_len_tera", "max_len_auto", "dotted_o_cc"})
#: The rules that shape only the ``--gpu`` estimate's encoder profile, never a plan of a given
#: KV memory.
ENCODER_FIELDS: Final = frozenset(
    {"mm_items_per_prompt", "qwen_vl_video", "qwen_vl_image", "mm_tie_later_name",
     "v2_encoder_profile", "qwen_vl_vision_stage", "siglip_vision_stage", "qwen3_vl_video",
     "qwen3_vl_vision_stage", "mm_dummy_tokens", "mistral3_image_size", "gemma4_image_tokens",
     "kimi_k25_dummy", "mm_device_normalize", "skip_unused_towers", "towers_unmarked",
     "language_model_only_flag", "internvl_video_text", "llava_ov_video", "glm4v_image",
     "mm_encoded_item_len", "glm4v_video"}
)  # fmt: skip

_VERSION = re.compile(r"^v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?(?:[.+-]?[0-9A-Za-z.+-]*)?$")


def parse_release(text: str) -> tuple[int, int, int]:
    """``0.20`` → (0, 20, 9999) (the newest patch of 0.20); ``0.20.1`` → (0, 20, 1)."""
    match = _VERSION.match(text.strip())
    if match is None:
        raise InputError(
            f"--vllm-version: cannot read {text!r} as a vLLM release",
            hint=f"write MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. 0.19 or 0.20.1 (newest: {NEWEST})",
        )
    major, minor, patch = match.groups()
    return int(major), int(minor), 9999 if patch is None else int(patch)


def applies(since: str, rules: EngineRules) -> bool:
    """Whether a change first released in ``since`` is in effect under ``rules``."""
    return _key(since) <= parse_release(rules.release)


def _key(release: str) -> tuple[int, int, int]:
    major, minor, *rest = (int(p) for p in release.split("."))
    return major, minor, rest[0] if rest else 0


@lru_cache(maxsize=64)
def rules_for(release: str | None = None) -> EngineRules:
    """The rules of ``release`` (default: the newest mirrored), built once per release."""
    wanted = parse_release(release or NEWEST)
    fields: dict[str, object] = dict(CHANGES[0][1])
    mirrored = CHANGES[0][0]
    for since, change in CHANGES[1:]:
        if _key(since) > wanted:
            break
        fields.update(change)
        mirrored = since
    return EngineRules(release=release or NEWEST, mirrored=mirrored, **fields)  # type: ignore[arg-type]


def first_release(field: str, value: object = True, *, after: str | None = None) -> str:
    """The first release (after ``after``, if given) whose rules set ``field`` to ``value``,
    for messages, from :data:`CHANGES` (so that no message repeats a release number)."""
    for since, change in CHANGES:
        if after is not None and _key(since) <= _key(after):
            continue
        if change.get(field, object()) == value:
            return since
    raise KeyError(f"no release sets {field} to {value!r}")


def value_history(field: str) -> str:
    """``0.9; 0.92 from 0.20; 1.0 from 0.34``: a rule's value in the oldest release mirrored
    and each change after it, for help texts (from :data:`CHANGES`)."""
    steps = [(since, change[field]) for since, change in CHANGES if field in change]
    first, *later = steps
    return "; ".join([f"{first[1]}", *(f"{value} from {since}" for since, value in later)])


def mirrored_range() -> str:
    """``0.10 … 0.34``: the oldest and the newest release whose rules are mirrored."""
    return f"{CHANGES[0][0]} … {NEWEST}"


def describe(rules: EngineRules) -> str:
    """``vLLM 0.25 rules (as 0.20.1)`` — which release the user asked for and which row applies."""
    if rules.release == rules.mirrored:
        return f"vLLM {rules.release} rules"
    return f"vLLM {rules.release} rules (those of {rules.mirrored})"
