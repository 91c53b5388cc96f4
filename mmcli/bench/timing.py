"""Timing small device ops: a well-kept timer per device, and host-sync counting on CUDA.

CPU timings come from ``torch.utils.benchmark``'s blocked autorange, with a chosen number
of threads. CUDA timings come from CUDA events around each call, after warm-up,
with a 256 MiB write before every call so that no call finds its inputs in L2 (as
``triton.testing.do_bench`` does).
"""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

_L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Timing:
    """Seconds per call: median and interquartile range."""

    median: float
    iqr: float

    @property
    def spread(self) -> float:
        return self.iqr / self.median if self.median > 0 else 0.0


def sample(
    fn: Callable[[], object], device: torch.device, min_time: float, *, threads: int = 1
) -> list[float]:
    """Seconds per call of ``fn`` on ``device``, from at least ``min_time`` seconds of calls.

    On CPU: one value per block of torch.utils.benchmark's blocked autorange, the ops running
    with ``threads`` torch threads (that module's default is one: on a machine shared with
    other work, a parallel region stalls whenever one of its threads is descheduled, and the
    timings turn into scheduler quanta). On CUDA: one value per call, from CUDA events.
    """
    if device.type == "cuda":
        # Events record on the current device's stream: make it the device being timed.
        with torch.cuda.device(device):
            return _sample_cuda(fn, device, min_time)
    from torch.utils.benchmark import Timer

    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
    return list(timer.blocked_autorange(min_run_time=min_time).times)


def summarise(samples: Sequence[float]) -> Timing:
    """Median and interquartile range of per-call times."""
    if len(samples) < 2:
        return Timing(median=samples[0] if samples else 0.0, iqr=0.0)
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return Timing(median=median, iqr=q3 - q1)


def _sample_cuda(fn: Callable[[], object], device: torch.device, min_time: float) -> list[float]:
    """CUDA events around each call, after warm-up, with L2 flushed before every call."""
    flush = torch.empty(_L2_FLUSH_BYTES, dtype=torch.int8, device=device)
    for _ in range(3):  # warm-up: caching allocator, kernel selection, lazy init
        fn()
    torch.cuda.synchronize(device)
    estimate = statistics.median(_event_times(fn, flush, 5, device))
    repeats = int(min(10_000, max(10, min_time / max(estimate, 1e-6))))
    return _event_times(fn, flush, repeats, device)


def _event_times(
    fn: Callable[[], object], flush: torch.Tensor, repeats: int, device: torch.device
) -> list[float]:
    pairs = [_event_pair() for _ in range(repeats)]
    for start, end in pairs:
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) / 1e3 for start, end in pairs]


def _event_pair() -> tuple[torch.cuda.Event, torch.cuda.Event]:
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    return start, end


#: What CUDA's sync debug mode warns for each synchronising call. The mode's first use in a
#: process also warns that it "is a prototype feature and does not yet detect all
#: synchronizing operations": that is no synchronisation, and counting every warning that
#: mentions one charged it to the first case measured.
SYNC_WARNING = "called a synchronizing CUDA operation"


def host_syncs_in(messages: Sequence[str]) -> int:
    """How many of these sync-debug-mode warnings report a synchronising call."""
    return sum(SYNC_WARNING in message for message in messages)


def count_host_syncs(fn: Callable[[], object], device: torch.device) -> int | None:
    """Host synchronisations in one call, from CUDA's sync debug mode; None off CUDA."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    previous = torch.cuda.get_sync_debug_mode()
    with torch.cuda.device(device), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    torch.cuda.synchronize(device)
    return host_syncs_in([str(w.message) for w in caught])
