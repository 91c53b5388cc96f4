"""The rows and the explanation ``kv-share explain`` builds from an SGLang or TensorRT-LLM
log: each printed figure beside the planned one.

Logs print memory to 0.01 GiB (SGLang's "GB" is GiB), so a figure derived from one is a
range; a planned figure matches when it lies in that range, or prints as the log printed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mmcli.kv.explain.engine_logs import SglangLog
from mmcli.kv.sglang import SglangOptions
from mmcli.kv.sglang.geometry import KV_CACHE_DTYPES, Cell

__all__ = ["EngineExplanation", "Row", "k_rows", "log_options", "row", "running_row", "settings"]

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
    #: The releases whose rules reproduce every figure the log printed.
    releases_matching: list[str] = field(default_factory=list)

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
            "releases_matching": list(self.releases_matching),
            "exit_code": exit_code,
        }


def row(figure: str, logged: object, planned: object, ok: bool | None) -> Row:
    status = "not in log" if ok is None else "match" if ok else "differs"
    return Row(figure, "–" if logged is None else str(logged), str(planned), status)


def settings(log: SglangLog) -> tuple[int, int, str]:
    """tp, page size and KV dtype of the run, from its ``server_args`` line (else defaults)."""
    args = log.args
    kv_dtype = args.get("kv_cache_dtype", "auto")
    kv_dtype = kv_dtype if kv_dtype in KV_CACHE_DTYPES else "auto"
    return int(args.get("tp_size", "1")), int(args.get("page_size", "1")), kv_dtype


def log_options(log: SglangLog, release: str, memory: int) -> SglangOptions:
    """The run a log describes as SGLang options under ``release``, with ``memory`` as the pool
    budget: its server_args (tp, page size, KV dtype, --max-running-requests,
    --max-total-tokens, DP attention) and context length."""
    args = log.args
    tp, page, kv_dtype = settings(log)
    user, cap = args.get("max_running_requests"), args.get("max_total_tokens")
    return SglangOptions(
        release=release,
        tp=tp,
        memory_bytes=memory,
        page_size=page,
        page_size_given=True,
        kv_dtype=kv_dtype,
        max_model_len=log.context_len,
        max_running_requests=None if user is None else int(user),
        max_total_tokens=None if cap is None else int(cap),
        enable_dp_attention=args.get("enable_dp_attention") == "True",
    )


def k_rows(log: SglangLog, cell: Cell, page: int) -> list[Row]:
    """The K (or latent) buffer: bytes per token per buffer as a range, and its printed size."""
    if log.k_gib is None or log.tokens is None:
        return []
    slots = log.tokens + page
    per_buffer = cell.bytes_per_token // (1 if cell.mla else 2)
    low, high = (log.k_gib - _HALF) * _GIB / slots, (log.k_gib + _HALF) * _GIB / slots
    what = "KV size (latent)" if cell.mla else "K size"
    planned_gib = f"{cell.tensor_bytes(slots) / _GIB:.2f} GB"
    return [
        row(
            f"{what}, bytes per token per buffer",
            f"{low:,.0f}–{high:,.0f}",
            f"{per_buffer:,}",
            planned_gib == f"{log.k_gib:.2f} GB",  # the range, without its float edges
        ),
        row(what, f"{log.k_gib:.2f} GB", planned_gib, planned_gib == f"{log.k_gib:.2f} GB"),
    ]


def running_row(log: SglangLog, running: object) -> Row:
    compared = log.max_running_requests is not None and log.context_len is not None
    ok = running == log.max_running_requests if compared else None
    return row("max_running_requests", log.max_running_requests, running, ok)
