"""``kv-share explain``: plan the run a vLLM log describes and explain every difference.

The log gives the KV memory one rank had after profiling ("Available KV cache memory", printed
to 0.01 GiB), the release, and the engine arguments it shows. The run is planned at both ends of
that rounding (± 0.005 GiB) with the release's rules, and each figure the log printed is
compared with the planned range. When a figure falls outside, the explanations tried are: the
rules of another release, per-rank memory (the engine sizes every rank by the smallest), and the
options the log did not show, which the plan had to assume.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from mmcli.errors import InputError
from mmcli.kv.explain.compare import ROUNDING_GIB, Comparison, PlannedRange, agrees, compare
from mmcli.kv.explain.vllm_log import VllmLog
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import PlanOptions
from mmcli.kv.releases import (
    CHANGES,
    CLI_FIELDS,
    DSA_FIELDS,
    ENCODER_FIELDS,
    NEWEST,
    PIPELINE_FIELDS,
    describe,
    rules_for,
)
from mmcli.kv.result import KVPlan, SidePlan

GIB: Final = 2**30


class MemorySection(Protocol):
    """The profiler's figures beside an estimate (built by :mod:`mmcli.kv.memory_profile`,
    which may read the what-if estimate that this module must not)."""

    def to_json(self) -> dict[str, Any]: ...


_FIELDS: Final = {f.name for f in dataclasses.fields(PlanOptions)}


@dataclass
class Explanation:
    """The plan of a logged run, side by side with the log, and why they differ."""

    model: str
    log: VllmLog
    rules: str
    #: Where the release came from: "log", "option" or "default".
    release_source: str
    memory_gib: float
    options: PlanOptions
    #: Options the log did not show, with the value the plan assumed.
    assumed: dict[str, str]
    comparisons: list[Comparison]
    notes: list[str] = field(default_factory=list)
    #: Mirrored releases whose rules reproduce every figure logged.
    matching_releases: list[str] = field(default_factory=list)
    #: The profiler's figures beside mmcli's estimate (None: the log prints none).
    memory: MemorySection | None = None

    @property
    def matches(self) -> bool:
        return all(c.status != "differs" for c in self.comparisons)

    def to_json(self, *, exit_code: int) -> dict[str, Any]:
        return {
            "model": self.model,
            "log": self.log.to_json(),
            "vllm_rules": self.rules,
            "release_source": self.release_source,
            "planned_memory_gib": self.memory_gib,
            "assumed": dict(self.assumed),
            "comparisons": [dataclasses.asdict(c) for c in self.comparisons],
            "matches": self.matches,
            "matching_releases": list(self.matching_releases),
            "notes": list(self.notes),
            "memory_profile": None
            if self.memory is None
            else {"log": self.log.profile.to_json(), **self.memory.to_json()},
            "exit_code": exit_code,
        }


def _engine_side(plan: KVPlan) -> SidePlan:
    side = plan.with_sharing if plan.engine_side == "with_sharing" else plan.without_sharing
    if side is None or side.num_blocks is None:
        raise InputError(
            f"{plan.model}: the plan has no pool figures to compare (the sharing map has errors?)",
            hint="run kv-share plan on the config to see its findings",
        )
    return side


def _options(
    config: ModelConfig, log: VllmLog, release: str | None, memory_gib: float
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """PlanOptions keyword arguments from the log, the options assumed, and notes."""
    kwargs: dict[str, Any] = {"vllm_version": release, "memory_bytes": round(memory_gib * GIB)}
    assumed: dict[str, str] = {}
    notes: list[str] = []
    length = log.max_model_len
    if length is None:
        length = config.max_model_len
        assumed["max_model_len"] = f"{length} (the config's)"
    kwargs["max_model_len"] = length
    for key, option in (
        ("tensor_parallel_size", "tensor_parallel_size"),
        ("block_size", "block_size"),
        ("max_num_batched_tokens", "max_num_batched_tokens"),
        ("num_gpu_blocks_override", "num_gpu_blocks_override"),
    ):
        value = log.int_arg(key)
        if value is not None:
            kwargs[option] = value
    kv_dtype = log.str_arg("kv_cache_dtype")
    if kv_dtype is not None:
        kwargs["kv_dtype"] = kv_dtype
    caching = log.args.get("enable_prefix_caching")
    if isinstance(caching, bool):
        kwargs["enable_prefix_caching"] = caching
    scheduling = log.async_scheduling
    if scheduling is None and isinstance(log.args.get("async_scheduling"), bool):
        scheduling = bool(log.args["async_scheduling"])
    if scheduling is not None:
        kwargs["async_scheduling"] = scheduling
    pp = log.int_arg("pipeline_parallel_size")
    if pp is not None and pp > 1:
        kwargs["pipeline_parallel_size"] = pp
        notes.append(
            f"the run used pipeline_parallel_size {pp}: the log shows the first stage's "
            "available memory, and the plan gives every stage that much (a stage with less "
            "would lower the block count)"
        )
    defaults = PlanOptions()
    for name, label in (
        ("tensor_parallel_size", "tensor_parallel_size"),
        ("kv_dtype", "kv_cache_dtype"),
        ("block_size", "block_size"),
        ("max_num_batched_tokens", "max_num_batched_tokens"),
        ("enable_prefix_caching", "enable_prefix_caching"),
        ("async_scheduling", "async_scheduling"),
    ):
        if name not in kwargs:
            shown = getattr(defaults, name)
            if shown is None:
                shown = "16 (the default)" if name == "block_size" else "the release's default"
            assumed[label] = str(shown)
    return {k: v for k, v in kwargs.items() if k in _FIELDS}, assumed, notes


def _plan_range(config: ModelConfig, kwargs: dict[str, Any], gib: float) -> PlannedRange:
    from mmcli.kv.plan import plan_kv_cache

    sides = []
    for end in (gib - ROUNDING_GIB, gib + ROUNDING_GIB):
        options = PlanOptions(**{**kwargs, "memory_bytes": max(1, round(end * GIB))})
        sides.append(_engine_side(plan_kv_cache(config, options)))
    return PlannedRange(sides[0], sides[1])


def explain_log(
    config: ModelConfig,
    log: VllmLog,
    *,
    vllm_version: str | None = None,
) -> Explanation:
    """Plan the run ``log`` describes and compare; ``vllm_version`` overrides the log's release."""
    if vllm_version is not None:
        release, source = vllm_version, "option"
    elif log.release is not None:
        release, source = log.release, "log"
    else:
        release, source = None, "default"
    memory = log.min_available_gib
    if memory is None and log.refusal is not None:
        memory = log.refusal.available_gib
    if memory is None:
        raise InputError(
            "the log gives no 'Available KV cache memory', so there is nothing to plan from",
            hint="give the log from the start of the engine's start-up, or plan with "
            "kv-share plan --memory",
        )
    kwargs, assumed, notes = _options(config, log, release, memory)
    if kwargs.get("max_model_len") is None:
        raise InputError(
            "neither the log nor the config gives max_model_len",
            hint="set max_position_embeddings in the config",
        )
    figures = _plan_range(config, kwargs, memory)
    rules = rules_for(release)
    comparisons = compare(log, figures, memory)
    explanation = Explanation(
        model=config.name,
        log=log,
        rules=describe(rules),
        release_source=source,
        memory_gib=memory,
        options=PlanOptions(**kwargs),
        assumed=assumed,
        comparisons=comparisons,
        notes=notes,
    )
    explanation.matching_releases = _matching_releases(config, log, kwargs, memory)
    explanation.assumed, alternatives = _sensitivity(config, log, kwargs, memory, assumed)
    explanation.notes += _notes(explanation, figures, kwargs) + alternatives
    return explanation


