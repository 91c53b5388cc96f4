"""Which SGLang releases' rules reproduce a hybrid GDN / Mamba-2 model's start-up log.

A log whose release the wording of its ``Mamba Cache is allocated`` line names, and which that
release serves, is held to that release's sizes (:func:`~mmcli.kv.explain.sglang_state.
hybrid_rules`). Otherwise — its KV line names the pool's dtype, which that release's does not,
or the model is one it does not serve (Qwen3.5 / 3.6, read through their ``text_config``) —
the log is planned under each distinct rule row of the releases that can have printed it (KV
line and ``server_args`` fields worded as the log's, a state pool sized as its Mamba line says)
and that serve the model, and the releases whose rules print every figure are named, as for
the hybrid sliding-window pool (:mod:`mmcli.kv.explain.sglang_swa`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.explain.engine_logs import SglangLog
from mmcli.kv.explain.engine_rows import EngineExplanation, settings
from mmcli.kv.explain.sglang_state import hybrid_rules
from mmcli.kv.model import ModelConfig, architecture
from mmcli.kv.sglang import sglang_rules
from mmcli.kv.sglang.hybrid import hybrid_state
from mmcli.kv.sglang.log_releases import log_releases, release_span
from mmcli.kv.sglang.releases import SglangRules
from mmcli.kv.sglang.state_wording import state_line_release

#: Explains the log under one release's rules; the note, when given, replaces the wording one.
Explainer = Callable[
    [ModelConfig, dict[str, Any], SglangLog, SglangRules, "str | None"], EngineExplanation
]


def _refusal(doc: dict[str, Any], rules: SglangRules, tp: int) -> InputError | None:
    """Why ``rules``' release does not serve the model's state pool, or None where it does."""
    try:
        hybrid_state(doc, rules, architecture(doc), tp=tp)
    except InputError as exc:
        return exc
    return None


def explain_state_releases(
    config: ModelConfig, doc: dict[str, Any], log: SglangLog, explain_one: Explainer
) -> EngineExplanation:
    """The log explained under the release its Mamba line names, or else under every release
    that can have printed it, naming those whose rules reproduce it."""
    tp = settings(log)[0]
    first = sglang_rules(log.mamba_wording or state_line_release(names_slots=True))
    candidates = log_releases(names_dtype=log.kv_line_dtype is not None, fields=log.arg_markers)
    if first in candidates and _refusal(doc, first, tp) is None:
        result = explain_one(config, doc, log, hybrid_rules(doc, log), None)
        result.releases_matching = [result.release] if result.matches else []
        return result
    rule = "fixed" if log.has_mamba_line and log.mamba_slots is None else "ratio"
    sized = [r for r in candidates if r.hybrid_rule == rule]
    serving = [r for r in sized if _refusal(doc, r, tp) is None]
    if not serving:
        hybrid_rules(doc, log)  # refuses a model the wording's release does not serve
        if sized:
            raise _refusal(doc, sized[-1], tp) or AssertionError
        raise InputError(
            "SGLang: no release read with a hybrid state pool prints this log's lines (its KV "
            f"line {'names' if log.kv_line_dtype else 'does not name'} the pool's dtype)",
            hint="check the log is an SGLang start-up log of a hybrid model",
        )
    groups: dict[SglangRules, list[SglangRules]] = {}
    for rules in serving:
        groups.setdefault(replace(rules, release=""), []).append(rules)
    arch = architecture(doc) or config.name
    span = release_span([r.release for r in serving])
    wording = (
        f"hybrid state pool: the log can be of SGLang {span} (the releases read that serve "
        f"{arch} and whose Mamba Cache and KV lines are worded as the log's); each rule row is "
        "planned at a budget that gives the log's #tokens"
    )
    planned: list[tuple[list[str], EngineExplanation]] = []
    refused: list[str] = []
    for rows in groups.values():
        names = [r.release for r in rows]
        try:
            planned.append((names, explain_one(config, doc, log, rows[-1], wording)))
        except InputError as exc:
            refused.append(f"SGLang {release_span(names)} refuses this run: {exc}")
            if not planned and len(refused) == len(groups):
                raise
    matching = [n for names, result in planned if result.matches for n in names]
    names, result = next(
        (p for p in reversed(planned) if p[1].matches), planned[-1]
    )  # the newest row that reproduces the log, else the newest row
    result.notes[1:1] = [
        "releases whose rules reproduce the log: "
        + (release_span(matching) if matching else "none"),
        f"the figures shown are planned with SGLang {names[-1]}'s rules",
        *refused,
    ]
    result.release = release_span(matching or names)
    result.releases_matching = matching
    return result
