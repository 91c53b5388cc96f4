"""A request's recurrent states as the engine sizes them: how many states one request holds
(prefix caching's "align" mode; attention-free models; the releases whose per-block "all"
mode is refused), and vLLM's ``num_speculative_tokens`` resolved as its speculative config
resolves it, refused where the growth of the states is not mirrored
(:attr:`~mmcli.kv.releases.EngineRules.speculative_states`). The growth itself is applied
where the specs are built: the wider conv state in :mod:`mmcli.kv.engine.ranks`, the extra
blocks per request in the plan's state pages."""

from __future__ import annotations

from dataclasses import replace

from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import PlanOptions
from mmcli.kv.releases import EngineRules, describe, first_release
from mmcli.kv.spec import KVCacheSpec
from mmcli.kv.state import MambaSpec

#: Model types whose state layers keep a state per block under prefix caching in vLLM 0.15–0.28
#: ("all" mode; models with ``SupportsMambaPrefixCaching``).
MAMBA_PREFIX_CACHING_MODELS = frozenset(
    {"bamba", "falcon_h1", "granitemoehybrid", "jamba", "mamba", "mamba2", "nemotron_h", "zamba2"}
)


#: Model types of the gated-delta-net hybrids (Qwen3-Next from vLLM 0.10.2, Qwen3.5 / 3.6
#: dense and MoE from 0.17), whose speculative growth is mirrored in every release.
GDN_TYPES = ("qwen3_next", "qwen3_5")


def speculative_tokens(
    config: ModelConfig, specs: list[KVCacheSpec | MambaSpec | None], options: PlanOptions
) -> tuple[PlanOptions, Finding | None]:
    """The options with ``num_speculative_tokens`` resolved (vLLM's default for MTP: the MTP
    layer count), and a note on what it does to a model's recurrent states; ``specs`` are
    the config's distinct layer specs."""
    tokens = options.num_speculative_tokens
    predict = config.mtp_n_predict
    if options.mtp and tokens is None:
        if predict is None:
            raise InputError(
                f"--mtp: {config.name}'s config names no MTP layer count, so vLLM needs "
                "num_speculative_tokens ('num_speculative_tokens was not provided')",
                hint="pass --num-speculative-tokens",
            )
        tokens = predict
    if options.mtp and tokens and predict and tokens > predict and tokens % predict:
        raise InputError(
            f"--num-speculative-tokens {tokens} is not a multiple of the {predict} MTP layers: "
            "vLLM refuses it (the MTP modules are reused in turn)",
            hint=f"use at most {predict}, or a multiple of it",
        )
    tokens = tokens or 0
    options = replace(options, num_speculative_tokens=tokens)
    if not any(isinstance(spec, MambaSpec) for spec in specs):
        return options, None  # attention caches do not grow with speculative tokens
    if not tokens:
        if options.num_draft_layers:
            raise InputError(
                f"{config.name} keeps recurrent states, which grow with the drafter's "
                "speculative tokens, and --num-draft-layers gives no count of them",
                hint="pass --num-speculative-tokens (vLLM's num_speculative_tokens)",
            )
        return options, None
    _refuse_unmirrored_growth(config, tokens, options)
    rules = options.rules
    counted = (
        f"each state group keeps {tokens} more state blocks per request (num_speculative_blocks)"
        if rules.speculative_state_blocks
        else f"each request is allocated {tokens} more state blocks (num_speculative_blocks), "
        f"which {describe(rules)} leave out of the start-up check and the concurrency "
        f"(a state counts one page there until {first_release('speculative_state_blocks')})"
    )
    note = Finding(
        "speculative-states",
        "info",
        f"{tokens} speculative tokens: {counted}, and a GDN / Mamba-2 conv state of "
        f"{config.model_type or 'this model'} is {tokens} columns wider where its vLLM model "
        "passes num_spec",
    )
    return options, note


def is_gdn_model(config: ModelConfig) -> bool:
    """Qwen3-Next and Qwen3.5 / 3.6 (dense and MoE): the gated-delta-net hybrids."""
    return config.model_type.startswith(GDN_TYPES)