#: Values an option the log did not show may well have had (vllm serve on a small or a large
#: GPU, the LLM class; async scheduling off; prefix caching on or off; an fp8 KV cache).
_ALTERNATIVES: Final[dict[str, tuple[str, tuple[Any, ...]]]] = {
    "max_num_batched_tokens": ("max_num_batched_tokens", (2048, 8192, 16384)),
    "async_scheduling": ("async_scheduling", (True, False)),
    "enable_prefix_caching": ("enable_prefix_caching", (True, False)),
    "kv_cache_dtype": ("kv_dtype", ("fp8",)),
    "block_size": ("block_size", (16, 32, 64)),
}


def _sensitivity(
    config: ModelConfig,
    log: VllmLog,
    kwargs: dict[str, Any],
    memory: float,
    assumed: dict[str, str],
) -> tuple[dict[str, str], list[str]]:
    """The assumed options that change the figures, and alternatives that match the log."""
    from mmcli.kv.plan import plan_kv_cache

    def figures(extra: dict[str, Any]) -> tuple[int | None, float | None]:
        side = _engine_side(plan_kv_cache(config, PlanOptions(**{**kwargs, **extra})))
        return side.max_tokens, side.max_concurrency

    base = figures({})
    base_agrees = agrees(log, _plan_range(config, kwargs, memory))
    kept: dict[str, str] = {}
    notes: list[str] = []
    for label, value in assumed.items():
        if label not in _ALTERNATIVES:
            kept[label] = value
            continue
        option, values = _ALTERNATIVES[label]
        if option not in _FIELDS:
            continue
        changed, matching = False, []
        for alt in values:
            try:
                if figures({option: alt}) == base:
                    continue
                changed = True
                if not base_agrees and agrees(
                    log, _plan_range(config, {**kwargs, option: alt}, memory)
                ):
                    matching.append(alt)
            except InputError:
                continue
        if changed:
            kept[label] = value
        if matching:
            shown = " or ".join(str(v) for v in matching)
            notes.append(f"option not in the log: with {label}={shown} the figures match")
    return kept, notes


