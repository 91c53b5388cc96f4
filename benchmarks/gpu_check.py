"""Prove every CUDA path of mmcli on one real GPU, in one prepared run (issue 14).

Run on a machine with one NVIDIA GPU that already has torch, typer, rich, safetensors and
pytest (nothing is installed), from the repository root::

    PYTHONPATH=. python benchmarks/gpu_check.py --out DIR      # or: make gpu-check GPU_OUT=DIR

Every step runs mmcli through its CLI (``python -m mmcli``) or its public API, each in its own
subprocess with its own timeout (a timeout is recorded as a failure and the run goes on), and
the whole run keeps within a time budget (``--budget``, 450 s: under 8 minutes):

1. ``pytest_cuda``: ``python -m pytest -m cuda`` (passed, failed, skipped, errors).
2. ``sync_bench`` and ``sync_api``: the fast scatter/gather's host synchronisations, counted by
   ``mmcli bench`` (``host_syncs``), and the public functions called under
   ``torch.cuda.set_sync_debug_mode("error")`` (with a control that the mode does catch the
   reference's sync), each result compared bit for bit with the reference.
3. ``bench_standard`` and ``bench_large``: ``mmcli bench --device cuda --format json`` on the
   standard suite (576, 2304, 9216 placeholders x hidden 4096, bf16, contiguous and
   interleaved) and on 32768 x 8192.
4. ``check_samples`` and ``check_1gib``: ``mmcli check-embeddings`` on ``samples/dumps`` and on a
   generated 1 GiB dump (64 bf16 items of (2048, 4096), as ``benchmarks/check_dump.py``), on
   CUDA beside CPU: wall time and peak host RSS of each process (``ru_maxrss``).
5. ``kv_plan``: ``mmcli kv-share plan --device cuda`` on every bundled ``samples/kv`` config.
6. ``compare``: ``benchmarks/compare.py --devices cpu,cuda``: ``mmcli compare`` on two 1 GiB
   bf16 dumps on CPU and on the device, each timed against reading both files in the same run.

Targets (``summary.json``, pass / fail / n/a): no CUDA test skipped or failing; fast scatter and
gather (gather given ``num_embeds``) at >= 70% of the same run's copy bandwidth at >= 9216 x
4096 bf16; 0 host syncs per fast call; reference and fast bit-equal on every case;
``check-embeddings --device cuda`` on the 1 GiB dump within 1.5x the CPU run's wall time; the
samples' findings the same on CUDA as on CPU; every valid KV map's aliasing verified on the
device; ``compare --device cuda`` giving the CPU's result (statuses, findings, every metric
within a relative 1e-9).

Everything lands under ``--out``: one JSON file per step, ``env.json``, ``plumbing.json``,
``summary.json`` and one log, ``gpu_check.log`` (every command, its exit code, time and
output). Before anything else the script checks its own plumbing (the output folder is
writable, the CLI and the public API import, the samples are there). Without a CUDA device it
then exits 2 with one ``error:`` line on stderr. ``--dry-run`` stops after the plumbing and
lists the steps; ``--device cpu --quick`` runs every step on CPU with tiny sizes (the
CUDA-only targets are then n/a), which checks that every command parses. Where hypothesis is
not installed (the test suite's conftest imports it), pytest runs with a small stand-in that
skips property tests (none is CUDA-marked) and the summary says so.

The parts live in ``benchmarks/gpucheck/``, one job to a module: ``cli`` (options, the run,
the report), ``harness`` (budget, per-command timeouts, the log, the JSON files), ``process``
(one child process), ``plumbing``, ``sizes``, ``plan`` (the commands), ``steps``, ``targets``
(the thresholds), ``children`` (what runs under ``--child``) and ``hypothesis_stub``.

Exit codes: 0 every step ran and no target failed; 1 a step or a target failed; 2 no CUDA
device, a plumbing problem, or bad options.
"""

from __future__ import annotations

import sys

# Run as a script, this folder is first on sys.path, so the package beside it imports by its
# bare name (``benchmarks`` is no package, and this file keeps the documented command).
from gpucheck.cli import main

if __name__ == "__main__":
    sys.exit(main())
