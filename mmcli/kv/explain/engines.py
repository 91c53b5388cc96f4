"""``kv-share explain`` for SGLang and TensorRT-LLM logs: which printed figures mmcli
reproduces from the model's config, which it cannot, and why.

Logs print memory to 0.01 GiB (SGLang's "GB" is GiB), so a figure derived from one is a
range; a planned figure matches when it lies in that range, or prints as the log printed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.explain.engine_logs import SglangLog, TrtllmLog
from mmcli.kv.model import ModelConfig
from mmcli.kv.sglang import SglangOptions, plan_sglang, sglang_rules
from mmcli.kv.sglang.geometry import KV_CACHE_DTYPES, sglang_cell
from mmcli.kv.trtllm import TrtllmOptions, plan_trtllm, trtllm_rules
from mmcli.kv.trtllm.pool import bytes_per_token

_GIB = 2**30
_HALF = 0.005  # half the last printed digit of a "%.2f GiB" figure


@dataclass(frozen=True)
class Row:
    """One figure: as logged, as planned, and whether they agree."""

    figure: str
    logged: str
    planned: str
    status: str  # "match", "differs" or "not in log"


@dataclass
class EngineExplanation:
    """A start-up log of ``engine`` beside mmcli's plan of the same run."""

    engine: str
    release: str
    model: str
    rows: list[Row]
    notes: list[str] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return all(row.status != "differs" for row in self.rows)

    def to_json(self, *, exit_code: int) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "release": self.release,
            "model": self.model,
            "rows": [vars(row) for row in self.rows],
            "notes": list(self.notes),
            "matches": self.matches,
            "exit_code": exit_code,
        }


def _row(figure: str, logged: object, planned: object, ok: bool | None) -> Row:
    status = "not in log" if ok is None else "match" if ok else "differs"
    return Row(figure, "–" if logged is None else str(logged), str(planned), status)


def explain_sglang(config: ModelConfig, doc: dict[str, Any], log: SglangLog) -> EngineExplanation:
    """Reproduce an SGLang log's cell, buffer sizes and request cap from the config."""
    args = log.args
    tp = int(args.get("tp_size", "1"))
    page = int(args.get("page_size", "1"))
    kv_dtype = args.get("kv_cache_dtype", "auto")
    kv_dtype = kv_dtype if kv_dtype in KV_CACHE_DTYPES else "auto"
    rules = sglang_rules(None)
    cell = sglang_cell(config, doc, rules, tp=tp, kv_dtype=kv_dtype)
    tokens = log.tokens or 0
    per_buffer = cell.bytes_per_token // (1 if cell.mla else 2)
    options = SglangOptions(
        tp=tp,
        memory_bytes=tokens * cell.bytes_per_token,
        page_size=page,
        page_size_given=True,
        kv_dtype=kv_dtype,
        max_model_len=log.context_len,
        enable_dp_attention=args.get("enable_dp_attention") == "True",
    )
    plan = plan_sglang(config, doc, options)
    rows: list[Row] = []
    if log.k_gib is not None:
        slots = tokens + page
        low, high = (log.k_gib - _HALF) * _GIB / slots, (log.k_gib + _HALF) * _GIB / slots
        what = "KV size (latent)" if cell.mla else "K size"
        rows.append(
            _row(
                f"{what}, bytes per token per buffer",
                f"{low:,.0f}–{high:,.0f}",
                f"{per_buffer:,}",
                low <= per_buffer < high,
            )
        )
        planned_gib = f"{cell.tensor_bytes(slots) / _GIB:.2f} GB"
        rows.append(
            _row(what, f"{log.k_gib:.2f} GB", planned_gib, planned_gib == f"{log.k_gib:.2f} GB")
        )
    running = plan.value("max_running_requests")
    rows.append(
        _row(
            "max_running_requests",
            log.max_running_requests,
            running,
            None
            if log.max_running_requests is None or log.context_len is None
            else running == log.max_running_requests,
        )
    )
    notes = [
        f"cell: {cell.bytes_per_token:,} B per token per rank at tp {tp} "
        f"({cell.layers} layers); the pool budget behind #tokens {tokens:,} is "
        f"{tokens * cell.bytes_per_token:,}–{(tokens + page) * cell.bytes_per_token - 1:,} B",
        "the log names no SGLang release; these figures are equal in every release read",
        *plan.notes,
    ]
    if log.context_len is None:
        notes.append("the log has no context_len: max_running_requests is not compared")
    return EngineExplanation("sglang", "0.4.6.post5–0.5.4", config.name, rows, notes)


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
    release = "0.13" if log.path == "cpp" else "1.1"
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
    which = "C++ runtime (0.13 rules)" if log.path == "cpp" else "PyTorch backend (1.1 rules)"
    notes = [
        f"the log's memory line is the {which}'s; planned at {available:.2f} ± 0.005 GiB",
        f"tp {tp}: "
        + ("the one whose bytes per token reproduce the log" if inferred else "assumed"),
        *(note for note in low.notes if "pass --" not in note),
    ]
    if log.tokens_per_block is None:
        notes.append("the log prints no tokens per block: the release default is assumed")
    return EngineExplanation("trtllm", release, config.name, rows, notes)
