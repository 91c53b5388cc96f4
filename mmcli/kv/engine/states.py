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
from mmcli.kv.releases import describe
from mmcli.kv.spec import KVCacheSpec
from mmcli.kv.state import MambaSpec

#: Model types whose state layers keep a state per block under prefix caching in vLLM 0.15–0.28
#: ("all" mode; models with ``SupportsMambaPrefixCaching``).
MAMBA_PREFIX_CACHING_MODELS = frozenset(
    {"bamba", "falcon_h1", "granitemoehybrid", "jamba", "mamba", "mamba2", "nemotron_h", "zamba2"}
)


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
    if not options.rules.speculative_states:
        raise InputError(
            f"speculative decoding ({tokens} speculative tokens) on a model with recurrent "
            f"states under {describe(options.rules)}: how its states grow is mirrored from "
            "vLLM 0.32 only",
            hint="plan with --vllm-version 0.32 or newer, or without speculative tokens",
        )
    note = Finding(
        "speculative-states",
        "info",
        f"{tokens} speculative tokens: each state group keeps {tokens} more state blocks per "
        "request (num_speculative_blocks), and a GDN / Mamba-2 conv state of "
        f"{config.model_type or 'this model'} is {tokens} columns wider where its vLLM model "
        "passes num_spec",
    )
    return options, note


def state_pages(
    config: ModelConfig, specs: list[KVCacheSpec | MambaSpec | None], options: PlanOptions
) -> int:
    """States one request holds in each state group: 1, or 2 under prefix caching ("align");
    a Mamba-2 state adds its prefill checkpoint, and speculative decoding its blocks (the
    plan's ``_Run.pages``)."""
    rules = options.rules
    if not any(isinstance(spec, MambaSpec) for spec in specs):
        return 1
    caching = options.enable_prefix_caching
    if not any(isinstance(spec, KVCacheSpec) for spec in specs):
        # An attention-free model (Mamba, Mamba2): the engine turns prefix caching off by
        # default ("still experimental", ModelConfig.is_prefix_caching_supported, 0.26-0.32).
        if caching:
            raise InputError(
                f"{config.name} is attention-free (every layer a state): prefix caching on "
                "such a model is experimental in the engine and not modelled by mmcli",
                hint="plan without --enable-prefix-caching (the engine's default for it)",
            )
        return 1
    if caching is None:
        caching = rules.hybrid_prefix_caching_default
    if not caching:
        return 1
    if rules.mamba_all_mode and config.model_type in MAMBA_PREFIX_CACHING_MODELS:
        raise InputError(
            f"with prefix caching on, {describe(rules)} keep a {config.model_type} state per "
            "block ('all' mode), which mmcli does not model",
            hint="plan with --no-enable-prefix-caching, or with --vllm-version 0.29 or newer "
            "(one 'align' state pair per request)",
        )
    return 2
