"""``kv-share explain`` of an SGLang log of a DeepSeek sparse attention (V3.2 NSA) model.

The NSA pool (:mod:`mmcli.kv.sglang.dsa`) is sized from a budget cell and allocates a row that
can be larger (an fp8 cache in the releases where ``dsa_budget_row_allocated`` is off). The
log prints the tokens and the allocated size ("KV Cache is allocated. #tokens: N, KV size: X
GB", latent and indexer, GB = GiB), not the budget: each distinct rule row of the releases the
log can be of plans the run with the budget ``#tokens × budget cell`` (the budgets up to one
page more give the same tokens), and the tokens, the allocated size, the page and the dtype the
line names are compared. The KV dtype comes from the KV line's ``dtype:``, else the
``server_args`` line; a log that names neither is planned with bfloat16 and with fp8_e4m3. The
latent is whole on every rank, so tp does not change the pool per rank.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.explain.engine_logs import SglangLog
from mmcli.kv.explain.engine_rows import EngineExplanation, Row, log_options, row, running_row
from mmcli.kv.model import ModelConfig
from mmcli.kv.sglang import plan_sglang
from mmcli.kv.sglang.dsa import NsaCell, nsa_cell
from mmcli.kv.sglang.log_releases import EXPLAIN_FIELDS, log_releases, release_span, rule_rows
from mmcli.kv.sglang.releases import RELEASES, SglangRules

_GIB = 2**30
#: The rule fields that change an NSA explanation, beside the dense ones.
DSA_FIELDS = (
    "dsa_mirrored",
    "dsa_budget_row_allocated",
    "dsa_fp8_trtllm_on_blackwell",
    "dsa_page_size",
)
#: The KV dtypes an NSA pool takes, by the names a log gives them (server_args, the KV line).
_DTYPES = {
    "fp8_e4m3": "fp8",
    "fp8": "fp8",
    "bfloat16": "bfloat16",
    "torch.float8_e4m3fn": "fp8",
    "torch.bfloat16": "bfloat16",
}


def _dtypes(log: SglangLog) -> tuple[list[str], str]:
    """The KV dtypes to plan and where they come from."""
    if log.kv_line_dtype is not None:
        named = _DTYPES.get(log.kv_line_dtype)
        if named is None:
            raise InputError(
                f"the log's KV line names dtype {log.kv_line_dtype}: SGLang's NSA pool takes "
                "bfloat16 or fp8_e4m3 only, which is not mirrored",
                hint="check --config is the model the log served",
            )
        return [named], f"the KV line names its dtype ({log.kv_line_dtype})"
    given = log.args.get("kv_cache_dtype")
    if given in _DTYPES:
        return [_DTYPES[given]], f"server_args has kv_cache_dtype='{given}'"
    why = "server_args has kv_cache_dtype='auto'" if given else "the log names no KV dtype"
    return ["bfloat16", "fp8"], f"{why}: planned with bfloat16 and with fp8_e4m3"


def _blackwell_gib(cell: NsaCell, tokens: int) -> float:
    """The pool's GiB with the trtllm NSA backends' fp8 row (the latent's 576 B, no scales)."""
    rows = (tokens + cell.page) * (cell.kv_lora_rank + cell.qk_rope_head_dim)
    pages = (tokens + cell.page + 1) // cell.page * cell.page * cell.index_bytes
    return (rows + pages) * cell.layers / _GIB


def _plan(
    config: ModelConfig, doc: dict[str, Any], log: SglangLog, rules: SglangRules, dtype: str
) -> tuple[list[Row], list[str], str | None]:
    """Rows and notes of the run under ``rules`` at ``dtype``, and the Blackwell row's KV size
    where that release's trtllm backends allocate another fp8 row (else None)."""
    cell = nsa_cell(config, doc, rules, kv_dtype=dtype)
    tokens = log.tokens or 0
    budget = tokens * cell.budget_bytes_per_token
    options = replace(
        log_options(log, rules.release, budget),
        kv_dtype=dtype,
        page_size=int(log.args.get("page_size", cell.page)),
    )
    plan = plan_sglang(config, doc, options)
    planned_gib = f"{cell.pool_bytes(tokens) / _GIB:.2f} GB"
    logged_gib = None if log.k_gib is None else f"{log.k_gib:.2f} GB"
    ok = None if logged_gib is None else planned_gib == logged_gib
    slots = tokens + cell.page
    span = "–"
    if log.k_gib is not None:
        low, high = (log.k_gib - 0.005) * _GIB / slots, (log.k_gib + 0.005) * _GIB / slots
        span = f"{low:,.0f}–{high:,.0f}"
    page = log.args.get("page_size")
    rows = [
        row("#tokens", tokens, plan.value("pool_tokens"), plan.value("pool_tokens") == tokens),
        row("budget per token (not printed)", None, f"{cell.budget_bytes_per_token:,}", None),
        row("bytes allocated per token", span, f"{cell.allocated_bytes_per_token:,}", ok),
        row("KV size (latent + indexer)", logged_gib, planned_gib, ok),
        row("page size", page, cell.page, None if page is None else int(page) == cell.page),
    ]
    if log.kv_line_dtype is not None:
        rows.append(row("KV line dtype", log.kv_line_dtype, cell.torch_dtype,
                        log.kv_line_dtype == cell.torch_dtype))  # fmt: skip
    rows.append(running_row(log, plan.value("max_running_requests")))
    notes = [
        f"budget behind #tokens {tokens:,}: {budget:,}–"
        f"{(tokens + cell.page) * cell.budget_bytes_per_token - 1:,} B "
        f"({cell.budget_bytes_per_token:,} B per token budgeted, "
        f"{cell.allocated_bytes_per_token:,} B allocated)",
        *plan.notes,
    ]
    blackwell = None
    if cell.fp8 and rules.dsa_fp8_trtllm_on_blackwell:
        blackwell = f"{_blackwell_gib(cell, tokens):.2f} GB"
    return rows, notes, blackwell


def explain_dsa(config: ModelConfig, doc: dict[str, Any], log: SglangLog) -> EngineExplanation:
    """Plan an NSA model's log under each distinct rule row and KV dtype it can be of."""
    named = log.kv_line_dtype is not None
    read = log_releases(names_dtype=named, fields=log.arg_markers)
    candidates = tuple(r for r in read if r.dsa_mirrored)
    if not candidates:
        mirrored = [r.release for r in RELEASES if r.dsa_mirrored]
        raise InputError(
            "the log's KV line and server_args fields fit no SGLang release whose DeepSeek "
            f"sparse attention pool is mirrored ({release_span(mirrored)})",
            hint="check --config is the model the log served",
        )
    dtypes, dtype_note = _dtypes(log)
    # (releases, dtype, rows, notes, KV size with Blackwell's trtllm row or None)
    planned: list[tuple[list[str], str, list[Row], list[str], str | None]] = []
    for rules, names in rule_rows(candidates, (*EXPLAIN_FIELDS, *DSA_FIELDS)):
        for dtype in dtypes:
            rows, notes, blackwell = _plan(config, doc, log, rules, dtype)
            planned.append((names, dtype, rows, notes, blackwell))

    def ok(rows: list[Row]) -> bool:
        return all(r.status != "differs" for r in rows)

    logged = None if log.k_gib is None else f"{log.k_gib:.2f} GB"
    anywhere = [p for p in planned if ok(p[2]) and p[4] in (None, logged)]
    hopper = [p for p in planned if ok(p[2]) and p[4] not in (None, logged)]
    matching = [n for p in anywhere for n in p[0]]
    only_hopper = [n for p in hopper for n in p[0]]
    names, dtype, rows, plan_notes, _ = next(iter(reversed(anywhere or hopper)), planned[-1])
    kinds = sorted({p[1] for p in anywhere + hopper})
    first_named = next(r.release for r in RELEASES if r.kv_line_names_dtype)
    wording = "names its dtype" if named else "names no dtype"
    notes = [
        f"DeepSeek sparse attention (NSA): the KV line {wording}, so the log can be of SGLang "
        f"{release_span([r.release for r in candidates])} (the NSA pool is mirrored there; "
        f"the line names the dtype from {first_named} on)",
        f"KV dtype: {dtype_note}"
        + (f"; reproduced with {' and '.join(kinds)}" if len(dtypes) > 1 and kinds else ""),
        "the budget is not printed: each rule row is planned with #tokens × its budget cell; "
        "tp does not change the pool per rank (the MLA latent is whole on every rank)",
        "releases whose rules reproduce the log: "
        + (release_span(matching) if matching else "none on every GPU")
        + (f" (on a Hopper GPU also {release_span(only_hopper)})" if only_hopper else ""),
    ]
    for p in hopper:
        notes.append(
            f"SGLang {release_span(p[0])} reproduce it ({p[1]}) on a Hopper GPU only "
            f"(flashmla_kv's fp8 row): on Blackwell their trtllm NSA backends allocate the "
            f"latent's 576-B row, KV size {p[4]}"
        )
    for p in planned:
        if not ok(p[2]) and p[4] is not None and p[4] == logged:
            notes.append(
                f"SGLang {release_span(p[0])} reproduce the KV size ({p[1]}) on a Blackwell GPU "
                "only: its trtllm NSA backends allocate the latent's 576-B row, which the plan "
                "does not mirror"
            )
    notes += [f"the figures shown are planned with SGLang {names[-1]}'s rules at {dtype}"]
    notes += plan_notes
    if log.context_len is None:
        notes.append("the log has no context_len: max_running_requests is not compared")
    shown = matching or only_hopper
    result = EngineExplanation("sglang", release_span(shown or names), config.name, rows, notes)
    result.releases_matching = shown
    return result
