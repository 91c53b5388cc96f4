"""The run's budget, its log and its JSON files: what every step writes through."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .process import MIB, CmdResult, display, run_process, tail

LOG_NAME = "gpu_check.log"
DEFAULT_BUDGET_S = 450.0
MIN_STEP_S = 5.0  # a step (or command) with less time left than this is not started


TIMEOUTS: dict[str, float] = {
    "plumbing": 60,
    "pytest_cuda": 150,
    "sync_bench": 90,
    "sync_api": 90,
    "bench_standard": 180,
    "bench_large": 120,
    "check_samples": 60,
    "build_dump": 150,
    "check_1gib": 90,
    "kv_plan": 45,
    "compare": 240,
}


class Log:
    """The run's one log file; progress lines also go to stdout."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.start = time.perf_counter()
        self._file = path.open("w", encoding="utf-8") if path is not None else None

    def write(self, text: str) -> None:
        if self._file is not None:
            self._file.write(text if text.endswith("\n") else text + "\n")
            self._file.flush()

    def line(self, text: str, *, echo: bool = True) -> None:
        stamped = f"[{time.perf_counter() - self.start:7.1f}s] {text}"
        self.write(stamped)
        if echo:
            print(stamped, flush=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class Runner:
    """Runs the commands of one gpu_check run within its time budget, logging each."""

    def __init__(self, log: Log, budget_s: float, env: dict[str, str]) -> None:
        self.log = log
        self.deadline = time.perf_counter() + budget_s
        self.env = env

    def remaining(self) -> float:
        return self.deadline - time.perf_counter()

    def run(
        self, name: str, argv: list[str], timeout: float, env: dict[str, str] | None = None
    ) -> CmdResult:
        limit = min(timeout, self.remaining())
        if limit < MIN_STEP_S:
            self.log.line(f"  {name}: not run, {self.remaining():.0f} s of the budget left")
            return CmdResult(name, argv, None, 0.0, 0.0, 0, "", "", False, 0.0)
        self.log.line(f"  $ {display(argv)}", echo=False)
        result = run_process(argv, limit, env if env is not None else self.env, name)
        state = f"timed out after {limit:.0f} s" if result.timed_out else f"exit {result.rc}"
        self.log.line(
            f"  {name}: {state}, {result.wall_s:.1f} s, peak RSS "
            f"{result.maxrss_bytes / MIB:.0f} MiB"
        )
        self.log.write(f"---- {name} stdout ----\n{tail(result.stdout, 20000)}")
        self.log.write(f"---- {name} stderr ----\n{tail(result.stderr, 20000)}")
        return result


def write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
