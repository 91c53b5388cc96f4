"""``kv-share explain`` for SGLang and TensorRT-LLM logs: which printed figures mmcli
reproduces from the model's config, which it cannot, and why.

Logs print memory to 0.01 GiB (SGLang's "GB" is GiB), so a figure derived from one is a
range; a planned figure matches when it lies in that range, or prints as the log printed it.
An SGLang log of a hybrid GDN / Mamba-2 model also has its state pool compared, under the
release its ``Mamba Cache`` line's wording names (:mod:`mmcli.kv.explain.sglang_state`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.explain.engine_logs import SglangLog, TrtllmLog
from mmcli.kv.explain.engine_rows import (
    EngineExplanation,
    Row,
    k_rows,
    log_options,
    running_row,
    settings,
)
from mmcli.kv.explain.engine_rows import row as _row
from mmcli.kv.explain.sglang_dense import explain_dense
from mmcli.kv.explain.sglang_dsa import explain_dsa
from mmcli.kv.explain.sglang_state import budgets, refuse_unmirrored
from mmcli.kv.explain.sglang_state_releases import explain_state_releases
from mmcli.kv.explain.sglang_swa import explain_swa
from mmcli.kv.model import ModelConfig
from mmcli.kv.sglang.dsa import is_nsa
from mmcli.kv.sglang.geometry import hybrid_cell
from mmcli.kv.sglang.releases import SglangRules
from mmcli.kv.sglang.state_wording import STATE_LINE_WORDING, state_line_release
from mmcli.kv.state import MambaSpec
from mmcli.kv.trtllm import TrtllmOptions, plan_trtllm, trtllm_rules
from mmcli.kv.trtllm.pool import bytes_per_token
from mmcli.kv.trtllm.releases import release_of

_GIB = 2**30
_HALF = 0.005  # half the last printed digit of a "%.2f GiB" figure


def explain_sglang(config: ModelConfig, doc: dict[str, Any], log: SglangLog) -> EngineExplanation:
    """Reproduce an SGLang log's cell, buffer sizes and request cap from the config, and say
    which releases' rules reproduce it."""
    if any(isinstance(layer.spec, MambaSpec) for layer in config.layers):
        return explain_state_releases(config, doc, log, _explain_hybrid)
    if is_nsa(doc):
        return explain_dsa(config, doc, log)
    if log.swa_full_tokens is not None:
        return explain_swa(config, doc, log)
    return explain_dense(config, doc, log)


def _gib_range(gib: float, count: int) -> tuple[float, float]:
    """The bytes per item behind a "%.2f" GiB figure of ``count`` items."""
    return max(0.0, gib - _HALF) * _GIB / count, (gib + _HALF) * _GIB / count


def _explain_hybrid(
    config: ModelConfig,
    doc: dict[str, Any],
    log: SglangLog,
    rules: SglangRules,
    wording: str | None = None,
) -> EngineExplanation:
    """A hybrid GDN / Mamba-2 model's log under ``rules``: token pool, state pool and request
    cap; ``wording`` says which releases the log can be of (else its Mamba line's wording)."""
    tp, page, kv_dtype = settings(log)
    cell, state = hybrid_cell(config, doc, rules, tp=tp, kv_dtype=kv_dtype)
    refuse_unmirrored(log, state)
    # The log's run; the budget is searched (budgets), and --max-total-tokens is not applied.
    base = replace(log_options(log, rules.release, 0), memory_bytes=None, max_total_tokens=None)
    tokens = log.tokens or 0
    found = budgets(config, doc, base, state, cell, tokens)
    counts = sorted(n for n in found if n >= 0)
    chosen = log.mamba_slots if log.mamba_slots in found else (counts or [-1])[0]
    budget, plan = found[chosen]
    planned_slots = int(plan.value("state_slots") or 0)
    rows = k_rows(log, cell, page)
    if not counts:
        rows.append(_row("#tokens", tokens, plan.value("pool_tokens"), False))
    slots_text = " or ".join(f"{n}" for n in counts) or f"{planned_slots}"
    rows.append(
        _row(
            "max_mamba_cache_size",
            log.mamba_slots,
            slots_text,
            None if log.mamba_slots is None else log.mamba_slots in counts,
        )
    )
    if log.conv_gib is not None and log.ssm_gib is not None:
        pool = planned_slots if log.mamba_slots is None else log.mamba_slots
        conv, ssm = state.pool_bytes(pool)
        for name, gib, per_slot, size in (
            ("conv_state", log.conv_gib, state.conv_bytes * state.state_layers, conv),
            ("ssm_state", log.ssm_gib, state.ssm_bytes * state.state_layers, ssm),
        ):
            low, high = _gib_range(gib, pool + 1)
            printed = f"{size / _GIB:.2f}GB"
            ok = printed == f"{gib:.2f}GB"  # per_slot in [low, high), without its float edges
            rows.append(
                _row(f"{name}, bytes per slot", f"{low:,.0f}–{high:,.0f}", f"{per_slot:,}", ok)
            )
            rows.append(_row(f"{name} size", f"{gib:.2f}GB", printed, ok))
    rows.append(running_row(log, plan.value("max_running_requests")))
    per = state.bytes_per_request
    # 0.5.17 on take MambaPool's padding slot off the budget too (mamba_pad_slot_budgeted).
    held = planned_slots + int(rules.mamba_pad_slot_budgeted)
    low = held * per + tokens * cell.bytes_per_token
    notes = [
        wording
        if wording is not None
        else STATE_LINE_WORDING[rules.release]
        if log.has_mamba_line
        else (
            "the log has no Mamba Cache line, so its release is not known: "
            f"{state_line_release(True)} rules are used ({state_line_release(False)} keeps 512 "
            "state slots with the radix cache off)"
        ),
        f"cell: {cell.bytes_per_token:,} B per token per rank at tp {tp} over the "
        f"{cell.layers} attention layers; the pool budget behind #tokens {tokens:,} and "
        f"{planned_slots:,} state slots lies in {low:,}–"
        f"{low + page * cell.bytes_per_token - 1:,} B ({budget / _GIB:.2f} GiB)",
    ]
    if len(counts) > 1:
        notes.append(
            f"{' and '.join(map(str, counts))} state slots give the same #tokens (one slot more "
            f"takes {per:,} B, {per // cell.bytes_per_token:,} tokens, off the token pool), so "
            "the log's slot count matches either"
        )
    elif not counts:
        notes.append(
            f"no pool budget gives #tokens {tokens:,} under SGLang {rules.release}'s rules; the "
            "figures are planned at the nearest budget"
        )
    notes.extend(plan.notes)
    notes.append(
        "not reproduced: the budget itself (SGLang measures the memory left after loading the "
        "weights; mmcli takes the range #tokens implies)"
    )
    if log.context_len is None:
        notes.append("the log has no context_len: max_running_requests is not compared")
    return EngineExplanation("sglang", rules.release, config.name, rows, notes)


