"""What one SGLang release does that matters to its KV pool, as the fields of a release row
(the rows themselves are in :mod:`mmcli.kv.sglang.releases`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: How a release picks ``mem_fraction_static`` when it is not given.
#: "unread": the default was not mirrored (no row read has it now; a release added without its
#: fraction read takes it), so a budget from --gpu needs --mem-fraction-static.
#: "reserve-pcg" (0.5.10 – 0.5.13): "reserve-formula" plus the piecewise (prefill) CUDA graphs'
#: reserve: 8 MiB per captured token count, or 1.5 GiB for an MLA model, none where they are off.
#: "prefill-config" (0.5.14): the same reserve read from cuda_graph_config's prefill phase, whose
#: default backend (tc_piecewise) keeps the graphs for the multimodal architectures SGLang lists.
#: "prefill-breakable" (0.5.15): the prefill backend on CUDA is "breakable", whose own rules
#: turn the graphs off for MLA, multimodal models and DeepSeek-V4 (8 MiB per count otherwise).
#: "breakable-allowlist" (0.5.16, 0.5.17): as "prefill-breakable", but the multimodal
#: architectures SGLang allowlists keep the graphs (the reserve moves to reserve_for_graph_mb).
#: "breakable-mla" (0.5.18 – 0.5.23): as "breakable-allowlist", but an MLA model keeps the
#: breakable prefill graphs (1.5 GiB); the rows' small-GPU tier and decode-graph cap differ.
FractionRule = Literal[
    "tp-table",
    "tp-table-b200",
    "reserve-by-gpu",
    "reserve-formula",
    "reserve-pcg",
    "prefill-config",
    "prefill-breakable",
    "breakable-allowlist",
    "breakable-mla",
    "unread",
]
#: How a release tells a multimodal model (the field ``multimodal_rule`` below).
MultimodalRule = Literal["vision-config", "arch-list", "arch-or-vision", "arch-or-subconfig"]
#: How a release sizes the state pool of a hybrid GDN / Mamba model: "none" (no such model),
#: "fixed" (0.5.3: 512 slots, or --max-running-requests), "ratio" (0.5.4: a share
#: ``mamba_full_memory_ratio`` of the budget while the radix cache is on; fixed while it is off),
#: "unread" (the release serves such models, but its state pool was not mirrored: refused).
HybridRule = Literal["none", "fixed", "ratio", "unread"]
#: How the hybrid sliding-window pool splits the profiled tokens (mmcli/kv/sglang/swa.py):
#: "none" (no such pool mirrored), "layers" (0.5.8: token-layers over ``r·n_swa + n_full``),
#: "bytes" (0.5.9: the bytes over ``F·n_full + r·S·n_swa``), "capacity" (0.5.10: as "bytes",
#: but the SWA pool is r × the page-floored full pool), "budget" (0.5.11 on: the budget over
#: ``F·n_full + r·S·n_swa`` gives the full pool, which --max-total-tokens caps).
SwaSplit = Literal["none", "layers", "bytes", "capacity", "budget"]


@dataclass(frozen=True)
class SglangRules:
    """What one SGLang release does that matters to its KV pool."""

    release: str
    fraction_rule: FractionRule
    #: Multimodal models' default fraction: None (no adjustment), "x0.90", or "vit-scaled".
    vlm_rule: str | None
    #: Architectures whose models would get the hybrid sliding-window pool (they define
    #: ``get_attention_sliding_window_size``) but for which server_args turns it off.
    swa_disabled_for: tuple[str, ...]
    #: Whether the release has a hybrid sliding-window pool at all.
    has_swa_pool: bool
    hybrid_rule: HybridRule = "none"
    #: Hybrid GDN / Mamba models the release serves: (architecture, model_type of the config
    #: class SGLang registers for it).
    hybrid_models: tuple[tuple[str, str], ...] = ()
    #: ``cuda_graph_max_bs`` of the < 35 GiB GPU tier at tp < 4 (16 up to 0.5.4, 24 from 0.5.5).
    small_gpu_graph_bs: int = 16
    #: ``chunked_prefill_size`` and tp >= 4 ``cuda_graph_max_bs`` of the < 35 GiB GPU tier
    #: (2048 and 80 up to 0.5.19; 4096 and 160 from 0.5.20, arg_groups/memory_hook.py:100).
    small_gpu_chunk: int = 2048
    small_gpu_graph_bs_tp4: int = 80
    #: Whether the default decode graphs' max_bs is capped at --max-running-requests (0.5.22
    #: arg_groups/memory_hook.py:183; a --cuda-graph-max-bs given is not).
    graph_bs_capped_by_running: bool = False
    #: Whether a checkpoint's kv_cache_quant_algo (which picks the KV dtype with
    #: --kv-cache-dtype auto) is refused as not mirrored.
    kv_quant_algo_refused: bool = False
    #: Whether models with sliding (or chunked) layers are mirrored: False where the release's
    #: hybrid sliding-window pool was not mirrored (they are refused, naming the release).
    sliding_mirrored: bool = True
    #: Architectures the release gives a hybrid sliding-window pool that is not mirrored (refused
    #: by name; other sliding models keep every token, as their full layers do).
    swa_pool_unmirrored_for: tuple[str, ...] = ()
    #: Whether the MHA cell is ``kv_heads · (head_dim + v_head_dim)`` (0.5.7 on) rather than
    #: ``kv_heads · head_dim · 2``; a config whose ``v_head_dim`` differs is refused there.
    v_head_dim_in_cell: bool = False
    #: Whether the request pool is estimated from the page-floored, --max-total-tokens-capped
    #: capacity and caps --max-running-requests too (0.5.10 ``_resolve_max_num_reqs``), rather
    #: than from the profiled tokens, with --max-running-requests taken as is.
    requests_from_capacity: bool = False
    #: Whether a --max-running-requests is capped at capacity // 2 rather than at the request
    #: pool's estimate (0.5.14 ``_resolve_max_num_reqs``).
    user_requests_capped_by_capacity: bool = False
    #: Whether a budget left non-positive by the weights stops with "Loaded weights leave no GPU
    #: memory for the KV cache" (0.5.14 ``_profile_available_bytes``) before the pool is sized.
    weights_overflow_error: bool = False
    #: Whether the budget of a multimodal model loses a runtime reserve (0.5.18
    #: ``mm_runtime_reservation_gb``: 100 MiB at a single-node launch, whose feature transport
    #: resolves to cpu; budget.MM_RUNTIME_RESERVE_BYTES). ``--memory`` is the budget after it.
    multimodal_kv_reserve: bool = False
    #: Whether a model is multimodal by SGLang's architecture list and text sub-config, with
    #: the breakable allowlist deciding its prefill graphs (mmcli/kv/sglang/multimodal.py);
    #: otherwise by a ``vision_config`` in the config.
    multimodal_by_arch: bool = False
    #: Before those rows, how ``is_multimodal`` reads a config (mmcli/kv/sglang/multimodal.py):
    #: "vision-config" (any ``vision_config``: a row added unread), "arch-list" (on
    #: ``multimodal_archs``), "arch-or-vision" (that, a text sub-config, a vision_config or an
    #: audio_config), "arch-or-subconfig" (on the list or a text sub-config).
    multimodal_rule: MultimodalRule = "vision-config"
    #: That release's ``multimodal_model_archs`` (configs/model_config.py).
    multimodal_archs: frozenset[str] = frozenset()
    #: Whether an unset --enable-multimodal is False for a MiMo-V2 config without both a
    #: vision_config and an audio_config (``MIMO_V2_MULTIMODAL_ARCHS`` gate).
    multimodal_mimo_gate: bool = False
    #: The ``multimodal_by_arch`` rows' ``multimodal_breakable_cuda_graph_supported_model_archs``:
    #: a multimodal model keeps its breakable prefill graphs only on it.
    multimodal_breakable_archs: frozenset[str] = frozenset()
    #: Their ``multimodal_piecewise_cuda_graph_supported_model_archs`` where the breakable default
    #: moves these to tc_piecewise (graphs kept; empty where the release has no such switch).
    multimodal_piecewise_archs: frozenset[str] = frozenset()
    #: Whether the "KV Cache is allocated." line names the pool's dtype (0.5.13
    #: mem_cache/memory_pool.py:819 "KV Cache is allocated. dtype: …, #tokens: …").
    kv_line_names_dtype: bool = False
    #: Whether the MoE runner picked at start-up (flashinfer_trtllm / flashinfer_mxfp4 on SM100)
    #: turns the piecewise graphs off (0.5.10 – 0.5.12 ``_handle_moe_kernel_config``; removed in
    #: 0.5.13): a MoE model's default fraction on a GPU of 160 GiB or more is refused there.
    moe_runner_disables_prefill_graphs: bool = False
    #: Whether EAGLE / NEXTN speculative decoding is mirrored for the hybrid models served: each
    #: state slot also holds the draft tokens' intermediate states (``handle_max_mamba_cache``
    #: divides by 1 + D, 0.5.4 model_runner.py:1438) and the token pool gets the draft headroom.
    speculative_state_in_slots: bool = False
    #: Whether the speculative intermediate states are reserved apart from the slots instead:
    #: ``mamba_cache_per_req × --max-running-requests × D`` off the budget before the ratio
    #: solve, no draft headroom in the target's pool, and the intermediate caches sized by the
    #: request pool + 1 (0.5.7 model_runner_kv_cache_mixin.py:165, :311, :389; memory_pool.py:205).
    speculative_states_reserved: bool = False
    #: Whether Falcon-H1 and Nemotron-H keep the radix cache (0.5.7 model_runner.py no longer
    #: turns it off for ``mamba2_config`` models, as 0.5.6 :448 does): their slots take the ratio.
    mamba2_radix_cache: bool = False
    #: State slots per running request while the radix cache is on: 0.5.4 – 0.5.6
    #: ``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`` 3 (0.5.4 model_runner.py:209); 0.5.7 adds
    #: ``MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP`` 2 with the default no_buffer strategy
    #: (model_runner_kv_cache_mixin.py:39, :290 – :301; server_args.py:766).
    mamba_slots_per_request: int = 3
    #: Whether speculative decoding turns the radix cache off for Nemotron-H (0.5.8
    #: server_args.py:1438): its fixed slots under a speculative run are not mirrored (refused).
    speculative_mamba2_radix_off: bool = False
    #: Whether speculative decoding turns the radix cache off for every hybrid GDN / Mamba-2
    #: model (0.5.9 server_args.py:1760 ``_handle_mamba_radix_cache``): the state slots are then
    #: ``--max-running-requests`` (48 by default with it, :2363; mixin :179) and the requests
    #: are capped at slots // 1 (mixin :362).
    speculative_radix_off: bool = False
    #: Whether speculative decoding with the radix cache on stops SGLang's start instead
    #: (0.5.10 server_args.py:2207 ``_handle_mamba_radix_cache`` raises ValueError under the
    #: default no_buffer strategy, server_args.py:964): refused, naming the error.
    speculative_radix_error: bool = False
    #: Whether the radix cache's no_buffer strategy sets page_size 1 whatever --page-size says
    #: (0.5.11 server_args.py:2420 – :2426 ``_handle_mamba_radix_cache``).
    mamba_radix_page_one: bool = False
    #: Whether no state slot stops SGLang's start with its own error (0.5.13
    #: model_runner_kv_cache_mixin.py:167 'Not enough GPU memory for hybrid (mamba/linear-
    #: attention) state cache'), where earlier releases stop at 'max_running_request is zero'.
    mamba_slots_error: bool = False
    #: Whether the state slots are solved by KVCacheConfigurator._handle_max_mamba_cache
    #: (0.5.16 mem_cache/kv_cache_configurator.py:1703): with EAGLE / NEXTN, jointly with the
    #: intermediate states, ``budget // (per_req × (1 + D / r))`` (r the requests' slot ratio),
    #: then ``per_req × min(--max-running-requests, slots // r) × D`` reserved; the radix
    #: cache stays on, no draft headroom (mmcli.kv.sglang.configurator_state).
    speculative_joint_solve: bool = False
    #: Whether that solve budgets MambaPool's padding slot (0.5.17 :1935 – :1977, 0.5.23
    #: :3364 – :3405): slots ``(budget − per_req) // per_req`` and (slots + 1) × per_req off
    #: the budget; with EAGLE / NEXTN ``(budget − per_req (1 + D)) // (per_req (1 + D / r))``
    #: and the intermediate states of requests + 1.
    mamba_pad_slot_budgeted: bool = False
    #: Whether a linear draft chain (top-k 1) on CUDA stores the intermediate conv windows
    #: deduplicated, one ``(dim, D + K − 2)`` buffer per layer and row (0.5.16
    #: mem_cache/memory_pool.py:110 ``conv_window_dedup_enabled``, :389), which the Mamba
    #: Cache line's intermediate_conv_window_cache size reports (:727).
    conv_window_dedup: bool = False
    #: Whether the radix cache of these models takes the extra_buffer strategy ("auto" resolved
    #: under the overlap schedule, 0.5.14 server_args.py:4380; 0.5.15 on arg_groups/overrides.py),
    #: whose start asserts that --mamba-track-interval is a multiple of the page size and at
    #: least the draft tokens (0.5.14 server_args.py:4364 – :4378 ``_validate_mamba_extra_buffer``,
    #: 0.5.23 arg_groups/mamba_hook.py:133 – :135).
    mamba_extra_buffer: bool = False
    #: Hybrid architectures the release serves whose state pool is not mirrored (0.5.9
    #: model_runner.py:1580: Qwen3.5 / 3.6, their GDN config under ``text_config``): refused.
    hybrid_unmirrored: tuple[str, ...] = ()
    #: Whether Qwen3.5 / 3.6 (``swa_lists.QWEN3_5``) are planned with the release's GDN state
    #: pool: ``hybrid_gdn_config`` reads their ``text_config`` as a Qwen3NextConfig (0.5.9
    #: model_runner.py:1578, configs/qwen3_5.py) and server_args handles them as Qwen3-Next
    #: (server_args.py:1579 – :1597, ``_handle_mamba_radix_cache``).
    qwen3_5_served: bool = False
    #: Whether a path-less EAGLE / NEXTN run sizes the draft's KV layers from the target's
    #: text config: a ``num_nextn_predict_layers`` there adds ``cell × n / layers`` to the cell
    #: (0.5.20 model_runner_components/spec_aux_hidden_state.py:88 – :98, pool_configurator.py
    #: ``eagle_draft_num_layers``; 0.5.16 – 0.5.19 only with --speculative-draft-model-path).
    target_nextn_layers_in_cell: bool = False
    #: Whether the SSM state's dtype is the config's ``mamba_ssm_dtype`` when no
    #: --mamba-ssm-dtype is given (0.5.9 server_args.py:522 default None, configs/mamba_utils.py
    #: ``mamba2_state_dtype``); before, the flag's default float32 (0.5.8 server_args.py:497).
    ssm_dtype_from_config: bool = False
    #: Whether an explicit --context-length (mmcli's --max-model-len) caps the piecewise
    #: graphs' token counts (0.5.13 server_args.py:1579).
    prefill_graphs_clamped_to_context: bool = False
    #: ``is_hybrid_swa_model``'s allow-list (configs/model_config.py): architectures given the
    #: hybrid sliding-window pool (the mirrored ones split by ``swa_split``).
    hybrid_swa_archs: tuple[str, ...] = ()
    swa_split: SwaSplit = "none"
    #: Whether GPT-OSS's default attention backend on SM100 (trtllm_mha) turns the hybrid pool
    #: off (0.5.8 / 0.5.9 server_args.py; 0.5.10 on keep it).
    gpt_oss_sm100_swa_off: bool = True
    #: Whether a config's ``is_hybrid_swa: true`` puts any architecture on the list (0.5.13
    #: configs/model_config.py:1703, 0.5.14 :1873): such a config is refused (not mirrored).
    swa_config_opt_in: bool = False
    #: Whether an SWA pool of no more than SGLang's window + page tokens stops the start
    #: (0.5.16 pool_configurator.py:427 "SWA pool (…) cannot hold even one request"; 0.5.20 on
    #: ``validate_swa_pool_size``): such a plan is refused.
    swa_admission_floor: bool = False
    #: Whether Gemma4ForConditionalGeneration's hybrid SWA pool is mirrored (sglang/gemma4.py):
    #: utils/hf_transformers/config.py turns its config around (full layers: global_head_dim,
    #: num_global_key_value_heads; sliding: head_dim, num_key_value_heads as swa_*), 0.5.11
    #: :176 – :199 to 0.5.21 :218 – :247. 0.5.22 on read the shapes from transformers' per-layer
    #: config (``_gemma4_attention_shapes``; see gemma4_per_layer_shapes).
    gemma4_swa_mirrored: bool = False
    #: Whether Gemma 4's two shapes come from transformers' per-layer config (0.5.23
    #: utils/hf_transformers/config.py :79 ``_gemma4_attention_shapes``, 0.5.22 :74; both pin
    #: transformers==5.19.0, whose Gemma4TextConfig gives the full layers ``global_head_dim``,
    #: 512 by default, and ``num_global_key_value_heads`` only under ``attention_k_eq_v``).
    gemma4_per_layer_shapes: bool = False
    #: Whether a DeepSeek sparse attention (NSA) model's pool is mirrored (mmcli.kv.sglang.dsa):
    #: 0.5.4 – 0.5.10 budget the latent at the KV dtype's size plus the indexer
    #: (``profile_max_num_token``: 0.5.4 model_runner.py:1406, the same block in 0.5.5 / 0.5.6;
    #: 0.5.7 – 0.5.10 model_runner_kv_cache_mixin.py ``get_cell_size_per_token``, :73 / :71 /
    #: :71 / :99) and allocate the fp8 row of 656 B (0.5.4 memory_pool.py:1249; 0.5.5 :1587,
    #: 0.5.6 :1748, 0.5.7 :1839, 0.5.8 :1702 ``override_dim``; 0.5.9 / 0.5.10 the mixin's
    #: ``calculate_mla_kv_cache_dim``, :212 / :240, for every backend but trtllm and ROCm's
    #: tilelang); 0.5.11 – 0.5.16 the same through model_executor/pool_configurator.py
    #: (``_compute_cell_size``, the indexer :141 / :153 / :153 / :193, 0.5.15 :203, 0.5.16
    #: :205); 0.5.17 – 0.5.23 see ``dsa_budget_row_allocated``. From 0.5.15 the NSA defaults are
    #: in arg_groups/overrides.py (0.5.19 on arg_groups/model_overrides/deepseek_v2.py): the
    #: same page 64, dtype and backends, no DP attention without prefill context parallel.
    dsa_mirrored: bool = False
    #: Whether the budget cell takes the allocated latent row (``calculate_mla_kv_cache_dim``
    #: at the KV dtype's size: 656 B with fp8 under flashmla_kv) instead of kv_lora_rank +
    #: qk_rope_head_dim at the dtype's size: 0.5.17 pool_configurator.py:205, 0.5.23 :380.
    dsa_budget_row_allocated: bool = False
    #: Whether the breakable prefill graphs stay on for an NSA model although it is MLA
    #: (0.5.17 server_args.py:4469 "MLA attention (non-DSA)"; 0.5.15 :3352 / 0.5.16 :3774 turn
    #: them off for every MLA model): the default fraction keeps the MLA graphs' 1,536 MiB.
    dsa_breakable_graphs_kept: bool = False
    #: The page size server_args forces for an NSA model on CUDA (0.5.4 server_args.py:1023,
    #: 0.5.5 :1075, 0.5.6 :973, 0.5.7 :1058, 0.5.8 :1158, 0.5.9 :1258, 0.5.10 :1583; from 0.5.8
    #: ROCm gets page 1, not mirrored: the plan is for CUDA).
    dsa_page_size: int = 64
    #: Whether server_args turns DP attention on for an NSA model on CUDA with dp_size = tp
    #: (0.5.4 server_args.py:1020, 0.5.5 :1072; at tp 1 ``_handle_data_parallelism`` turns it
    #: off again, 0.5.4 :1166). 0.5.6 / 0.5.7 set enable_dp_attention but leave dp_size, so at
    #: --dp 1 it is turned off (0.5.6 :951 / :1492, 0.5.7 :1035 / :1802); from 0.5.8 it is set
    #: only with --enable-nsa-prefill-context-parallel (0.5.8 :1122 / :1131). Every release
    #: computes the default fraction before (``__post_init__``: 0.5.4 :544 before :551, 0.5.9
    #: :733 before :736), so DP attention forced there adds no reserve to it; but each rank
    #: then loads the whole attention weights, which a --gpu budget does not mirror.
    dsa_dp_attention: bool = True
    #: Whether an fp8_e4m3 cache on Blackwell (SM100 on) defaults to the trtllm NSA backends,
    #: whose latent row is the budget's ``kv_lora_rank + qk_rope_head_dim`` fp8 bytes (0.5.10
    #: server_args.py:1465 – :1467; mixin :255 ``calculate_mla_kv_cache_dim``); before,
    #: fp8 takes flashmla_auto / flashmla_kv and the 656-B row on every GPU (0.5.9 :1161).
    dsa_fp8_trtllm_on_blackwell: bool = False
    #: Whether SGLang captures no piecewise CUDA graphs for an NSA model under fraction_rule
    #: "reserve-pcg" (DeepseekV32ForCausalLM on ``piecewise_cuda_graph_disabled_model_archs``,
    #: configs/model_config.py:1353 in 0.5.10, :1447 in 0.5.11, :1559 in 0.5.12; 0.5.13 drops it).
    dsa_piecewise_graphs_off: bool = True