def _matching_releases(
    config: ModelConfig, log: VllmLog, kwargs: dict[str, Any], memory: float
) -> list[str]:
    found = []
    # A row that differs from the one before only with pipeline stages, only for sparse
    # attention, or only in how the command line is read, gives this plan the same figures.
    same = set(CLI_FIELDS) | ENCODER_FIELDS
    if (kwargs.get("pipeline_parallel_size") or 1) == 1:
        same |= PIPELINE_FIELDS
    if config.sparse_attention is None:
        same |= DSA_FIELDS
    for release, change in CHANGES:
        if change and set(change) <= same:
            continue
        exact = release if release.count(".") == 2 else f"{release}.0"  # the row, not a patch
        try:
            figures = _plan_range(config, {**kwargs, "vllm_version": exact}, memory)
        except InputError:
            continue
        if agrees(log, figures):
            found.append(release)
    return found


def _notes(exp: Explanation, figures: PlannedRange, kwargs: dict[str, Any]) -> list[str]:
    log, notes = exp.log, []
    low, high = figures.tokens()
    notes.append(
        f"rounding: the log prints the KV memory to 0.01 GiB, so the plan covers "
        f"{exp.memory_gib:.2f} ± {ROUNDING_GIB} GiB; that alone moves the token count by "
        f"{high - low:,}"
    )
    if exp.release_source == "default":
        notes.append(
            f"release: the log does not name its vLLM release; planned with the newest rules "
            f"mirrored ({NEWEST}); pass --vllm-version to choose"
        )
    ranks = sorted({r.gib for r in log.available})
    tp = int(kwargs.get("tensor_parallel_size", 1))
    if len(ranks) > 1:
        notes.append(
            f"per-rank memory: the processes printed {ranks[0]:.2f} – {ranks[-1]:.2f} GiB; "
            "the engine gives every rank the block count of the smallest, so the plan uses "
            f"{ranks[0]:.2f} GiB"
        )
    elif tp > 1 and len(log.available) <= 1:
        notes.append(
            f"per-rank memory: the run has {tp} tensor-parallel ranks but the log shows one "
            "rank's memory; the engine uses the smallest rank's, which may be lower"
        )
    if not exp.matches:
        notes += _mismatch_notes(exp, figures)
    if exp.assumed:
        shown = ", ".join(f"{k}={v}" for k, v in exp.assumed.items())
        notes.append(f"options not in the log that change the figures, assumed: {shown}")
    return notes


def _mismatch_notes(exp: Explanation, figures: PlannedRange) -> list[str]:
    log, notes = exp.log, []
    planned = exp.rules
    others = [r for r in exp.matching_releases if r != rules_for(exp.options.vllm_version).mirrored]
    if others:
        where = {"log": "the log names", "option": "you asked for", "default": "planned with"}
        notes.append(
            f"release rules: the logged figures match the rules of vLLM {', '.join(others)}; "
            f"{where[exp.release_source]} {planned}"
        )
    elif not exp.matching_releases:
        notes.append("release rules: no mirrored release's rules reproduce the logged figures")
    tokens = log.kv_cache_tokens
    mid = figures.low.max_tokens or 0
    if tokens and mid:
        implied = exp.memory_gib * tokens / mid
        notes.append(
            f"the logged token count corresponds to about {implied:.2f} GiB of KV memory per "
            f"GPU under these rules and options (the log printed {exp.memory_gib:.2f} GiB): a "
            "smaller rank, an option the log does not show, or a model detail the config lacks"
        )
    return notes
