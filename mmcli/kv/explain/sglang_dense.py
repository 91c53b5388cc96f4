"""``kv-share explain`` of a dense / MLA SGLang log: which releases' rules reproduce it.

SGLang prints no version line, so the releases a log can be of come from its wording (the KV
line names its dtype from 0.5.13 on) and the ``server_args`` fields only some releases have
(:mod:`mmcli.kv.sglang.log_releases`). Each distinct rule row among them (the MHA cell with or
without ``v_head_dim``, the request pool from the profiled tokens or the capacity, the cap on a
given --max-running-requests) plans the run; the releases of the rows whose figures all agree
with the log are those that reproduce it.
"""

from __future__ import annotations

from typing import Any

from mmcli.errors import InputError
from mmcli.kv.explain.engine_logs import SglangLog
from mmcli.kv.explain.engine_rows import (
    EngineExplanation,
    Row,
    k_rows,
    log_options,
    running_row,
    settings,
)
from mmcli.kv.model import ModelConfig
from mmcli.kv.sglang import plan_sglang, sglang_rules
from mmcli.kv.sglang.geometry import sglang_cell
from mmcli.kv.sglang.log_releases import ARGS_FIRST_IN, log_releases, release_span, rule_rows
from mmcli.kv.sglang.releases import RELEASES, SglangRules


def _refuse_va(log: SglangLog) -> None:
    if log.va_upper_bound:
        first = next(r.release for r in RELEASES if r.multimodal_kv_reserve)
        raise InputError(
            "the log's KV line is 'KV Cache VA upper bound' (SGLang "
            f"{first} on with the post-capture KV resize, SGLANG_ENABLE_POST_CAPTURE_KV_SIZING): "
            "its #tokens is a reserved upper bound, and that resize is not mirrored",
            hint="explain the log of a run without the post-capture resize",
        )


def _plan_row(
    config: ModelConfig, doc: dict[str, Any], log: SglangLog, rules: SglangRules
) -> tuple[list[Row], list[str]]:
    """The rows and notes of the run planned under ``rules``."""
    tp, page, kv_dtype = settings(log)
    cell = sglang_cell(config, doc, rules, tp=tp, kv_dtype=kv_dtype)
    tokens = log.tokens or 0
    options = log_options(log, rules.release, tokens * cell.bytes_per_token)
    plan = plan_sglang(config, doc, options)
    rows = k_rows(log, cell, page)
    rows.append(running_row(log, plan.value("max_running_requests")))
    if log.has_mamba_line:
        rows.append(
            Row(
                "Mamba Cache (state pool)",
                "allocated",
                "none: the config has no Mamba / GDN layers",
                "differs",
            )
        )
    notes = [
        f"cell: {cell.bytes_per_token:,} B per token per rank at tp {tp} "
        f"({cell.layers} layers); the pool budget behind #tokens {tokens:,} is "
        f"{tokens * cell.bytes_per_token:,}–{(tokens + page) * cell.bytes_per_token - 1:,} B",
        *plan.notes,
    ]
    return rows, notes


def _named(log: SglangLog, candidates: list[str]) -> list[str]:
    """How the log narrows the releases it can be of."""
    if log.kv_line_dtype is not None:
        first = next(r.release for r in RELEASES if r.kv_line_names_dtype)
        how = f"the KV line names its dtype ({log.kv_line_dtype}): SGLang {first} or later"
    else:
        last = [r.release for r in RELEASES if not r.kv_line_names_dtype][-1]
        how = f"the KV line names no dtype: SGLang {last} or earlier"
    notes = [how]
    if log.arg_markers:
        newest = max(
            log.arg_markers, key=lambda f: [r.release for r in RELEASES].index(ARGS_FIRST_IN[f])
        )
        notes.append(
            f"server_args has {newest} (first in SGLang {ARGS_FIRST_IN[newest]}): that release "
            "or later"
        )
    notes.append(f"SGLang prints no version line: the log can be of {release_span(candidates)}")
    return notes


def explain_dense(config: ModelConfig, doc: dict[str, Any], log: SglangLog) -> EngineExplanation:
    """Plan the log's run under each distinct rule row of the releases it can be of."""
    _refuse_va(log)
    candidates = log_releases(names_dtype=log.kv_line_dtype is not None, fields=log.arg_markers)
    if not candidates:
        raise InputError(
            "the log's KV line and server_args fields fit no SGLang release read",
            hint=f"releases read: {release_span([r.release for r in RELEASES])}",
        )
    planned: list[tuple[list[str], list[Row], list[str]]] = []
    refused: list[tuple[list[str], InputError]] = []
    for rules, names in rule_rows(candidates):
        try:
            rows, notes = _plan_row(config, doc, log, sglang_rules(rules.release))
        except InputError as exc:
            refused.append((names, exc))
            continue
        planned.append((names, rows, notes))
    if not planned:
        raise refused[-1][1]
    matching = [
        n for names, rows, _ in planned if all(r.status != "differs" for r in rows) for n in names
    ]
    shown = next(
        (p for p in reversed(planned) if all(r.status != "differs" for r in p[1])), planned[-1]
    )
    names, rows, notes = shown
    notes = [
        *_named(log, [r.release for r in candidates]),
        "releases whose rules reproduce the log: "
        + (release_span(matching) if matching else "none"),
        *(f"SGLang {release_span(n)}: not planned ({exc})" for n, exc in refused),
        f"the figures shown are planned with SGLang {names[-1]}'s rules",
        *notes,
    ]
    if log.context_len is None:
        notes.append("the log has no context_len: max_running_requests is not compared")
    release = release_span(matching or names)
    result = EngineExplanation("sglang", release, config.name, rows, notes)
    result.releases_matching = matching
    return result
