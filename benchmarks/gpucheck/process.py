"""Running one child process: its own process group, a timeout, its resource usage."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: The entry point the children (``--child``) are started through.
SCRIPT = REPO / "benchmarks" / "gpu_check.py"
GIB = 2**30
MIB = 2**20


@dataclass
class CmdResult:
    """One finished (or killed) subprocess."""

    name: str
    argv: list[str]
    rc: int | None  # None: not started (no time left)
    wall_s: float
    cpu_s: float
    maxrss_bytes: int
    stdout: str
    stderr: str
    timed_out: bool
    timeout_s: float

    @property
    def completed(self) -> bool:
        return self.rc is not None and not self.timed_out

    def json_doc(self) -> tuple[Any, str | None]:
        """stdout parsed as one JSON document, or (None, why not)."""
        if not self.completed:
            return None, self.why_not()
        try:
            return json.loads(self.stdout), None
        except json.JSONDecodeError as err:
            return None, f"stdout is not one JSON document ({err})"

    def why_not(self) -> str:
        if self.rc is None:
            return "not run: out of time budget"
        if self.timed_out:
            return f"timed out after {self.timeout_s:.0f} s"
        return f"exit code {self.rc}"

    def to_json(self, *, with_output: bool = False) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "command": display(self.argv),
            "exit_code": self.rc,
            "timed_out": self.timed_out,
            "timeout_s": round(self.timeout_s, 1),
            "wall_s": round(self.wall_s, 3),
            "cpu_s": round(self.cpu_s, 3),
            "peak_rss_mib": round(self.maxrss_bytes / MIB, 1),
            "stderr_tail": tail(self.stderr, 4000),
        }
        if with_output:
            doc["stdout_tail"] = tail(self.stdout, 4000)
        return doc


def kill_group(pid: int) -> None:
    """Kill a child started with ``start_new_session`` and its own children (its group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def display(argv: Sequence[str]) -> str:
    """A command as one readable line (the interpreter shown as ``python``)."""
    parts = ["python" if a == sys.executable else a for a in argv]
    return " ".join(p if p and re.fullmatch(r"[\w@%+=:,./-]+", p) else repr(p) for p in parts)


def run_process(argv: list[str], timeout: float, env: dict[str, str], name: str = "") -> CmdResult:
    """Run ``argv`` in its own process group; kill the group after ``timeout`` seconds.

    The child's own resource usage (wall, CPU, peak RSS) comes from ``wait4``; its output goes
    to temporary files, so a chatty child can never block on a full pipe.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=REPO,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            return CmdResult(name, argv, 127, 0.0, 0.0, 0, "", str(exc), False, timeout)
        timed_out = False
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() - start > timeout:
                    timed_out = True
                    kill_group(proc.pid)
                    pid, status, usage = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.01)
        except BaseException:  # interrupted (Ctrl-C, SIGTERM): leave no child behind
            kill_group(proc.pid)
            with contextlib.suppress(ChildProcessError):
                os.wait4(proc.pid, 0)
            raise
        wall = time.perf_counter() - start
        rc = os.waitstatus_to_exitcode(status)
        proc.returncode = rc
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    return CmdResult(
        name=name,
        argv=argv,
        rc=rc,
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        maxrss_bytes=usage.ru_maxrss * 1024,  # KiB on Linux
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        timeout_s=timeout,
    )


def child_env(extra_path: Sequence[str] = ()) -> dict[str, str]:
    """The subprocesses' environment: this checkout first on PYTHONPATH, tracebacks on."""
    env = dict(os.environ)
    paths = [str(REPO), *extra_path, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["MMCLI_DEBUG"] = "1"  # an internal error shows its traceback in the log
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("CUDA_LAUNCH_BLOCKING", None)  # it would make every launch synchronous
    return env
