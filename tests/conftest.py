"""Shared test configuration: CUDA-marked tests skip cleanly without a GPU; hypothesis
profiles; the ``measured`` fixture, which runs a process and reports its own CPU time and peak
memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


#: Runs ``argv[2:]`` and writes its exit code, CPU seconds and peak resident bytes to
#: ``argv[1]``. A process started by fork inherits its parent's peak resident memory, so a
#: command started from the test process would report the test process's peak (torch and
#: everything earlier tests built); started from this small process, it reports its own.
_LAUNCHER = """
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as f:
    code = os.waitstatus_to_exitcode(status)
    json.dump([code, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024], f)
"""


@dataclass(frozen=True)
class Usage:
    """What a measured process used: its exit code, CPU seconds (user + system), peak
    resident bytes, and the wall seconds it took (startup included)."""

    code: int
    cpu: float
    peak: int
    elapsed: float


def run_measured(
    argv: list[str], *, timeout: float = 900, **popen: Any
) -> tuple[Usage, subprocess.CompletedProcess[Any]]:
    """Run ``argv`` (``stdout``, ``stderr``, ``env``… as for ``subprocess.run``); its usage
    and the completed launcher (whose captured streams are the command's)."""
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "usage.json"
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, str(record), *argv],
            timeout=timeout,
            check=False,
            **popen,
        )
        elapsed = time.monotonic() - start
        code, cpu, peak = json.loads(record.read_text(encoding="utf-8"))
    return Usage(code, cpu, peak, elapsed), done


def run_within(
    argv: list[str], *, cpu_limit: float, stdout_path: Path | None = None, **popen: Any
) -> tuple[Usage, subprocess.CompletedProcess[Any]]:
    """:func:`run_measured`, run a second time only when the first run's CPU time was over
    ``cpu_limit``: these machines are shared, and a neighbour's burst can slow a whole run.
    A real regression is over the limit both times. ``stdout_path``, when given, receives the
    command's stdout (written afresh by each run)."""
    for attempt in range(2):
        if stdout_path is None:
            usage, done = run_measured(argv, **popen)
        else:
            with stdout_path.open("wb") as sink:
                usage, done = run_measured(argv, stdout=sink, **popen)
        if usage.cpu < cpu_limit or attempt:
            return usage, done
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.fixture
def measured() -> Callable[..., tuple[Usage, subprocess.CompletedProcess[Any]]]:
    """:func:`run_measured`."""
    return run_measured


@pytest.fixture
def measured_within() -> Callable[..., tuple[Usage, subprocess.CompletedProcess[Any]]]:
    """:func:`run_within`."""
    return run_within
