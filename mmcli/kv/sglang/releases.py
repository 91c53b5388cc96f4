"""The SGLang releases mmcli mirrors, and what differs between them, as data.

Read from each release's wheel (``sglang/srt/server_args.py``, ``model_executor/
model_runner.py``, ``mem_cache/memory_pool.py``, ``configs/model_config.py``); the facts, with
file and line, are in docs/kv-share-engines.md. A release not listed here was not read and is
refused rather than planned with another release's rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from mmcli.errors import InputError
from mmcli.kv.sglang import swa_lists as sl
from mmcli.kv.sglang.release_names import ALIASES, ARGS_FIRST_IN, UNMIRRORED, mm_fields
from mmcli.kv.sglang.rules import FractionRule, HybridRule, SglangRules, SwaSplit
from mmcli.kv.sglang.swa_lists import LLAMA4_GPT_OSS, MIMO_V2, STEP3P5, with_swa

__all__ = ["ARGS_FIRST_IN", "FractionRule", "HybridRule", "SglangRules", "SwaSplit"]

_GEMMA_OFF = (
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
    "Gemma3ForConditionalGeneration",
    "Gemma3nForCausalLM",
    "Gemma3nForConditionalGeneration",
)

#: 0.5.3: ``is_hybrid_gdn`` (model_runner.py:1301); 0.5.4 adds Nemotron-H (``mamba2_config``,
#: model_runner.py:1490, configs/nemotron_h.py). No 0.4.x release has any of these models.
_HYBRID_053 = (("Qwen3NextForCausalLM", "qwen3_next"), ("FalconH1ForCausalLM", "falcon_h1"))
_HYBRID_054 = (*_HYBRID_053, ("NemotronHForCausalLM", "nemotron_h"))

#: Releases read, oldest first.
RELEASES: tuple[SglangRules, ...] = (
    SglangRules("0.4.6.post5", "tp-table", None, (), has_swa_pool=False),
    SglangRules("0.4.7", "tp-table-b200", None, (), has_swa_pool=False),
    SglangRules("0.4.9.post2", "reserve-by-gpu", "x0.90", (), has_swa_pool=False),
    SglangRules(
        "0.5.3",
        "reserve-formula",
        "vit-scaled",
        (*_GEMMA_OFF, "GptOssForCausalLM"),
        True,
        "fixed",
        _HYBRID_053,
    ),
    SglangRules(
        "0.5.4",
        "reserve-formula",
        "vit-scaled",
        (*_GEMMA_OFF, "Olmo2ForCausalLM", "GptOssForCausalLM"),
        True,
        "ratio",
        _HYBRID_054,
        dsa_mirrored=True,
        speculative_state_in_slots=True,
    ),
)

#: 0.5.5 – 0.5.9 size a dense / MLA pool as 0.5.4 does (``profile_max_num_token``, model_runner.py
#: in 0.5.5 / 0.5.6, model_executor/model_runner_kv_cache_mixin.py from 0.5.7); the default
#: fraction differs only in the < 35 GiB tier (server_args.py ``_handle_gpu_memory_settings``).
#: 0.5.5 and 0.5.6 size the GDN / Mamba state pool as 0.5.4 does (``handle_max_mamba_cache``,
#: model_runner.py:1325 in 0.5.5, :1450 in 0.5.6: the same ratio solve, the same 512 / request
#: cap with the radix cache off, the same MambaPool of slots + 1, memory_pool.py:258 / :233) for
#: the same three models; they add Kimi-Linear (KimiLinearForCausalLM, a KDA state of three conv
#: buffers), not mirrored. 0.5.7 on reserve the speculative intermediate states apart, by
#: --max-running-requests (model_runner_kv_cache_mixin.py:145), and add the mamba scheduler
#: strategies: not mirrored. Their sliding-window rule is 0.5.4's
#: through 0.5.7: the same model classes define ``get_attention_sliding_window_size`` (gemma2,
#: gemma3_causal, gemma3_mm, gemma3n_causal, gemma3n_mm, gpt_oss, olmo2) and server_args turns
#: the hybrid SWA pool off for each (0.5.5 server_args.py:997, :1029, :1035; 0.5.6 :1123,
#: :1166, :1172; 0.5.7 :1214, :1278, :1284); Llama 4 gets one only with --hybrid-kvcache-ratio
#: (configs/model_config.py ``is_hybrid_model``). 0.5.7 adds MiMo-V2-Flash, always hybrid
#: (model_config.py:1153), whose split is not mirrored. 0.5.8 on (``is_hybrid_swa_model``:
#: GPT-OSS, Llama 4, MiMo-V2) are not mirrored.
_PROFILED = replace(
    RELEASES[-1],
    hybrid_rule="unread",
    hybrid_models=(),
    small_gpu_graph_bs=24,
    speculative_state_in_slots=False,
)
#: 0.5.6 on: no DP attention for an NSA model at --dp 1 (see ``dsa_dp_attention``).
_TP_ATTN = replace(_PROFILED, dsa_dp_attention=False)
#: 0.5.8 / 0.5.9 server_args turn the pool off for Gemma 2/3/3n and Olmo 2 (not on the list
#: either); GPT-OSS's only with the trtllm_mha backend (swa.py).
_SWA_OFF_058 = (*_GEMMA_OFF, "Olmo2ForCausalLM")
#: server_args.py ``_handle_gpu_memory_settings`` is the same in 0.5.10 – 0.5.12; 0.5.13 also
#: clamps the piecewise graphs to --context-length, which is None unless given (a plan never
#: gives it), and no longer lets the MoE runner turn the piecewise graphs off.
#: The third item: whether the NSA pool is mirrored (``dsa_mirrored``).
_PCG_ROWS: tuple[tuple[str, bool, bool], ...] = (
    ("0.5.10", True, True),
    ("0.5.11", True, True),
    ("0.5.12", True, True),
    ("0.5.13", False, True),
)
RELEASES = (
    *RELEASES,
    *(
        replace(
            _PROFILED,
            release=name,
            hybrid_rule="ratio",
            hybrid_models=_HYBRID_054,
            speculative_state_in_slots=True,
            dsa_dp_attention=dp_size_set,
        )
        #: 0.5.6 no longer sets dp_size = tp for an NSA model (``dsa_dp_attention``).
        for name, dp_size_set in (("0.5.5", True), ("0.5.6", False))
    ),
    #: 0.5.7: the state pool of model_runner_kv_cache_mixin.py:145 (the speculative states
    #: reserved apart, :165), the radix cache kept for Falcon-H1 and Nemotron-H (server_args.py
    #: :1330, :1444 turn it off only for trtllm_mha on SM100), requests capped at slots // 5.
    replace(
        _TP_ATTN,
        release="0.5.7",
        v_head_dim_in_cell=True,
        swa_pool_unmirrored_for=MIMO_V2,
        hybrid_rule="ratio",
        hybrid_models=_HYBRID_054,
        speculative_states_reserved=True,
        mamba2_radix_cache=True,
        mamba_slots_per_request=5,
    ),
    #: 0.5.8: model_config.py:1220 ``is_hybrid_swa_model``; the cell counts every layer at full
    #: size and, for MiMo-V2-Flash, its sliding layers again (model_runner_kv_cache_mixin.py:99,
    #: fixed by sgl-project/sglang#18039); the split is :206 ``set_num_tokens_hybrid_swa``.
    replace(
        _TP_ATTN,
        release="0.5.8",
        v_head_dim_in_cell=True,
        swa_disabled_for=_SWA_OFF_058,
        swa_pool_unmirrored_for=MIMO_V2,
        hybrid_swa_archs=("Llama4ForConditionalGeneration", "GptOssForCausalLM", *MIMO_V2),
        swa_split="layers",
        #: The 0.5.7 state pool, the speculative reserve moved before the radix-cache branch
        #: (model_runner_kv_cache_mixin.py:151); the overlap's extra slots only with
        #: extra_buffer (:270), so requests are capped at slots // 3 again; Nemotron-H with
        #: speculative decoding turns the radix cache off (server_args.py:1438).
        hybrid_rule="ratio",
        hybrid_models=_HYBRID_054,
        speculative_states_reserved=True,
        mamba2_radix_cache=True,
        speculative_mamba2_radix_off=True,
    ),
    #: 0.5.9: model_config.py:1320 adds Step-3.5; the cell sums full and sliding layers
    #: (mixin :82), the split by bytes (:251).
    replace(
        _TP_ATTN,
        release="0.5.9",
        v_head_dim_in_cell=True,
        swa_disabled_for=_SWA_OFF_058,
        swa_pool_unmirrored_for=(*MIMO_V2, *STEP3P5),
        hybrid_swa_archs=(
            "Llama4ForConditionalGeneration",
            "GptOssForCausalLM",
            *MIMO_V2,
            *STEP3P5,
        ),
        swa_split="bytes",
        #: 0.5.8's state pool (mixin :151 – :209): the speculative reserve first, a given
        #: --max-running-requests sizes the slots only with the radix cache off (:179);
        #: speculative decoding turns it off for every hybrid model (server_args.py:1760).
        hybrid_rule="ratio",
        hybrid_models=_HYBRID_054,
        speculative_states_reserved=True,
        mamba2_radix_cache=True,
        speculative_radix_off=True,
        qwen3_5_served=True,
    ),
    #: 0.5.10: the same cell and budget (model_runner_kv_cache_mixin.py:171), the request pool
    #: from the capacity (:840); its default fraction reserves piecewise CUDA graphs.
    *(
        replace(
            _TP_ATTN,
            release=name,
            fraction_rule="reserve-pcg",
            moe_runner_disables_prefill_graphs=moe_off,
            prefill_graphs_clamped_to_context=not moe_off,
            v_head_dim_in_cell=True,
            requests_from_capacity=True,
            swa_disabled_for=_SWA_OFF_058,
            swa_pool_unmirrored_for=UNMIRRORED[name],
            hybrid_swa_archs=(*LLAMA4_GPT_OSS, *UNMIRRORED[name]),
            #: 0.5.10 mixin :287 ``_resolve_hybrid_swa_tokens``; 0.5.11 on
            #: HybridSWAPoolConfigurator (pool_configurator.py:184, 0.5.12 / 0.5.13 the same).
            swa_split="capacity" if name == "0.5.10" else "budget",
            gpt_oss_sm100_swa_off=False,
            dsa_mirrored=dsa,
            dsa_fp8_trtllm_on_blackwell=dsa,
            swa_config_opt_in=name == "0.5.13",
            dsa_piecewise_graphs_off=name != "0.5.13",
            #: 0.5.9's state pool (mixin :179 – :238 in 0.5.10, the same solve in 0.5.11 –
            #: 0.5.13 without speculative decoding), capped at slots // 3 (:854); speculative
            #: decoding under the radix cache stops the start (server_args.py:2207 in 0.5.10).
            hybrid_rule="ratio",
            hybrid_models=_HYBRID_054,
            speculative_states_reserved=True,
            mamba2_radix_cache=True,
            speculative_radix_error=True,
            mamba_radix_page_one=name != "0.5.10",
            mamba_slots_error=name == "0.5.13",
            qwen3_5_served=True,
        )
        #: 0.5.11 – 0.5.13 move the sizing into DefaultPoolConfigurator
        #: (model_executor/pool_configurator.py: ``available_bytes // cell_size``, floored to
        #: the page, capped and floored again) with the same budget and request pool.
        for name, moe_off, dsa in _PCG_ROWS
    ),
)
#: 0.5.14 on: the same cell, budget and page floor, but a --max-running-requests is capped at
#: capacity // 2 (not at the request pool's estimate) and a budget the weights leave
#: non-positive stops with its own error (model_executor/model_runner_kv_cache_mixin.py; from
#: 0.5.16 mem_cache/kv_cache_configurator.py KVCacheConfigurator, the same formulas, its
#: post-capture resize off by default: SGLANG_ENABLE_POST_CAPTURE_KV_SIZING False). Their
#: default fraction (cuda_graph_config from 0.5.14; arg_groups/memory_hook.py from 0.5.19) is
#: mirrored (_GRAPH_RULES below).
_CONFIGURATOR = replace(
    RELEASES[-1],
    fraction_rule="unread",
    user_requests_capped_by_capacity=True,
    weights_overflow_error=True,
    sliding_mirrored=False,
    swa_disabled_for=_PROFILED.swa_disabled_for,
    swa_pool_unmirrored_for=(),
    hybrid_swa_archs=(),
    swa_split="none",
    gpt_oss_sm100_swa_off=True,
    #: The state pool: set for 0.5.14 on below (_STATE_POOL_FROM).
    hybrid_rule="unread",
    hybrid_models=(),
    hybrid_unmirrored=(),
    speculative_states_reserved=False,
    speculative_radix_error=False,
)


#: server_args.py ``_handle_gpu_memory_settings``: 0.5.14 :3122 (prefill phase of
#: cuda_graph_config, compatibility rules :2997 – :3057 for tc_piecewise, the default backend of
#: model_executor/cuda_graph_config.py:91); 0.5.15 :3469 (prefill backend "breakable" on CUDA,
#: cuda_graph_config.py:101; its rules in ``_disable_breakable_cudagraph_if_incompatible``). The
#: 0.5.15 additions for disaggregation and DeepEP (+2 GiB) are off in a plain launch
#: (disaggregation_mode "null", moe_a2a_backend "none"). 0.5.16 :3900 (graph reserve in
#: ``reserve_for_graph_mb`` :4164, the same sum; the ``post_capture_kv_sizing_planned`` branch
#: :4055 is off by default, environ.py:337 SGLANG_ENABLE_POST_CAPTURE_KV_SIZING False): the
#: breakable rules (:3763) keep the graphs for configs/model_config.py:1785's multimodal
#: architectures. 0.5.17 (server_args.py:4607) no longer clamps them to --context-length (the
#: clamp moved to capture time, after the fraction) and keeps them for an MLA model with
#: DeepSeek sparse attention (dsa_breakable_graphs_kept), off for Nemotron-H (a hybrid,
#: refused): the same rule for the models mirrored. 0.5.18 (server_args.py:4802, breakable
#: rules :4666) no longer turns the breakable graphs off for an MLA backend, so its reserve
#: keeps 1.5 GiB (reserve_for_graph_mb :5108); 0.5.19 moves the same sums to
#: arg_groups/memory_hook.py (handle_gpu_memory_settings, reserve_for_graph_mb :292) and the
#: breakable rules to arg_groups/cuda_graph_hook.py:262. 0.5.20 (memory_hook.py:100) raises the
#: < 35 GiB tier to chunk 4096, max_bs 48 / 160 (_SMALL_TIER_FROM); 0.5.22 (:183) caps a
#: default decode max_bs at --max-running-requests (_RUNNING_CAP_FROM); 0.5.23's MLA prefill
#: max_bs (:238) does not change the 1.5 GiB MLA reserve. The post-capture branch stays off
#: (environ.py SGLANG_ENABLE_POST_CAPTURE_KV_SIZING False in each).
_GRAPH_RULES: dict[int, FractionRule] = {
    14: "prefill-config",
    15: "prefill-breakable",
    16: "breakable-allowlist",
    17: "breakable-allowlist",
    **dict.fromkeys(range(18, 24), "breakable-mla"),
}
_SMALL_TIER_FROM = 20
_RUNNING_CAP_FROM = 22
#: 0.5.17 on: the NSA budget cell takes the allocated row; the breakable graphs are kept.
_DSA_ROW_BUDGET_FROM = 17
#: The releases whose fraction clamps the prefill graphs to --context-length (0.5.14 – 0.5.16).
_CLAMPED_TO_CONTEXT = (14, 15, 16)
_SWA_FLOOR_FROM = 16  # 0.5.16 on: the SWA pool's admission floor (swa_admission_floor)
RELEASES = (
    *RELEASES,
    *(
        with_swa(
            replace(
                _CONFIGURATOR,
                release=f"0.5.{n}",
                fraction_rule=_GRAPH_RULES[n],
                prefill_graphs_clamped_to_context=n in _CLAMPED_TO_CONTEXT,
                dsa_mirrored=True,
                dsa_budget_row_allocated=n >= _DSA_ROW_BUDGET_FROM,
                dsa_breakable_graphs_kept=n >= _DSA_ROW_BUDGET_FROM,
            ),
            _SWA_OFF_058,
            UNMIRRORED,
            n >= _SWA_FLOOR_FROM,
        )
        for n in range(14, 18)
    ),
    #: 0.5.18 on: a multimodal model's budget also loses mm_runtime_reservation_gb.
    *(
        with_swa(
            replace(
                _CONFIGURATOR,
                release=f"0.5.{n}",
                fraction_rule=_GRAPH_RULES[n],
                prefill_graphs_clamped_to_context=False,
                multimodal_kv_reserve=True,
                multimodal_by_arch=True,
                small_gpu_chunk=4096 if n >= _SMALL_TIER_FROM else 2048,
                small_gpu_graph_bs=48 if n >= _SMALL_TIER_FROM else 24,
                small_gpu_graph_bs_tp4=160 if n >= _SMALL_TIER_FROM else 80,
                graph_bs_capped_by_running=n >= _RUNNING_CAP_FROM,
                dsa_mirrored=True,
                dsa_budget_row_allocated=True,
                dsa_breakable_graphs_kept=True,
            ),
            _SWA_OFF_058,
            UNMIRRORED,
            True,
        )
        for n in range(18, 24)
    ),
)
#: kv_cache_quant_algo in the quantization config picks an fp8 KV cache from 0.5.3 on (0.5.4
#: model_executor/model_runner.py:1612, 0.5.9 :1672, 0.5.13 :2247, 0.5.14 :2340, 0.5.15 :2449,
#: 0.5.16 / 0.5.17 mem_cache/kv_cache_dtype.py:34, 0.5.18 :39, 0.5.23 :51): not mirrored, refused.
_QUANT_FROM = [r.release for r in RELEASES].index("0.5.3")
#: 0.5.13 on: the KV line names the dtype (memory_pool.py:819 in 0.5.13, :1023 in 0.5.14,
#: :1616 in 0.5.16, :1670 in 0.5.17, :2089 in 0.5.23); 0.5.4 – 0.5.12 print "KV Cache is
#: allocated. #tokens: …" (memory_pool.py:453 in 0.5.4, :744 in 0.5.12).
_DTYPE_LINE_FROM = [r.release for r in RELEASES].index("0.5.13")
_SSM_FROM = [r.release for r in RELEASES].index("0.5.9")  # see ssm_dtype_from_config
#: 0.5.14 on: handle_max_mamba_cache (model_runner_kv_cache_mixin.py:122 in 0.5.14, :141 in
#: 0.5.15; KVCacheConfigurator._handle_max_mamba_cache :1703 in 0.5.16) solves the slots as 0.5.9
#: does without speculative decoding; "auto" resolves to extra_buffer for the three models
#: (server_args.py:4380 _handle_mamba_radix_cache in 0.5.14, overrides.py:1038 in 0.5.15, :1190
#: in 0.5.16: overlap on, linear_attn_backend triton), requests capped at slots // (3 + 2)
#: (_calculate_mamba_ratio :274 / :293 / :1572); EAGLE / NEXTN solve the slots jointly (:178 in
#: 0.5.14, :1756 in 0.5.16; row fields speculative_joint_solve, mamba_pad_slot_budgeted).
_STATE_POOL_FROM = [r.release for r in RELEASES].index("0.5.14")
_G4_FROM = [r.release for r in RELEASES].index("0.5.22")  # see gemma4_per_layer_shapes
_PAD_SLOT_FROM = [r.release for r in RELEASES].index("0.5.17")  # see mamba_pad_slot_budgeted
_NEXTN_CELL_FROM = [r.release for r in RELEASES].index("0.5.20")  # target_nextn_layers_in_cell
RELEASES = tuple(
    replace(
        r,
        kv_quant_algo_refused=i >= _QUANT_FROM,
        kv_line_names_dtype=i >= _DTYPE_LINE_FROM,
        ssm_dtype_from_config=i >= _SSM_FROM,
    )
    if i < _STATE_POOL_FROM
    else replace(
        r,
        kv_quant_algo_refused=True,
        kv_line_names_dtype=True,
        ssm_dtype_from_config=True,
        hybrid_rule="ratio",
        hybrid_models=_HYBRID_054,
        mamba2_radix_cache=True,
        mamba_slots_per_request=5,
        qwen3_5_served=True,
        #: extra_buffer keeps a given page size (only no_buffer sets 1); no slot left still
        #: stops the start (kv_cache_configurator.py:1798 in 0.5.16, :3394 in 0.5.23).
        mamba_radix_page_one=False,
        mamba_slots_error=True,
        speculative_joint_solve=True,
        conv_window_dedup=True,
        mamba_extra_buffer=True,
        mamba_pad_slot_budgeted=i >= _PAD_SLOT_FROM,
        target_nextn_layers_in_cell=i >= _NEXTN_CELL_FROM,
    )
    for i, r in enumerate(RELEASES)
)
RELEASES = tuple(replace(r, **sl.gemma4_fields(r, i >= _G4_FROM)) for i, r in enumerate(RELEASES))
RELEASES = tuple(replace(r, **mm_fields(r.release)) for r in RELEASES)
#: The newest release mirrored on both budget paths: its fraction_rule is not "unread".
DEFAULT_RELEASE = next(r.release for r in reversed(RELEASES) if r.fraction_rule != "unread")
_BY_NAME = {r.release: r for r in RELEASES}


def sglang_rules(release: str | None) -> SglangRules:
    """The rules of ``release`` (None: the newest mirrored); refuses a release not read."""
    if release is None:
        return _BY_NAME[DEFAULT_RELEASE]
    name = release.strip().lstrip("v")
    found = _BY_NAME.get(ALIASES.get(name, name))
    if found is None:
        read = ", ".join(r.release for r in RELEASES)
        raise InputError(
            f"--sglang-version {release}: SGLang {release} is not mirrored (its source was not "
            "read, and releases differ in how they size the pool)",
            hint=f"use one of the releases read: {read}",
        )
    return found


def newest_release(test: Callable[[SglangRules], bool]) -> str:
    """The newest release read whose rules pass ``test`` (for hints, formatted from rows)."""
    return next(r.release for r in reversed(RELEASES) if test(r))
