"""The bench runner: check each implementation against the reference, then time it and the
copy ceiling in interleaved rounds (the timer is :mod:`mmcli.bench.timing`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from mmcli.bench.options import BenchOptions
from mmcli.bench.results import BenchCase, BenchResult
from mmcli.bench.timing import count_host_syncs, sample, summarise
from mmcli.bench.workloads import Workload
from mmcli.embeddings import ops

#: IQR over median above which a timing is reported as noisy (torch.utils.benchmark's bar).
SPREAD_WARNING = 0.10
#: Interleaved timing rounds per case (see :func:`run`).
ROUNDS = 3


def count_steps(workloads: Sequence[Workload], options: BenchOptions) -> int:
    """How many timings :func:`run` makes (for a progress bar): the impls plus the copy."""
    return len(workloads) * len(options.op_names) * (len(options.impls) + 1) * ROUNDS


def run(
    workloads: Sequence[Workload],
    options: BenchOptions,
    *,
    on_step: Callable[[str], None] | None = None,
) -> BenchResult:
    """Check each implementation against the reference, then time it and the copy ceiling.

    The copy and the implementations of one case are timed in ``ROUNDS`` interleaved rounds
    (``min_time / ROUNDS`` each) and their samples pooled, so that a busy spell on a shared
    machine lands on all of them alike rather than on whichever ran at the time.
    ``on_step`` is called with the case's label after each timing (and each skipped one).
    """
    device, impls, threads = options.device, options.impls, options.threads
    seconds = options.min_time / ROUNDS
    result = BenchResult(
        device=str(device),
        torch_version=torch.__version__,
        threads=threads if device.type == "cpu" else None,
    )
    step = on_step or (lambda _label: None)
    for w in workloads:
        placeholders = ops.scatter_reference(w.embeds, w.is_embed)
        for op in options.op_names:
            expected = (
                placeholders if op == "scatter" else ops.gather_reference(placeholders, w.is_embed)
            )
            source = torch.empty_like(expected).normal_()
            contenders: dict[str, Callable[[], Any]] = {"copy": source.clone}
            for impl in impls:
                fn = _op_callable(op, impl, w, placeholders)
                if ops.same_bits(fn(), expected):
                    contenders[impl] = fn
                else:
                    label = w.label(op, impl)
                    result.failures.append(f"{label}: result differs from the reference")
                    for _ in range(ROUNDS):
                        step(label)
            samples: dict[str, list[float]] = {name: [] for name in contenders}
            for _ in range(ROUNDS):
                for name, fn in contenders.items():
                    samples[name] += sample(fn, device, seconds, threads=threads)
                    step(w.label(op, name))
            del source
            timings = {name: summarise(times) for name, times in samples.items()}
            copy = timings["copy"]
            if copy.spread > SPREAD_WARNING:  # every case's "of copy" figure divides by it
                # Worded as the implementations' noise is (the label names the copy), so a
                # reader and a tool see one kind of warning: this case's share of copy is
                # as unreliable as its baseline.
                result.warnings.append(
                    f"{w.label(op, 'copy')}: IQR {copy.spread:.0%} of the median (a busy "
                    "machine? rerun, or raise --min-time)"
                )
            for impl in impls:
                if impl not in timings:
                    continue
                timing = timings[impl]
                syncs = count_host_syncs(contenders[impl], device)
                result.cases.append(
                    BenchCase.measured(
                        op, impl, w, timing, timings["copy"], syncs, timings.get("reference")
                    )
                )
                if timing.spread > SPREAD_WARNING:
                    result.warnings.append(
                        f"{w.label(op, impl)}: IQR {timing.spread:.0%} of the median (a busy "
                        "machine? rerun, or raise --min-time)"
                    )
    return result


def _op_callable(op: str, impl: str, w: Workload, placeholders: torch.Tensor) -> Callable[[], Any]:
    """The call to time. ``reference`` is the engine's algorithm as it runs in the engine,
    without mmcli's input checks (which read the mask's True count back from the device)."""
    embeds, mask, rows = w.embeds, w.is_embed, w.num_embeds
    if impl == "reference":
        if op == "scatter":
            return lambda: ops.scatter_reference(embeds, mask)
        return lambda: ops.gather_reference(placeholders, mask)
    if op == "scatter":
        return lambda: ops.scatter_mm_placeholders(embeds, mask, impl="fast")
    # The row count given, as an engine has it from its placeholder range: without it a CUDA
    # gather must read the count back from the device.
    return lambda: ops.gather_mm_placeholders(placeholders, mask, impl="fast", num_embeds=rows)
