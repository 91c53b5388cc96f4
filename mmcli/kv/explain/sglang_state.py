"""Which SGLang run a hybrid GDN / Mamba-2 model's start-up log is of.

The release is told by the wording of its ``Mamba Cache is allocated`` line; a model that
release does not serve, speculative decoding, and ``server_args`` settings that size the state
pool in a way not mirrored are refused, naming them. The pool budget is not logged: it is found
as the one whose plan gives the log's ``#tokens`` (:func:`budgets`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.explain.engine_logs import SglangLog
from mmcli.kv.figures import EngineFigures
from mmcli.kv.model import ModelConfig, architecture
from mmcli.kv.sglang import SglangOptions, plan_sglang, sglang_rules
from mmcli.kv.sglang.geometry import Cell
from mmcli.kv.sglang.hybrid import MAMBA_FULL_MEMORY_RATIO, HybridState
from mmcli.kv.sglang.log_releases import release_span
from mmcli.kv.sglang.releases import RELEASES, SglangRules
from mmcli.kv.sglang.state_wording import state_line_release
from mmcli.kv.sglang.swa_lists import QWEN3_5


def hybrid_rules(doc: dict[str, Any], log: SglangLog) -> SglangRules:
    """The release whose wording the log has, refusing a model that release does not serve."""
    release = log.mamba_wording or state_line_release(names_slots=True)
    rules = sglang_rules(release)
    arch = architecture(doc)
    served = dict(rules.hybrid_models)
    if arch in served:
        return rules
    elsewhere = [
        r.release
        for r in RELEASES
        if arch and (arch in dict(r.hybrid_models) or (r.qwen3_5_served and arch in QWEN3_5))
    ]
    if elsewhere:
        hint = (
            f"SGLang {release_span(elsewhere)} serves {arch}; check that the log and the config "
            "are of the same model and release"
        )
    else:
        hint = "explain a vLLM start-up log of this model instead (mmcli mirrors vLLM's state pool)"
    raise InputError(
        f"SGLang: {arch or 'this architecture'} (a hybrid Mamba / GDN / linear-attention model) "
        f"has no hybrid state pool in SGLang {release} (hybrid models it serves: "
        f"{', '.join(served) or 'none'}), so this log is not mirrored",
        hint=hint,
    )


def refuse_unmirrored(log: SglangLog, state: HybridState) -> None:
    """Refuse a run whose state pool the log's server_args sizes in a way not mirrored."""
    args = log.args

    def refuse(what: str, flag: str) -> InputError:
        return InputError(
            f"SGLang: {what} (the log's server_args) is not mirrored for the state pool",
            hint=f"explain a log of a run without {flag}",
        )

    if "speculative_algorithm" in args or log.mamba_intermediate:
        raise InputError(
            "SGLang: speculative decoding is not mirrored (the state pool keeps intermediate "
            "states per draft token and the draft runner shares the pool)",
            hint="explain a log of a run without speculative decoding",
        )
    if "max_mamba_cache_size" in args:
        raise refuse(f"--max-mamba-cache-size {args['max_mamba_cache_size']}", "it")
    ssm = args.get("mamba_ssm_dtype", "float32")
    if ssm != "float32":
        raise refuse(f"--mamba-ssm-dtype {ssm}", "it (the default float32 is mirrored)")
    if state.radix_cache:  # the release sizes the slots by the ratio only with the radix cache
        if args.get("disable_radix_cache") == "True":
            raise refuse("--disable-radix-cache", "it")
        ratio = args.get("mamba_full_memory_ratio")
        if ratio is not None and float(ratio) != MAMBA_FULL_MEMORY_RATIO:
            raise refuse(
                f"--mamba-full-memory-ratio {ratio}",
                f"it (the default {MAMBA_FULL_MEMORY_RATIO} is mirrored)",
            )


def budgets(
    config: ModelConfig,
    doc: dict[str, Any],
    base: SglangOptions,
    state: HybridState,
    cell: Cell,
    tokens: int,
) -> dict[int, tuple[int, EngineFigures]]:
    """State slots → (a pool budget, its plan), for every slot count whose plan gives ``tokens``.

    The token pool gets the budget less the slots' state, so the budget lies within one page of
    cells above ``slots × per request + tokens × cell``. With fixed slots that settles it; with
    the ratio (radix cache on) the slots are about ``r × tokens × cell / per request``, and a
    budget is tried at both ends and the middle of that window for each count near it.
    """
    per, width = state.bytes_per_request, base.page_size * cell.bytes_per_token
    if state.radix_cache:
        guess = int(MAMBA_FULL_MEMORY_RATIO * tokens * cell.bytes_per_token / per)
        candidates: list[int] = list(range(max(0, guess - 2), guess + 3))
    else:
        candidates = [base.max_running_requests or 512]
    found: dict[int, tuple[int, EngineFigures]] = {}
    for slots in candidates:
        low = slots * per + tokens * cell.bytes_per_token
        for budget in (low, low + width // 2, low + width - 1):
            plan = plan_sglang(config, doc, replace(base, memory_bytes=budget))
            if plan.value("pool_tokens") == tokens:
                found.setdefault(int(plan.value("state_slots") or 0), (budget, plan))
    if not found:  # no budget gives the log's #tokens: plan the nearest, and say so
        low = candidates[len(candidates) // 2] * per + tokens * cell.bytes_per_token
        plan = plan_sglang(config, doc, replace(base, memory_bytes=low + width // 2))
        return {-1: (low + width // 2, plan)}
    return found