def _refuse_unmirrored_growth(config: ModelConfig, tokens: int, options: PlanOptions) -> None:
    """Speculative decoding on a state model that the release refuses, or whose growth is not
    mirrored for it (:attr:`~mmcli.kv.releases.EngineRules.speculative_states`)."""
    rules = options.rules
    served = rules.speculative_states
    if served == "all" or (served == "gdn" and is_gdn_model(config)):
        return
    if served == "qwen3_next" and config.model_type == "qwen3_next":
        return
    kind = config.model_type or config.name
    if served == "qwen3_next":
        raise InputError(
            f"speculative decoding ({tokens} speculative tokens) on {kind}, a model with "
            f"recurrent states: {describe(rules)} refuse it for every such model but "
            "Qwen3-Next ('Mamba with speculative decoding is not supported yet.'); the engine "
            f"would not start",
            hint=f"plan with --vllm-version {first_release('speculative_states', 'gdn')} or "
            "newer, or without speculative tokens",
        )
    raise InputError(
        f"speculative decoding ({tokens} speculative tokens) on {kind}, a model with "
        f"recurrent states, under {describe(rules)}: how its states grow is mirrored for "
        "Qwen3-Next and Qwen3.5 from their first release, for other models from "
        f"vLLM {first_release('speculative_states', 'all')} only",
        hint=f"plan with --vllm-version {first_release('speculative_states', 'all')} or "
        "newer, or without speculative tokens",
    )


def state_pages(
    config: ModelConfig, specs: list[KVCacheSpec | MambaSpec | None], options: PlanOptions
) -> tuple[int, Finding | None]:
    """States one request holds in each state group: 1, or 2 under prefix caching ("align");
    a Mamba-2 state adds its prefill checkpoint, and speculative decoding its blocks (the
    plan's ``_Run.pages``). The note says when the release turns prefix caching off."""
    rules = options.rules
    if not any(isinstance(spec, MambaSpec) for spec in specs):
        return 1, None
    caching = options.enable_prefix_caching
    if not rules.state_models_v1_default:
        return 1, _v1_by_request(config, caching, rules)
    if not any(isinstance(spec, KVCacheSpec) for spec in specs):
        # An attention-free model (Mamba, Mamba2): the engine turns prefix caching off by
        # default ("still experimental", ModelConfig.is_prefix_caching_supported, 0.26-0.32).
        if caching:
            raise InputError(
                f"{config.name} is attention-free (every layer a state): prefix caching on "
                "such a model is experimental in the engine and not modelled by mmcli",
                hint="plan without --enable-prefix-caching (the engine's default for it)",
            )
        return 1, None
    if caching is None:
        caching = rules.hybrid_prefix_caching_default
    if not caching:
        return 1, None
    supports = config.model_type in MAMBA_PREFIX_CACHING_MODELS
    mode = rules.state_prefix_caching
    if mode == "refused":
        raise InputError(
            f"--enable-prefix-caching on {config.name}, a model with recurrent states: "
            f"{describe(rules)} refuse to start ('Prefix caching is not supported for Mamba "
            "yet.')",
            hint="plan with --no-enable-prefix-caching, or with --vllm-version "
            f"{first_release('state_prefix_caching', 'off')} or newer",
        )
    if mode == "off" or (mode == "supported" and not supports):
        return 1, Finding(
            "prefix-caching-off",
            "info",
            f"{describe(rules)} turn prefix caching off for {config.model_type or config.name}"
            " (a model with recurrent states"
            + ("" if mode == "off" else " whose vLLM model does not support Mamba prefix caching")
            + "): one state per request",
        )
    if rules.mamba_all_mode and supports:
        raise InputError(
            f"with prefix caching on, {describe(rules)} keep a {config.model_type} state per "
            "block ('all' mode; from "
            f"{first_release('all_mode_speculative_blocks')} plus the speculative blocks), "
            "which mmcli does not model",
            hint="plan with --no-enable-prefix-caching, or with --vllm-version "
            f"{first_release('mamba_all_mode', False)} or newer (one 'align' state pair per "
            "request)",
        )
    return 2, None


def _v1_by_request(config: ModelConfig, caching: bool | None, rules: EngineRules) -> Finding:
    """Before V1 served models with recurrent states by default: planned only as V1 runs them
    (VLLM_USE_V1=1, prefix caching off), with a note saying the plan assumes it."""
    v1 = first_release("state_models_v1_default")
    if caching is not False:
        raise InputError(
            f"{config.name} has recurrent states: {describe(rules)} run it on the V0 engine "
            "(not modelled) unless VLLM_USE_V1=1 is set, and V1 then turns prefix caching on, "
            "which its runner refuses for such models ('Prefix caching is not supported for "
            "Mamba yet.')",
            hint="with VLLM_USE_V1=1, plan with --no-enable-prefix-caching; or plan with "
            f"--vllm-version {v1} or newer",
        )
    return Finding(
        "state-model-v1",
        "info",
        f"{describe(rules)} run a model with recurrent states on the V1 engine only with "
        f"VLLM_USE_V1=1 (otherwise on V0, not modelled; V1 by default from {v1}): the plan "
        "assumes it",
    )
