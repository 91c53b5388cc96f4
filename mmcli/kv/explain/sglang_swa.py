"""``kv-share explain`` of an SGLang log with a hybrid sliding-window pool (0.5.8 on).

Such a log prints the split ("Use sliding window memory pool. full_layer_tokens=F,
swa_layer_tokens=S"), a "KV Cache is allocated" line per pool and the pools' total
("SWAKVPool mem usage"), but not the budget they were sized from. Each distinct rule row of the
releases the log can be of plans the run with the smallest budget whose full pool holds F tokens
(the full pool grows with the budget); the plan's own lines are then held to the log's, line by
line, and the releases whose rules print every one of them reproduce the log.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.explain.engine_logs import SglangLog
from mmcli.kv.explain.engine_rows import EngineExplanation, Row, log_options, row, running_row
from mmcli.kv.figures import EngineFigures
from mmcli.kv.model import ModelConfig, architecture
from mmcli.kv.sglang import plan_sglang
from mmcli.kv.sglang.log_releases import log_releases, release_span
from mmcli.kv.sglang.releases import RELEASES, SglangRules

#: The budgets searched: up to 1 PiB.
_MAX_BUDGET = 2**50


def _plan_for(
    config: ModelConfig, doc: dict[str, Any], log: SglangLog, rules: SglangRules
) -> EngineFigures:
    """The plan under ``rules`` with the smallest budget whose full pool holds the logged
    full_layer_tokens (or the nearest above, which then differs)."""
    target = log.swa_full_tokens or 0

    def full(memory: int) -> int:
        tokens = plan_sglang(config, doc, log_options(log, rules.release, memory)).value(
            "pool_tokens"
        )
        return int(tokens or 0)

    low, high = 1, _MAX_BUDGET
    while low < high:
        mid = (low + high) // 2
        if full(mid) >= target:
            high = mid
        else:
            low = mid + 1
    return plan_sglang(config, doc, log_options(log, rules.release, low))


def _rows(log: SglangLog, plan: EngineFigures) -> list[Row]:
    full, swa = plan.value("pool_tokens"), plan.value("swa_pool_tokens")
    rows = [
        row("full_layer_tokens", log.swa_full_tokens, full, log.swa_full_tokens == full),
        row("swa_layer_tokens", log.swa_tokens, swa, log.swa_tokens == swa),
    ]
    planned = [line for line in plan.log_lines if not line.startswith("max_total_num_tokens")]
    for line in log.pool_lines:
        shown = "printed" if line in planned else "not printed"
        rows.append(row(_label(line), line, shown, line in planned))
    rows.append(running_row(log, plan.value("max_running_requests")))
    return rows


def _label(line: str) -> str:
    if line.startswith("Use sliding window"):
        return "the split line"
    if line.startswith("SWAKVPool"):
        return "the pools' total line"
    return "a pool's line"


def explain_swa(config: ModelConfig, doc: dict[str, Any], log: SglangLog) -> EngineExplanation:
    """Plan the log's run under each distinct rule row of the releases with a hybrid SWA pool
    for the model's architecture."""
    arch = architecture(doc) or config.name
    candidates = [
        r
        for r in log_releases(names_dtype=log.kv_line_dtype is not None, fields=log.arg_markers)
        if arch in r.hybrid_swa_archs and r.swa_split != "none"
    ]
    if not candidates:
        mirrored = [r.release for r in RELEASES if r.swa_split != "none"]
        raise InputError(
            f"the log has SGLang's hybrid sliding-window pool, which mmcli mirrors for {arch} "
            f"in no release the log can be of (SWA pools mirrored: {release_span(mirrored)})",
            hint="check --config is the model the log served",
        )
    groups: dict[SglangRules, list[str]] = {}
    for rules in candidates:
        groups.setdefault(replace(rules, release=""), []).append(rules.release)
    planned: list[tuple[list[str], list[Row], list[str]]] = []
    for rules, names in groups.items():
        plan = _plan_for(config, doc, log, replace(rules, release=names[-1]))
        planned.append((names, _rows(log, plan), list(plan.notes)))
    matching = [n for names, rows, _ in planned if all(r.status != "differs" for r in rows)
                for n in names]  # fmt: skip
    names, rows, notes = next(
        (p for p in reversed(planned) if all(r.status != "differs" for r in p[1])), planned[-1]
    )
    span = release_span([r.release for r in candidates])
    notes = [
        f"hybrid sliding-window pool: the log can be of SGLang {span} (the releases read whose "
        f"is_hybrid_swa_model list has {arch} and whose KV line is worded as the log's)",
        "the budget is not printed: each rule row is planned with the smallest budget whose "
        "full pool holds the logged full_layer_tokens",
        "releases whose rules reproduce the log: "
        + (release_span(matching) if matching else "none"),
        f"the figures shown are planned with SGLang {names[-1]}'s rules",
        *notes,
    ]
    result = EngineExplanation("sglang", release_span(matching or names), config.name, rows, notes)
    result.releases_matching = matching
    return result
