"""The comparison half of ``kv-share explain``: a logged figure against the planned range."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mmcli.kv.explain.vllm_log import VllmLog
from mmcli.kv.result import SidePlan

#: "Available KV cache memory" is printed with 2 decimals: the truth is within half a unit.
ROUNDING_GIB: Final = 0.005


@dataclass(frozen=True)
class Comparison:
    """One figure: what the log printed, what the plan gives, and whether they agree."""

    figure: str
    logged: str | None
    planned: str
    #: "match", "differs", or "not in log".
    status: str
    note: str = ""


@dataclass(frozen=True)
class PlannedRange:
    """A side's figures at the low and the high end of the memory rounding."""

    low: SidePlan
    high: SidePlan

    def tokens(self) -> tuple[int, int]:
        return self.low.max_tokens or 0, self.high.max_tokens or 0

    def blocks(self) -> tuple[int, int]:
        return self.low.num_blocks or 0, self.high.num_blocks or 0

    def concurrency(self) -> tuple[float, float]:
        return round(self.low.max_concurrency or 0, 2), round(self.high.max_concurrency or 0, 2)


def span(low: float, high: float, fmt: str) -> str:
    a, b = format(low, fmt), format(high, fmt)
    return a if a == b else f"{a} – {b}"


def agrees(log: VllmLog, figures: PlannedRange) -> bool:
    """Whether the plan reproduces the log: some figure the log printed is compared, and no
    row of :func:`compare` (the one definition of a match) differs."""
    rows = compare(log, figures, 0.0)[1:]  # the first row is the plan's input, not a check
    compared = [row for row in rows if row.logged is not None and row.status != "not in log"]
    return bool(compared) and all(row.status == "match" for row in compared)


def _profiled(log: VllmLog) -> str | None:
    """V0's profiler figure for the KV memory, when no V1 line gives it."""
    gib = log.profile.profiled_kv_gib
    return None if gib is None else f"{gib:.2f} GiB"


def compare(log: VllmLog, figures: PlannedRange, memory_gib: float) -> list[Comparison]:
    rows = [
        Comparison(
            "Available KV cache memory (per GPU)",
            ", ".join(f"{r.gib:.2f} GiB" for r in log.available) or _profiled(log),
            f"{memory_gib - ROUNDING_GIB:.3f} – {memory_gib + ROUNDING_GIB:.3f} GiB",
            "match",
            "the plan's input: the printed figure ± its rounding",
        )
    ]
    if log.num_gpu_blocks is not None:
        low, high = figures.blocks()
        ok = low <= log.num_gpu_blocks <= high
        rows.append(
            Comparison(
                "GPU blocks",
                f"{log.num_gpu_blocks:,}",
                span(low, high, ","),
                "match" if ok else "differs",
            )
        )
    low, high = figures.tokens()
    logged = log.kv_cache_tokens
    status = "not in log" if logged is None else ("match" if low <= logged <= high else "differs")
    rows.append(
        Comparison(
            "GPU KV cache size (tokens)",
            None if logged is None else f"{logged:,}",
            span(low, high, ","),
            status,
        )
    )
    lo, hi = figures.concurrency()
    conc = log.max_concurrency
    status = "not in log" if conc is None else ("match" if lo <= conc <= hi else "differs")
    rows.append(
        Comparison(
            "Maximum concurrency",
            None if conc is None else f"{conc:.2f}×",
            span(lo, hi, ".2f") + "×",
            status,
        )
    )
    rows += compare_refusal(log, figures)
    return rows


def compare_refusal(log: VllmLog, figures: PlannedRange) -> list[Comparison]:
    rows: list[Comparison] = []
    fits = (figures.low.largest_fitting_max_model_len, figures.high.largest_fitting_max_model_len)
    refused = fits[0] is not None
    if log.refusal is not None or refused:
        logged = (
            "refused" if log.refusal is not None else ("started" if log.has_kv_report() else None)
        )
        planned = "refuses" if refused else "starts"
        agree = (log.refusal is not None) == refused
        rows.append(Comparison("engine start-up", logged, planned, "match" if agree else "differs"))
    estimated = log.refusal.estimated_max_model_len if log.refusal else None
    if estimated is not None and refused:
        low, high = fits[0] or 0, fits[1] if fits[1] is not None else log.max_model_len or 0
        rows.append(
            Comparison(
                "largest max_model_len that fits",
                f"{estimated:,}",
                span(low, high, ","),
                "match" if low <= estimated <= high else "differs",
            )
        )
    return rows
