"""The process measurement the bounded-resource tests rely on (``tests/conftest.py``)."""

from __future__ import annotations

import resource
import sys
from pathlib import Path
from typing import Any


def test_the_peak_is_the_process_own(measured: Any) -> None:
    """The test process holds torch (hundreds of MiB resident); a small child started through
    the launcher reports its own peak, not that."""
    ours = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    usage, _ = measured([sys.executable, "-c", "x = bytearray(64 << 20)"])
    assert usage.code == 0
    assert 64 << 20 < usage.peak < min(ours, 200 << 20), (usage.peak, ours)
    assert usage.cpu > 0 and usage.elapsed > 0


def test_a_run_over_the_limit_runs_again(measured_within: Any, tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    out = tmp_path / "out.txt"
    script = (
        "import pathlib; p = pathlib.Path(__import__('sys').argv[1]); "
        "p.write_text(p.read_text() + 'x' if p.exists() else 'x'); print(len(p.read_text()))"
    )
    usage, _ = measured_within(
        [sys.executable, "-c", script, str(counter)], cpu_limit=0, stdout_path=out
    )
    assert counter.read_text() == "xx"  # over a limit of 0 s: run twice, no more
    assert out.read_text() == "2\n"  # the second run's output, written afresh
    assert usage.code == 0
    usage, _ = measured_within(
        [sys.executable, "-c", script, str(counter)], cpu_limit=60, stdout_path=out
    )
    assert counter.read_text() == "xxx"  # within the limit: once
