"""The benchmark engine behind ``mmcli bench``: workloads, correctness check, copy ceiling.

Laid out like ``torch.utils.benchmark``: :mod:`~mmcli.bench.workloads` is what is timed,
:mod:`~mmcli.bench.timing` how it is timed, :mod:`~mmcli.bench.results` what was found (and its
JSON), :mod:`~mmcli.bench.run` the runner; :mod:`~mmcli.bench.options` checks a run's options.
The runner is not re-exported here: ``mmcli.bench.run`` stays the module (``run.run`` times).

Every implementation is checked bit-for-bit against the reference before it is timed. The
ceiling is a copy of a tensor the size of the op's output, on the same device in the same run:
the ops allocate and fill a new tensor, so ``clone()`` (allocate + copy) is the like-for-like
bound.
"""

from __future__ import annotations

from mmcli.bench.options import BenchOptions, parse_choices, parse_sizes
from mmcli.bench.results import BenchCase, BenchResult
from mmcli.bench.workloads import LAYOUTS, OPS, QUICK_SUITE, SUITE, Workload, make_mask

__all__ = [
    "LAYOUTS",
    "OPS",
    "QUICK_SUITE",
    "SUITE",
    "BenchCase",
    "BenchOptions",
    "BenchResult",
    "Workload",
    "make_mask",
    "parse_choices",
    "parse_sizes",
]