def _infer_tp(
    config: ModelConfig, doc: dict[str, Any], log: TrtllmLog, release: str
) -> tuple[int, bool]:
    """The tp whose bytes per token reproduce the log, and whether one did (else 1)."""
    rules = trtllm_rules(release)
    for tp in (1, 2, 4, 8, 16):
        try:
            per_token, _ = bytes_per_token(config, doc, rules, tp=tp, kv_dtype="auto")
        except InputError:  # a tp the KV heads do not divide over
            continue
        if log.kv_size_per_token is not None and per_token == log.kv_size_per_token:
            return tp, True
        if log.allocated_gib is not None and log.allocated_tokens is not None:
            if f"{log.allocated_tokens * per_token / _GIB:.2f}" == f"{log.allocated_gib:.2f}":
                return tp, True
    return 1, False


def explain_trtllm(config: ModelConfig, doc: dict[str, Any], log: TrtllmLog) -> EngineExplanation:
    """Reproduce a TensorRT-LLM log's bytes per token and block count from the config."""
    release, named = _trtllm_release(log)
    tp, inferred = _infer_tp(config, doc, log, release)
    available = log.available_gib or 0.0

    def blocks_at(gib: float) -> Any:
        options = TrtllmOptions(
            release=release,
            tp=tp,
            memory_bytes=int(gib * _GIB),
            tokens_per_block=log.tokens_per_block,
        )
        return plan_trtllm(config, doc, options)

    low, high = blocks_at(available - _HALF), blocks_at(available + _HALF)
    per_token = int(low.value("bytes_per_token") or 0)
    rows: list[Row] = []
    if log.kv_size_per_token is not None:
        rows.append(
            _row(
                "kv size per token",
                log.kv_size_per_token,
                per_token,
                log.kv_size_per_token == per_token,
            )
        )
    span = (
        f"{low.value('blocks'):,}"
        if low.value("blocks") == high.value("blocks")
        else (f"{low.value('blocks'):,}–{high.value('blocks'):,}")
    )
    ok = (
        None
        if log.blocks is None
        else (int(low.value("blocks") or 0) <= log.blocks <= int(high.value("blocks") or 0))
    )
    rows.append(_row("blocks in primary pool", log.blocks, span, ok))
    if log.allocated_gib is not None and log.allocated_tokens is not None:
        planned = f"{log.allocated_tokens * per_token / _GIB:.2f} GiB"
        rows.append(
            _row(
                "allocated for the pool",
                f"{log.allocated_gib:.2f} GiB",
                planned,
                planned == f"{log.allocated_gib:.2f} GiB",
            )
        )
    path = "C++ runtime" if log.path == "cpp" else "PyTorch backend"
    which = f"{path} ({release} rules)"
    notes = [
        f"the log's memory line is the {which}'s; planned at {available:.2f} ± 0.005 GiB",
        f"tp {tp}: "
        + ("the one whose bytes per token reproduce the log" if inferred else "assumed"),
        *(note for note in low.notes if "pass --" not in note),
    ]
    if log.tokens_per_block is None:
        notes.append("the log prints no tokens per block: the release default is assumed")
    notes.append(named)
    result = EngineExplanation("trtllm", release, config.name, rows, notes)
    result.releases_matching = [release] if result.matches else []
    return result


def _trtllm_release(log: TrtllmLog) -> tuple[str, str]:
    """The release whose rules explain ``log``, and a note saying how it was chosen: its
    version line's (a release not mirrored is refused), else the newest on its memory line's
    path."""
    path = "cpp" if log.path == "cpp" else "pytorch"
    newest = release_of(path).release
    if log.release is None:
        return newest, (
            f"the log prints no 'TensorRT-LLM version' line: the rules of {newest}, the newest "
            "release read on its memory line's path, are used"
        )
    try:
        rules = trtllm_rules(log.release)
    except InputError as exc:
        why = str(exc).split(": ", 1)[-1]
        raise InputError(
            f"the log is of TensorRT-LLM {log.release} (its version line): {why}",
            hint=exc.hint,
        ) from None
    if rules.path != path:
        return newest, (
            f"the log is of TensorRT-LLM {log.release}, whose memory line is the "
            f"{'C++ runtime' if path == 'cpp' else 'PyTorch backend'}'s: the rules of {newest} "
            "are used"
        )
    return rules.release, f"the log is of TensorRT-LLM {log.release} (its version line)"
