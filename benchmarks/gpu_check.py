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

Exit codes: 0 every step ran and no target failed; 1 a step or a target failed; 2 no CUDA
device, a plumbing problem, or bad options.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve()
LOG_NAME = "gpu_check.log"
DEFAULT_BUDGET_S = 450.0
BANDWIDTH_TARGET = 0.70
#: What CUDA's sync debug mode warns for each synchronising call (mmcli.bench.timing).
SYNC_WARNING = "called a synchronizing CUDA operation"
CHECK_TIME_RATIO = 1.5
MIN_STEP_S = 5.0  # a step (or command) with less time left than this is not started
GIB = 2**30
MIB = 2**20

# Per-command timeouts, seconds (each also capped by what is left of the budget).
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

# The fields of mmcli's JSON documents that the targets read (printed and kept in the summary).
FIELDS_USED = {
    "bench": [
        "cases[].op",
        "cases[].impl",
        "cases[].layout",
        "cases[].num_placeholders",
        "cases[].hidden",
        "cases[].dtype",
        "cases[].copy_fraction (bandwidth / the same case's copy bandwidth, same run)",
        "cases[].host_syncs (syncs in one call, from set_sync_debug_mode('warn'))",
        "failures (an impl that differs from the reference bit for bit is listed, not timed)",
        "exit_code (1: an impl disagreed)",
    ],
    "check-embeddings": [
        "files[].path",
        "files[].status",
        "files[].findings[].code/severity/item",
        "files[].timings_ms",
        "exit_code",
    ],
    "kv-share plan": ["aliasing_verified", "findings", "exit_code"],
    "pytest": ["junit xml: tests, failures, errors, skipped per testcase"],
}

HYPOTHESIS_STUB = '''"""A stand-in for hypothesis (not installed), written by gpu_check.py.

Property tests (``@given``) skip; everything else imports and runs as usual.
"""

from typing import Any

import pytest


class _Anything:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> "_Anything":
        return _Anything()

    def __getattr__(self, name: str) -> "_Anything":
        return _Anything()

    def __getitem__(self, key: Any) -> "_Anything":
        return _Anything()

    def __or__(self, other: Any) -> "_Anything":
        return _Anything()

    __ror__ = __or__


def given(*args: Any, **kwargs: Any) -> Any:
    def decorate(fn: Any) -> Any:
        def skipped() -> None:
            pytest.skip("hypothesis is not installed (gpu_check stand-in)")

        skipped.__name__ = fn.__name__
        skipped.__qualname__ = fn.__qualname__
        skipped.__module__ = fn.__module__
        skipped.pytestmark = list(getattr(fn, "pytestmark", []))  # type: ignore[attr-defined]
        return skipped

    return decorate


class settings:
    max_examples = 100
    deadline = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return _Anything()

    def __call__(self, fn: Any) -> Any:
        return fn

    @staticmethod
    def register_profile(*args: Any, **kwargs: Any) -> None:
        pass

    @staticmethod
    def load_profile(*args: Any, **kwargs: Any) -> None:
        pass

    @staticmethod
    def get_profile(*args: Any, **kwargs: Any) -> "settings":
        return settings()


def example(*args: Any, **kwargs: Any) -> Any:
    return lambda fn: fn


def assume(condition: Any) -> bool:
    return True


HealthCheck = _Anything()
Verbosity = _Anything()
Phase = _Anything()


def __getattr__(name: str) -> Any:
    return _Anything()
'''

HYPOTHESIS_STUB_STRATEGIES = '''"""Stand-in strategies (gpu_check): all inert."""

from typing import Any

from hypothesis import _Anything


def composite(fn: Any) -> Any:
    return _Anything()


def __getattr__(name: str) -> Any:
    return _Anything()
'''


# --------------------------------------------------------------------------------- sizes


@dataclass(frozen=True)
class Sizes:
    """What each step runs: the issue's sizes, or tiny ones for ``--quick``."""

    placeholders: tuple[int, ...]
    hidden: int
    large: tuple[int, int]  # (placeholders, hidden)
    min_time: float | None  # None: the bench's own default (0.2 s per case and impl)
    sync_placeholders: tuple[int, ...]
    sync_hidden: int
    sync_min_time: float
    dump_items: int
    dump_rows: int  # a multiple of 64 (a break token after every 64 rows)
    dump_hidden: int
    repeat: int  # check_1gib: runs of each command (best wall time, highest RSS)
    bandwidth_min_elements: int  # the bandwidth target covers cases of at least this size
    compare: tuple[int, int, int]  # compare: (items, rows, hidden) of each bf16 dump

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


FULL = Sizes(
    placeholders=(576, 2304, 9216),
    hidden=4096,
    large=(32768, 8192),
    min_time=None,
    sync_placeholders=(576, 2304),
    sync_hidden=4096,
    sync_min_time=0.01,
    dump_items=64,
    dump_rows=2048,
    dump_hidden=4096,
    repeat=2,
    bandwidth_min_elements=9216 * 4096,
    compare=(64, 2048, 4096),
)
QUICK = Sizes(
    placeholders=(64, 256),
    hidden=256,
    large=(1024, 512),
    min_time=0.005,
    sync_placeholders=(64,),
    sync_hidden=256,
    sync_min_time=0.005,
    dump_items=4,
    dump_rows=128,
    dump_hidden=256,
    repeat=1,
    bandwidth_min_elements=256 * 256,
    compare=(2, 64, 128),
)


# ---------------------------------------------------------------------- running commands


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


# ------------------------------------------------------------------------------ targets


@dataclass
class Target:
    """One pass/fail line of the summary."""

    name: str
    status: str  # "pass", "fail" or "n/a"
    value: Any
    threshold: str
    detail: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "value": self.value,
            "threshold": self.threshold,
            "detail": self.detail,
        }


def verdict(ok: bool, applies: bool = True) -> str:
    if not applies:
        return "n/a"
    return "pass" if ok else "fail"


@dataclass
class StepResult:
    """What a step hands to the summary: whether it ran, and its parsed figures."""

    name: str
    ok: bool
    reason: str
    wall_s: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "reason": self.reason,
            "wall_s": round(self.wall_s, 1),
            "file": f"{self.name}.json",
        }


# -------------------------------------------------------------------------------- steps


@dataclass
class Context:
    """Everything the steps share."""

    out: Path
    device: str
    sizes: Sizes
    runner: Runner
    tmp: Path
    hypothesis_stub: bool
    hypothesis_note: str

    @property
    def on_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def mmcli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "mmcli", *args]

    def write(self, name: str, doc: Any) -> None:
        write_json(self.out / f"{name}.json", doc)


def write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")


def bench_argv(ctx: Context, placeholders: Sequence[int], hidden: int, **extra: str) -> list[str]:
    argv = ctx.mmcli(
        "bench",
        "--device",
        ctx.device,
        "--dtype",
        "bf16",
        "--hidden",
        str(hidden),
        "--placeholders",
        ",".join(str(p) for p in placeholders),
    )
    for option, value in extra.items():
        argv += [f"--{option.replace('_', '-')}", value]
    return [*argv, "--format", "json"]


def plan_commands(ctx: Context) -> dict[str, list[list[str]]]:
    """The commands each step runs (what ``--dry-run`` lists)."""
    s = ctx.sizes
    timing = {} if s.min_time is None else {"min_time": str(s.min_time)}
    dump = str(ctx.tmp / "big.safetensors")
    kv = [
        ctx.mmcli(
            "kv-share", "plan", str(p.relative_to(REPO)), "--device", ctx.device,
            "--memory", "20GiB", "--format", "json",
        )
        for p in kv_samples()
    ]  # fmt: skip
    check_big = [
        ctx.mmcli("check-embeddings", dump, "--device", device, "--format", "json")
        for device in ("cpu", ctx.device)
    ]
    return {
        "pytest_cuda": [
            [
                sys.executable,
                "-m",
                "pytest",
                "-m",
                "cuda",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={ctx.tmp / 'junit.xml'}",
            ],
        ],  # fmt: skip
        "sync_bench": [
            bench_argv(
                ctx,
                s.sync_placeholders,
                s.sync_hidden,
                layout="contiguous,interleaved,random",
                impl="fast",
                min_time=str(s.sync_min_time),
            )
        ],
        "sync_api": [child_argv("sync-api", ctx.device, ctx.sizes is QUICK)],
        "bench_standard": [
            bench_argv(ctx, s.placeholders, s.hidden, layout="contiguous,interleaved", **timing)
        ],
        "bench_large": [
            bench_argv(ctx, [s.large[0]], s.large[1], layout="contiguous,interleaved", **timing)
        ],
        "check_samples": [
            ctx.mmcli("check-embeddings", "samples/dumps", "--device", device, "--format", "json")
            for device in ("cpu", ctx.device)
        ],
        "check_1gib": [
            child_argv("build-dump", ctx.device, ctx.sizes is QUICK, dump=dump),
            *baseline_commands(ctx),
            *check_big,
        ],
        "kv_plan": kv,
        "compare": [
            [
                sys.executable,
                str(REPO / "benchmarks" / "compare.py"),
                "--items",
                str(s.compare[0]),
                "--rows",
                str(s.compare[1]),
                "--hidden",
                str(s.compare[2]),
                "--devices",
                "cpu" if ctx.device == "cpu" else f"cpu,{ctx.device}",
                "--json",
                str(ctx.tmp / "compare_bench.json"),
            ]
        ],  # fmt: skip
    }


def child_argv(child: str, device: str, quick: bool, dump: str | None = None) -> list[str]:
    argv = [sys.executable, str(SCRIPT), "--child", child, "--device", device]
    if quick:
        argv.append("--quick")
    if dump is not None:
        argv += ["--dump-path", dump]
    return argv


def baseline_commands(ctx: Context) -> list[list[str]]:
    """Start-up baselines: Python + torch, and (on CUDA) a CUDA context as well."""
    base = [[sys.executable, "-c", "import torch"]]
    if ctx.on_cuda:
        code = f"import torch; torch.zeros(1, device={ctx.device!r}); torch.cuda.synchronize()"
        base.append([sys.executable, "-c", code])
    return base


def kv_samples() -> list[Path]:
    folder = REPO / "samples" / "kv"
    return sorted(p for p in folder.iterdir() if p.suffix in (".json", ".toml"))


def step_pytest(ctx: Context) -> StepResult:
    (argv,) = plan_commands(ctx)["pytest_cuda"]
    junit = ctx.tmp / "junit.xml"
    env = dict(ctx.runner.env)
    if ctx.hypothesis_stub:
        stub = ctx.tmp / "hypothesis-stub"
        (stub / "hypothesis").mkdir(parents=True, exist_ok=True)
        (stub / "hypothesis" / "__init__.py").write_text(HYPOTHESIS_STUB, encoding="utf-8")
        (stub / "hypothesis" / "strategies.py").write_text(
            HYPOTHESIS_STUB_STRATEGIES, encoding="utf-8"
        )
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(stub)])
        argv = [*argv, "-p", "no:hypothesispytest"]  # an installed hypothesis's own plugin
    result = ctx.runner.run("pytest_cuda", argv, TIMEOUTS["pytest_cuda"], env)
    counts, cases = parse_junit(junit) if junit.exists() else ({}, [])
    if not counts and result.completed:
        counts = parse_pytest_line(result.stdout)
    doc = {
        **result.to_json(with_output=True),
        "hypothesis": ctx.hypothesis_note,
        "counts": counts,
        "not_passed": [c for c in cases if c["outcome"] != "passed"],
        "passed_tests": [c["name"] for c in cases if c["outcome"] == "passed"],
    }
    ctx.write("pytest_cuda", doc)
    # pytest: 0 all passed, 1 some failed; 2-5 interrupted, internal error, usage, none collected.
    ok = result.completed and result.rc in (0, 1) and bool(counts)
    reason = "ran"
    if not ok:
        # The lines that say why: collection errors, internal errors, the final count.
        why = [
            line
            for line in result.stdout.splitlines()
            if line.startswith(("ERROR ", "INTERNALERROR> E", "E   "))
            or re.search(r"\d+ (passed|failed|skipped|errors?|deselected)|no tests ran", line)
        ]
        reason = "; ".join([result.why_not(), *why[:3], *why[-1:]][:5])
    return StepResult("pytest_cuda", ok, reason, result.wall_s, {"counts": counts, "rc": result.rc})


def parse_junit(path: Path) -> tuple[dict[str, int], list[dict[str, str]]]:
    """Counts and per-test outcomes from pytest's junit XML."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return {}, []
    cases: list[dict[str, str]] = []
    for case in root.iter("testcase"):
        outcome, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            node = case.find(kind)
            if node is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[kind]
                message = (node.get("message") or node.text or "")[:500]
                break
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        cases.append({"name": name, "outcome": outcome, "message": message})
    counts = {k: sum(c["outcome"] == k for c in cases) for k in ("passed", "failed", "skipped")}
    counts["errors"] = sum(c["outcome"] == "error" for c in cases)
    counts["tests"] = len(cases)
    return counts, cases


def parse_pytest_line(stdout: str) -> dict[str, int]:
    """Counts from pytest's last line (``3 passed, 1 skipped in 2.0s``), when no XML exists."""
    counts: dict[str, int] = {}
    for number, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", stdout):
        counts["errors" if word.startswith("error") else word] = int(number)
    return counts


def step_bench(ctx: Context, name: str) -> StepResult:
    (argv,) = plan_commands(ctx)[name]
    result = ctx.runner.run(name, argv, TIMEOUTS[name])
    doc, problem = result.json_doc()
    ctx.write(name, {**result.to_json(), "output": doc})
    ok = problem is None and result.rc in (0, 1) and isinstance(doc, dict)
    return StepResult(name, ok, problem or "ran", result.wall_s, {"doc": doc, "rc": result.rc})


def step_sync_api(ctx: Context) -> StepResult:
    (argv,) = plan_commands(ctx)["sync_api"]
    result = ctx.runner.run("sync_api", argv, TIMEOUTS["sync_api"])
    doc, problem = result.json_doc()
    ctx.write("sync_api", {**result.to_json(), "output": doc})
    ok = problem is None and result.rc == 0 and isinstance(doc, dict)
    return StepResult("sync_api", ok, problem or "ran", result.wall_s, {"doc": doc})


def step_check_samples(ctx: Context) -> StepResult:
    runs: dict[str, Any] = {}
    start = time.perf_counter()
    ok, reasons = True, []
    for argv, label in zip(plan_commands(ctx)["check_samples"], ("cpu", "device"), strict=True):
        result = ctx.runner.run(f"check_samples[{label}]", argv, TIMEOUTS["check_samples"])
        doc, problem = result.json_doc()
        runs[label] = {**result.to_json(), "output": doc}
        if problem is not None or result.rc not in (0, 1):
            ok = False
            reasons.append(f"{label}: {problem or f'exit {result.rc}'}")
    ctx.write("check_samples", {"device": ctx.device, "runs": runs})
    wall = time.perf_counter() - start
    return StepResult("check_samples", ok, "; ".join(reasons) or "ran", wall, {"runs": runs})


def step_check_1gib(ctx: Context) -> StepResult:
    build, *rest = plan_commands(ctx)["check_1gib"]
    baselines, checks = rest[: len(rest) - 2], rest[len(rest) - 2 :]
    start = time.perf_counter()
    s = ctx.sizes
    size = s.dump_items * s.dump_rows * s.dump_hidden * 2
    doc: dict[str, Any] = {
        "dump": {"items": s.dump_items, "rows": s.dump_rows, "hidden": s.dump_hidden},
        "device": ctx.device,
    }
    free = shutil.disk_usage(ctx.tmp).free
    if free < 2 * size + GIB // 4:
        reason = f"{free / GIB:.1f} GiB free in {ctx.tmp}, the dump needs {size / GIB:.2f} GiB"
        ctx.write("check_1gib", {**doc, "error": reason})
        return StepResult("check_1gib", False, reason, 0.0)
    built = ctx.runner.run("build_dump", build, TIMEOUTS["build_dump"])
    doc["build"] = built.to_json(with_output=True)
    dump = Path(build[build.index("--dump-path") + 1])
    if not built.completed or built.rc != 0 or not dump.exists():
        reason = f"building the dump: {built.why_not()}"
        ctx.write("check_1gib", {**doc, "error": reason})
        return StepResult("check_1gib", False, reason, time.perf_counter() - start)
    doc["dump"]["bytes"] = dump.stat().st_size
    labels = ["baseline_torch", "baseline_cuda"][: len(baselines)] + ["cpu", "device"]
    commands = dict(zip(labels, [*baselines, *checks], strict=True))
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    problems: list[str] = []
    try:
        # Interleaved repeats: a busy spell on the machine lands on every command alike.
        for rep in range(s.repeat):
            for label, argv in commands.items():
                result = ctx.runner.run(
                    f"check_1gib[{label} {rep + 1}]", argv, TIMEOUTS["check_1gib"]
                )
                record = result.to_json()
                if label in ("cpu", "device"):
                    out, problem = result.json_doc()
                    if problem is None and isinstance(out, dict):
                        files = out.get("files") or [{}]
                        record["status"] = files[0].get("status")
                        record["timings_ms"] = files[0].get("timings_ms")
                        record["mmcli_exit_code"] = out.get("exit_code")
                    else:
                        record["output_problem"] = problem
                if not result.completed or result.rc != 0:
                    problems.append(f"{label} run {rep + 1}: {result.why_not()}")
                runs[label].append(record)
    finally:
        dump.unlink(missing_ok=True)
    doc["runs"] = runs
    doc["best"] = best = {label: best_of(records) for label, records in runs.items()}
    doc["comparison"] = compare_checks(best, runs)
    ctx.write("check_1gib", doc)
    ok = not problems
    wall = time.perf_counter() - start
    return StepResult("check_1gib", ok, "; ".join(problems) or "ran", wall, {"doc": doc})


def compare_checks(
    best: dict[str, dict[str, Any]], runs: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """Device beside CPU: wall time, peak RSS over each one's start-up baseline, mmcli's timings."""

    def minus(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(a - b, 1)

    def in_tool_ms(label: str) -> float | None:
        sums = [sum(r["timings_ms"].values()) for r in runs[label] if r.get("timings_ms")]
        return round(min(sums), 1) if sums else None

    cpu, dev = best["cpu"], best["device"]
    base_cpu = best["baseline_torch"]
    base_dev = best.get("baseline_cuda", base_cpu)
    ratio = None
    if cpu["wall_s"] and dev["wall_s"] is not None:
        ratio = round(dev["wall_s"] / cpu["wall_s"], 3)
    return {
        "wall_s": {"cpu": cpu["wall_s"], "device": dev["wall_s"], "ratio": ratio},
        "peak_rss_mib": {"cpu": cpu["peak_rss_mib"], "device": dev["peak_rss_mib"]},
        "peak_rss_over_baseline_mib": {
            "cpu": minus(cpu["peak_rss_mib"], base_cpu["peak_rss_mib"]),
            "device": minus(dev["peak_rss_mib"], base_dev["peak_rss_mib"]),
        },
        "startup_baseline_wall_s": {"cpu": base_cpu["wall_s"], "device": base_dev["wall_s"]},
        "mmcli_timings_ms_sum": {"cpu": in_tool_ms("cpu"), "device": in_tool_ms("device")},
    }


def best_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Lowest wall time (other load only ever adds time) and highest peak RSS of the runs."""
    done = [r for r in records if r["exit_code"] == 0 and not r["timed_out"]]
    if not done:
        return {"wall_s": None, "peak_rss_mib": None, "runs": len(records)}
    return {
        "wall_s": min(r["wall_s"] for r in done),
        "peak_rss_mib": max(r["peak_rss_mib"] for r in done),
        "runs": len(done),
    }


def step_kv(ctx: Context) -> StepResult:
    start = time.perf_counter()
    runs: dict[str, Any] = {}
    problems: list[str] = []
    for argv, path in zip(plan_commands(ctx)["kv_plan"], kv_samples(), strict=True):
        result = ctx.runner.run(f"kv_plan[{path.name}]", argv, TIMEOUTS["kv_plan"])
        doc, problem = result.json_doc()
        runs[path.name] = {
            **result.to_json(),
            "expected_exit_code": 1 if "broken" in path.stem else 0,
            "output": doc,
        }
        if problem is not None or result.rc not in (0, 1):
            problems.append(f"{path.name}: {problem or f'exit {result.rc}'}")
    ctx.write("kv_plan", {"device": ctx.device, "runs": runs})
    wall = time.perf_counter() - start
    return StepResult("kv_plan", not problems, "; ".join(problems) or "ran", wall, {"runs": runs})


# ---------------------------------------------------------------------- target checks


def step_compare(ctx: Context) -> StepResult:
    """benchmarks/compare.py: two bf16 dumps compared on CPU and on the device (same result?),
    each timed against reading both files in the same run."""
    (argv,) = plan_commands(ctx)["compare"]
    result = ctx.runner.run("compare", argv, TIMEOUTS["compare"])
    path = ctx.tmp / "compare_bench.json"
    doc: Any = None
    with contextlib.suppress(OSError, ValueError):
        doc = json.loads(path.read_text())
    ctx.write("compare", {**result.to_json(), "output": doc})
    ok = isinstance(doc, dict) and result.rc in (0, 1)
    reason = "ran" if ok else f"exit {result.rc}, no figures written"
    return StepResult("compare", ok, reason, result.wall_s, {"doc": doc})


def target_compare(steps: dict[str, StepResult], device: str, on_cuda: bool) -> Target:
    step = steps["compare"]
    doc = step.data.get("doc")
    runs = doc.get("compare", {}) if isinstance(doc, dict) else {}
    mine = runs.get(device, {})
    detail = [] if step.ok else [f"compare: {step.reason}"]
    for name, run in runs.items():
        detail.append(
            f"{name}: wall {run.get('wall_s')} s = {run.get('time_ratio_load_file')}x load_file, "
            f"{run.get('rss_over_baseline_mib')} MiB over the baseline"
        )
    detail += [f"differs: {line}" for line in mine.get("differences", [])]
    ok = step.ok and mine.get("equal_to_first_device") is True and mine.get("exit_code") == 0
    return Target(
        "compare --device cuda gives the CPU's result",
        verdict(ok, on_cuda),
        mine.get("largest_relative_difference"),
        "same statuses and findings, every metric within a relative 1e-9 of the CPU run",
        detail,
    )


def bench_cases(steps: dict[str, StepResult], *names: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for name in names:
        doc = steps[name].data.get("doc") if name in steps else None
        if isinstance(doc, dict):
            cases += [c for c in doc.get("cases", []) if isinstance(c, dict)]
    return cases


def target_tests(steps: dict[str, StepResult], on_cuda: bool) -> Target:
    step = steps["pytest_cuda"]
    counts: dict[str, int] = step.data.get("counts", {})
    passed, failed = counts.get("passed", 0), counts.get("failed", 0)
    skipped, errors = counts.get("skipped", 0), counts.get("errors", 0)
    ok = step.ok and step.data.get("rc") == 0 and passed > 0 and failed + skipped + errors == 0
    detail = [] if step.ok else [f"pytest: {step.reason}"]
    return Target(
        "no CUDA test skipped or failing",
        verdict(ok, on_cuda),
        counts,
        "passed > 0, failed = skipped = errors = 0",
        detail,
    )


def target_bandwidth(steps: dict[str, StepResult], sizes: Sizes, on_cuda: bool) -> Target:
    detail: list[str] = []
    worst: dict[str, float] = {}
    for case in bench_cases(steps, "bench_standard", "bench_large"):
        big = (
            case.get("num_placeholders", 0) * case.get("hidden", 0) >= sizes.bandwidth_min_elements
        )
        if case.get("impl") != "fast" or case.get("dtype") != "bfloat16" or not big:
            continue
        fraction = float(case.get("copy_fraction") or 0.0)
        op = str(case.get("op"))
        worst[op] = min(worst.get(op, fraction), fraction)
        mark = "ok" if fraction >= BANDWIDTH_TARGET else "LOW"
        detail.append(
            f"{op} {case.get('layout')} {case.get('num_placeholders')}x{case.get('hidden')}: "
            f"{fraction:.0%} of copy ({mark})"
        )
    ok = set(worst) == {"scatter", "gather"} and all(v >= BANDWIDTH_TARGET for v in worst.values())
    if set(worst) != {"scatter", "gather"}:
        detail.append(f"no qualifying fast case for: {sorted({'scatter', 'gather'} - set(worst))}")
    return Target(
        "fast scatter/gather >= 70% of copy bandwidth",
        verdict(ok, on_cuda),
        {op: round(v, 4) for op, v in worst.items()},
        f">= {BANDWIDTH_TARGET:.0%} (cases[].copy_fraction, fast, bf16, placeholders x hidden "
        f">= {sizes.bandwidth_min_elements})",
        detail,
    )


def target_syncs(steps: dict[str, StepResult], on_cuda: bool) -> Target:
    detail: list[str] = []
    fast = [
        c
        for c in bench_cases(steps, "sync_bench", "bench_standard", "bench_large")
        if c.get("impl") == "fast"
    ]
    counts = [c.get("host_syncs") for c in fast]
    bad = [c for c in fast if c.get("host_syncs") != 0]
    for c in bad:
        detail.append(
            f"{c.get('op')} {c.get('layout')} {c.get('num_placeholders')}x{c.get('hidden')}: "
            f"host_syncs {c.get('host_syncs')}"
        )
    ref = [
        c.get("host_syncs")
        for c in bench_cases(steps, "bench_standard")
        if c.get("impl") == "reference"
    ]
    detail.append(f"reference host_syncs seen (for contrast): {sorted(set(map(str, ref)))}")
    for name in ("sync_bench", "bench_standard", "bench_large"):
        if name in steps and not steps[name].ok:
            detail.append(f"{name}: {steps[name].reason}")
    ok = bool(fast) and not bad and all(steps[n].ok for n in ("sync_bench", "bench_standard"))
    return Target(
        "0 host syncs per fast call (bench)",
        verdict(ok, on_cuda),
        {
            "fast_cases": len(fast),
            "max_host_syncs": max((x for x in counts if x is not None), default=None),
        },
        "every fast case's cases[].host_syncs == 0",
        detail,
    )


def target_sync_api(steps: dict[str, StepResult], on_cuda: bool) -> Target:
    step = steps["sync_api"]
    doc = step.data.get("doc") if isinstance(step.data.get("doc"), dict) else {}
    cases = doc.get("cases", []) if doc else []
    errors = [c for c in cases if c.get("sync_error")]
    detail = [f"{c['name']}: {c['sync_error']}" for c in errors][:20]
    control = doc.get("control_reference_raises") if doc else None
    if on_cuda and control is not True:
        detail.append("control: the reference did not raise under 'error' (is the mode active?)")
    detail.append(
        f"gather without num_embeds: {doc.get('gather_without_count_syncs') if doc else None} "
        "sync(s) (documented: 1)"
    )
    if not step.ok:
        detail.append(f"sync_api: {step.reason}")
    ok = step.ok and bool(cases) and not errors and control is True
    return Target(
        "public fast API sync-free under set_sync_debug_mode('error')",
        verdict(ok, on_cuda),
        {"cases": len(cases), "sync_errors": len(errors), "control_reference_raises": control},
        "no RuntimeError from the sync debug mode; the reference does raise",
        detail,
    )


def target_bit_equal(steps: dict[str, StepResult], sizes: Sizes) -> Target:
    detail: list[str] = []
    expected = {
        "bench_standard": {
            (op, impl, layout, p)
            for op in ("scatter", "gather")
            for impl in ("reference", "fast")
            for layout in ("contiguous", "interleaved")
            for p in sizes.placeholders
        },
        "bench_large": {
            (op, impl, layout, sizes.large[0])
            for op in ("scatter", "gather")
            for impl in ("reference", "fast")
            for layout in ("contiguous", "interleaved")
        },
        "sync_bench": {
            (op, "fast", layout, p)
            for op in ("scatter", "gather")
            for layout in ("contiguous", "interleaved", "random")
            for p in sizes.sync_placeholders
        },
    }
    ok = True
    checked = 0
    for name, want in expected.items():
        step = steps.get(name)
        doc = step.data.get("doc") if step else None
        if not isinstance(doc, dict):
            ok = False
            detail.append(f"{name}: no bench JSON ({step.reason if step else 'not run'})")
            continue
        failures = doc.get("failures", [])
        have = {
            (c.get("op"), c.get("impl"), c.get("layout"), c.get("num_placeholders"))
            for c in doc.get("cases", [])
        }
        missing = want - have
        checked += len(want & have)
        if failures or doc.get("exit_code") != 0 or missing:
            ok = False
            detail += [f"{name}: {f}" for f in failures]
            detail += [f"{name}: case missing {m}" for m in sorted(missing, key=str)]
            if doc.get("exit_code") != 0:
                detail.append(f"{name}: exit_code {doc.get('exit_code')}")
    api = steps["sync_api"].data.get("doc")
    api_cases = api.get("cases", []) if isinstance(api, dict) else []
    unequal = [c["name"] for c in api_cases if c.get("bit_equal") is not True]
    if not api_cases or unequal:
        ok = False
        detail.append(
            f"sync_api: not bit-equal: {unequal[:10]}" if api_cases else "sync_api: no cases"
        )
    return Target(
        "reference and fast bit-equal on every case",
        verdict(ok),
        {"bench_cases": checked, "api_cases": len(api_cases)},
        "bench failures == [] and exit_code 0 with every case present; api results same bits",
        detail,
    )


def target_check_time(steps: dict[str, StepResult], on_cuda: bool) -> Target:
    step = steps["check_1gib"]
    doc = step.data.get("doc")
    comparison = doc.get("comparison", {}) if isinstance(doc, dict) else {}
    ratio = comparison.get("wall_s", {}).get("ratio")
    detail = [] if step.ok else [f"check_1gib: {step.reason}"]
    detail += [f"{key}: {value}" for key, value in comparison.items()]
    ok = step.ok and ratio is not None and ratio <= CHECK_TIME_RATIO
    return Target(
        "check-embeddings --device cuda on the 1 GiB dump <= 1.5x the CPU time",
        verdict(ok, on_cuda),
        ratio,
        f"best wall time ratio device / cpu <= {CHECK_TIME_RATIO} (each its own process)",
        detail,
    )


def findings_key(doc: Any) -> dict[str, Any]:
    """Per file: status and the findings' (code, severity, item), for a device comparison."""
    if not isinstance(doc, dict):
        return {}
    out: dict[str, Any] = {}
    for f in doc.get("files", []):
        found = sorted(
            (str(x.get("code")), str(x.get("severity")), str(x.get("item")))
            for x in f.get("findings", [])
        )
        out[str(f.get("path"))] = [f.get("status"), found]
    return out


def target_samples(steps: dict[str, StepResult]) -> Target:
    runs = steps["check_samples"].data.get("runs", {})
    cpu = findings_key((runs.get("cpu") or {}).get("output"))
    dev = findings_key((runs.get("device") or {}).get("output"))
    detail = [
        f"{path}: cpu {cpu.get(path)} vs device {dev.get(path)}"
        for path in sorted(set(cpu) | set(dev))
        if cpu.get(path) != dev.get(path)
    ]
    codes = [(runs.get(k) or {}).get("exit_code") for k in ("cpu", "device")]
    ok = steps["check_samples"].ok and bool(cpu) and cpu == dev and codes[0] == codes[1]
    if not steps["check_samples"].ok:
        detail.append(steps["check_samples"].reason)
    return Target(
        "check-embeddings samples: same findings on the device as on CPU",
        verdict(ok),
        {"files": len(dev), "exit_codes": codes},
        "per file: status and (code, severity, item) of every finding equal",
        detail,
    )


def target_kv(steps: dict[str, StepResult]) -> Target:
    runs: dict[str, Any] = steps["kv_plan"].data.get("runs", {})
    detail: list[str] = []
    verified = 0
    for name, run in runs.items():
        doc = run.get("output")
        want = run["expected_exit_code"]
        if run.get("exit_code") != want:
            detail.append(f"{name}: exit {run.get('exit_code')}, expected {want}")
            continue
        if want == 0:
            if isinstance(doc, dict) and doc.get("aliasing_verified") is True:
                verified += 1
            else:
                aliasing = doc.get("aliasing_verified") if isinstance(doc, dict) else None
                detail.append(f"{name}: aliasing_verified {aliasing}")
    ok = bool(runs) and not detail
    return Target(
        "kv-share plan: aliasing verified on the device",
        verdict(ok),
        {"configs": len(runs), "verified": verified},
        "valid maps exit 0 with aliasing_verified true; broken-map exits 1",
        detail,
    )


# ----------------------------------------------------------------------- plumbing


@dataclass
class Plumbing:
    checks: dict[str, Any] = field(default_factory=dict)
    fatal: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


REQUIRED_MODULES = ("torch", "typer", "rich", "safetensors", "pytest")


def check_plumbing(out: Path, env: dict[str, str], runner: Runner | None) -> Plumbing:
    """The script's own preconditions: output folder, modules, CLI and API, samples."""
    p = Plumbing()
    probe = out / ".gpu_check-write-probe"
    try:
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
        p.checks["out_dir_writable"] = True
    except OSError as err:
        p.checks["out_dir_writable"] = False
        p.fatal.append(f"output folder {out} is not writable ({err})")
    modules = {m: importlib.util.find_spec(m) is not None for m in (*REQUIRED_MODULES, "numpy")}
    modules["hypothesis"] = importlib.util.find_spec("hypothesis") is not None
    p.checks["modules"] = modules
    missing = [m for m in REQUIRED_MODULES if not modules[m]]
    if missing:
        p.fatal.append(f"missing Python modules: {', '.join(missing)}")
    if not modules["numpy"]:
        p.warnings.append("numpy is not installed: mmcli's fast path and dump reader need it")
    if not modules["hypothesis"]:
        p.warnings.append("hypothesis is not installed: pytest runs with a stand-in")
    dumps = sorted((REPO / "samples" / "dumps").glob("*.safetensors"))
    kv = kv_samples() if (REPO / "samples" / "kv").is_dir() else []
    p.checks["samples"] = {
        "dumps": [d.name for d in dumps],
        "kv": [k.name for k in kv],
        "tests": (REPO / "tests").is_dir(),
    }
    if not dumps:
        p.fatal.append("no samples/dumps/*.safetensors")
    if not kv:
        p.fatal.append("no samples/kv/*.json or *.toml")
    if not (REPO / "tests").is_dir():
        p.fatal.append("no tests/ folder")
    probe_code = (
        "import json, mmcli\n"
        "names = ['scatter_mm_placeholders', 'gather_mm_placeholders', 'dump_encoder_outputs']\n"
        "missing = [n for n in names if not callable(getattr(mmcli, n, None))]\n"
        "print(json.dumps({'version': mmcli.__version__, 'file': mmcli.__file__,"
        " 'missing': missing}))\n"
    )
    commands = {
        "cli": [sys.executable, "-m", "mmcli", "--version"],
        "api": [sys.executable, "-c", probe_code],
    }
    what = {"cli": "`python -m mmcli --version`", "api": "`import mmcli` (its public API)"}
    for label, argv in commands.items():
        if runner is not None:
            result = runner.run(f"plumbing[{label}]", argv, TIMEOUTS["plumbing"])
        else:
            result = run_process(argv, TIMEOUTS["plumbing"], env, f"plumbing[{label}]")
        p.checks[label] = {**result.to_json(with_output=True)}
        if not result.completed or result.rc != 0:
            first = (result.stderr.strip().splitlines() or [result.why_not()])[-1]
            p.fatal.append(f"{what[label]} failed: {first}")
            continue
        if label == "api":
            try:
                info = json.loads(result.stdout)
            except json.JSONDecodeError:
                p.fatal.append("the public API probe printed no JSON")
                continue
            p.checks["mmcli"] = info
            if info["missing"]:
                p.fatal.append(f"mmcli lacks public names: {', '.join(info['missing'])}")
            if not Path(info["file"]).resolve().is_relative_to(REPO):
                p.warnings.append(f"mmcli imports from {info['file']}, not from {REPO}")
    return p


# ---------------------------------------------------------------------------- env


def environment(device: str) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {
        "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "device": device,
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(device))
        env["gpu"] = {
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / GIB, 1),
            "multiprocessors": props.multi_processor_count,
            "device_count": torch.cuda.device_count(),
        }
        smi = shutil.which("nvidia-smi")
        if smi:
            query = "--query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit"
            result = run_process([smi, query, "--format=csv,noheader"], 20, dict(os.environ))
            env["nvidia_smi"] = result.stdout.strip() or result.stderr.strip()
    git = run_process(["git", "rev-parse", "HEAD"], 10, dict(os.environ))
    env["git_commit"] = git.stdout.strip() if git.rc == 0 else None
    return env


def child_env(extra_path: Sequence[str] = ()) -> dict[str, str]:
    """The subprocesses' environment: this checkout first on PYTHONPATH, tracebacks on."""
    env = dict(os.environ)
    paths = [str(REPO), *extra_path, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["MMCLI_DEBUG"] = "1"  # an internal error shows its traceback in the log
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("CUDA_LAUNCH_BLOCKING", None)  # it would make every launch synchronous
    return env


# ------------------------------------------------------------------- child: sync api


def grid(rows: int, cols: int) -> list[bool]:
    """Interleaved: ``rows`` runs of ``cols`` embeddings, each followed by a break token."""
    return ([True] * cols + [False]) * rows


def child_sync_api(device: str, quick: bool) -> int:
    """Call the public fast scatter/gather under ``set_sync_debug_mode("error")``; print JSON."""
    import random

    import torch

    import mmcli

    dev = torch.device(device)
    cuda = dev.type == "cuda"
    rng = random.Random(0)
    masks: dict[str, list[bool]] = {
        "empty": [],
        "all-false-9": [False] * 9,
        "all-true-9": [True] * 9,
        "pattern-35": [True, False, True, True, False] * 7,
        "interleaved-576": grid(24, 23),
        "tail-break-2304": [True] * 2303 + [False],
        "random90-2304": [rng.random() < 0.9 for _ in range(2304)],
    }
    if not quick:
        masks["interleaved-9216"] = grid(96, 95)
        masks["contiguous-9216"] = [False] + [True] * 9214 + [False]
    hiddens = (64, 130) if quick else (4096, 130)
    dtypes = (torch.bfloat16, torch.float16, torch.float32)

    @contextlib.contextmanager
    def sync_mode(mode: str) -> Iterator[None]:
        if not cuda:
            yield
            return
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode(mode)
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode(previous)

    def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.numel() == 0:
            return True
        wa = a.contiguous().reshape(-1).view(torch.uint8)
        wb = b.contiguous().reshape(-1).view(torch.uint8)
        return bool(torch.equal(wa, wb))

    def synchronize() -> None:
        if cuda:
            torch.cuda.synchronize(dev)

    cases: list[dict[str, Any]] = []
    seed = 0
    for mask_name, mask in masks.items():
        for hidden in hiddens:
            for dtype in dtypes:
                seed += 1
                name = f"{mask_name} x {hidden} {str(dtype).removeprefix('torch.')}"
                case: dict[str, Any] = {"name": name, "sync_error": None, "bit_equal": None}
                try:
                    gen = torch.Generator().manual_seed(seed)
                    n = sum(mask)
                    is_embed = torch.tensor(mask, dtype=torch.bool).to(dev)
                    embeds = torch.randn(n, hidden, generator=gen).to(dtype).to(dev)
                    placeholders = torch.randn(len(mask), hidden, generator=gen).to(dtype).to(dev)
                    synchronize()
                    try:
                        with sync_mode("error"):
                            scattered = mmcli.scatter_mm_placeholders(embeds, is_embed, impl="fast")
                            gathered = mmcli.gather_mm_placeholders(
                                placeholders, is_embed, impl="fast", num_embeds=n
                            )
                            roundtrip = mmcli.gather_mm_placeholders(
                                scattered, is_embed, impl="fast", num_embeds=n
                            )
                    except RuntimeError as err:
                        case["sync_error"] = str(err).splitlines()[0][:300]
                        cases.append(case)
                        continue
                    synchronize()
                    ref_scattered = mmcli.scatter_mm_placeholders(embeds, is_embed)
                    ref_gathered = mmcli.gather_mm_placeholders(placeholders, is_embed)
                    case["bit_equal"] = (
                        same_bits(scattered, ref_scattered)
                        and same_bits(gathered, ref_gathered)
                        and same_bits(roundtrip, embeds)
                    )
                except Exception as err:  # recorded, and the other cases still run
                    case["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
                    case["bit_equal"] = False
                cases.append(case)
    doc: dict[str, Any] = {
        "device": str(dev),
        "torch": torch.__version__,
        "sync_debug_mode": "error" if cuda else "n/a (cpu)",
        "cases": cases,
        "control_reference_raises": None,
        "gather_without_count_syncs": None,
    }
    if cuda:
        # Control: the reference reads the mask (nonzero): the mode must catch that.
        mask_t = torch.tensor(grid(4, 5), dtype=torch.bool, device=dev)
        rows = torch.randn(20, 8, device=dev)
        synchronize()
        try:
            with sync_mode("error"):
                mmcli.scatter_mm_placeholders(rows, mask_t)
            doc["control_reference_raises"] = False
        except RuntimeError:
            doc["control_reference_raises"] = True
        synchronize()
        placeholders_t = torch.randn(24, 8, device=dev)
        synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with sync_mode("warn"):
                mmcli.gather_mm_placeholders(placeholders_t, mask_t, impl="fast")
        synchronize()
        doc["gather_without_count_syncs"] = sum(SYNC_WARNING in str(w.message) for w in caught)
    print(json.dumps(doc))
    return 0


def child_build_dump(path: Path, quick: bool) -> int:
    """Write the big dump with the public API: each item (rows, hidden) bf16, break every 64."""
    import torch

    import mmcli

    s = QUICK if quick else FULL
    gen = torch.Generator().manual_seed(0)
    embeds = [
        torch.randn(s.dump_rows, s.dump_hidden, generator=gen, dtype=torch.bfloat16)
        for _ in range(s.dump_items)
    ]
    breaks = (s.dump_rows + 63) // 64
    mask = torch.ones(s.dump_rows + breaks, dtype=torch.bool)
    mask[64::65] = False
    if int(mask.sum()) != s.dump_rows:
        raise SystemExit(f"mask has {int(mask.sum())} True positions, not {s.dump_rows}")
    path.parent.mkdir(parents=True, exist_ok=True)
    mmcli.dump_encoder_outputs(
        path,
        embeds,
        is_embed=[mask] * s.dump_items,
        expected_num_items=s.dump_items,
        hidden_size=s.dump_hidden,
        dtype=torch.bfloat16,
        model="gpu_check",
    )
    print(json.dumps({"path": str(path), "bytes": path.stat().st_size}))
    return 0


# ---------------------------------------------------------------------------- main


STEPS: list[tuple[str, str, Callable[[Context], StepResult]]] = [
    ("pytest_cuda", "pytest -m cuda", step_pytest),
    (
        "sync_bench",
        "host syncs per fast call, from mmcli bench",
        lambda c: step_bench(c, "sync_bench"),
    ),
    ("sync_api", "public fast API under set_sync_debug_mode('error')", step_sync_api),
    (
        "bench_standard",
        "mmcli bench, the standard suite",
        lambda c: step_bench(c, "bench_standard"),
    ),
    ("bench_large", "mmcli bench, 32768 x 8192", lambda c: step_bench(c, "bench_large")),
    ("check_samples", "check-embeddings on samples/dumps, cpu and device", step_check_samples),
    ("check_1gib", "check-embeddings on a generated 1 GiB dump, cpu and device", step_check_1gib),
    ("kv_plan", "kv-share plan on samples/kv", step_kv),
    ("compare", "mmcli compare on two bf16 dumps, cpu and device, timed", step_compare),
]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        epilog="Exit codes: 0 all passed; 1 a step or target failed; 2 no CUDA device, "
        "a plumbing problem or bad options.",
    )
    parser.add_argument("--out", type=Path, help="folder for the JSON files and the log")
    parser.add_argument(
        "--device", default="cuda", help="cuda, cuda:N, or cpu (every step on CPU; default cuda)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for a CPU check)")
    parser.add_argument(
        "--dry-run", action="store_true", help="check the plumbing, list the steps, run nothing"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET_S,
        help=f"seconds for the whole run (default {DEFAULT_BUDGET_S:.0f})",
    )
    parser.add_argument(
        "--only", default=None, help="comma-separated step names to run (default: all)"
    )
    parser.add_argument(
        "--tmp-dir", type=Path, default=None, help="where the 1 GiB dump is written (removed after)"
    )
    parser.add_argument(
        "--hypothesis-stub",
        action="store_true",
        help="run pytest with the hypothesis stand-in even where hypothesis is installed",
    )
    parser.add_argument("--child", choices=("sync-api", "build-dump"), help=argparse.SUPPRESS)
    parser.add_argument("--dump-path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is None and args.out is None:
        parser.error("--out DIR is required")
    if not re.fullmatch(r"cpu|cuda(:\d+)?", args.device):
        parser.error(f"--device must be cuda, cuda:N or cpu, not {args.device!r}")
    names = [name for name, _, _ in STEPS]
    if args.only is not None:
        unknown = set(args.only.split(",")) - set(names)
        if unknown:
            parser.error(f"unknown step(s) {sorted(unknown)}; steps: {', '.join(names)}")
    return args


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM (a timeout around the whole run) unwinds like Ctrl-C: the running child is killed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.child == "sync-api":
        return child_sync_api(args.device, args.quick)
    if args.child == "build-dump":
        if args.dump_path is None:
            return fail("--child build-dump needs --dump-path")
        return child_build_dump(args.dump_path, args.quick)

    out: Path = args.out.resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
        log = Log(out / LOG_NAME)
    except OSError as err:
        return fail(f"cannot write to {out}: {err}")
    try:
        return run_all(args, out, log)
    finally:
        log.close()


def run_all(args: argparse.Namespace, out: Path, log: Log) -> int:
    sizes = QUICK if args.quick else FULL
    env = child_env()
    runner = Runner(log, args.budget, env)
    log.line(
        f"gpu_check: out {out}, device {args.device}, {'quick' if args.quick else 'full'} sizes"
    )

    log.line("plumbing")
    plumbing = check_plumbing(out, env, runner)
    cuda_available = False
    if not plumbing.fatal:  # torch is there
        with warnings.catch_warnings(record=True) as caught:  # e.g. torch without numpy
            warnings.simplefilter("always")
            import torch

            cuda_available = torch.cuda.is_available()
        for w in caught:
            log.line(f"  warning from torch: {w.message}", echo=False)
        plumbing.checks["torch"] = torch.__version__
        plumbing.checks["cuda_available"] = cuda_available
    for warning in plumbing.warnings:
        log.line(f"  warning: {warning}")
    write_json(
        out / "plumbing.json",
        {"ok": not plumbing.fatal, "problems": plumbing.fatal, "warnings": plumbing.warnings,
         **plumbing.checks},
    )  # fmt: skip
    if plumbing.fatal:
        for problem in plumbing.fatal:
            log.line(f"  problem: {problem}", echo=False)
        summary = {"result": "plumbing", "problems": plumbing.fatal, "exit_code": 2}
        write_json(out / "summary.json", summary)
        more = f" (and {len(plumbing.fatal) - 1} more)" if len(plumbing.fatal) > 1 else ""
        return fail(f"plumbing: {plumbing.fatal[0]}{more}; see {out / 'plumbing.json'}")
    log.line("  plumbing ok")

    installed = bool(plumbing.checks["modules"]["hypothesis"])
    tmp = Path(tempfile.mkdtemp(prefix="gpu-check-", dir=args.tmp_dir))
    try:
        ctx = Context(
            out=out,
            device=args.device,
            sizes=sizes,
            runner=runner,
            tmp=tmp,
            hypothesis_stub=not installed or args.hypothesis_stub,
            hypothesis_note=(
                "stand-in (hypothesis not installed)"
                if not installed
                else "stand-in (forced by --hypothesis-stub)"
                if args.hypothesis_stub
                else "installed"
            ),
        )
        selected = set(args.only.split(",")) if args.only else {name for name, _, _ in STEPS}
        commands = plan_commands(ctx)
        if args.dry_run:
            plan = {
                name: {"what": what, "commands": [display(c) for c in commands[name]]}
                for name, what, _ in STEPS
                if name in selected
            }
            plan_doc = {
                "device": args.device,
                "sizes": sizes.to_json(),
                "cuda_available": cuda_available,
                "steps": plan,
            }
            write_json(out / "plan.json", plan_doc)
            print(
                f"dry run: plumbing ok; CUDA {'available' if cuda_available else 'not available'}"
            )
            print(
                f"steps it would run on {args.device} ({'quick' if args.quick else 'full'} sizes):"
            )
            for name, step in plan.items():
                print(f"  {name}: {step['what']}")
                for command in step["commands"]:
                    print(f"      {command}")
            return 0
        if args.device.startswith("cuda") and not cuda_available:
            write_json(
                out / "summary.json",
                {"result": "no-cuda", "torch": torch.__version__, "exit_code": 2},
            )
            log.line(f"no CUDA device (torch {torch.__version__})", echo=False)
            return fail(
                f"no CUDA device: gpu_check needs one (torch {torch.__version__} sees none); "
                f"plumbing ok, see {out / 'plumbing.json'}"
            )
        return run_steps(ctx, selected, log)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_steps(ctx: Context, selected: set[str], log: Log) -> int:
    started = time.perf_counter()
    try:
        env_doc = environment(ctx.device)
    except Exception as err:  # the run is worth more than its description
        env_doc = {"error": f"{type(err).__name__}: {err}", "torch": None, "torch_cuda": None}
        env_doc["date_utc"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    env_doc["hypothesis"] = ctx.hypothesis_note
    ctx.write("env", env_doc)
    gpu = env_doc.get("gpu", {}).get("name", "no GPU")
    log.line(f"torch {env_doc['torch']} (CUDA {env_doc['torch_cuda']}), {ctx.device}: {gpu}")
    steps: dict[str, StepResult] = {}
    for name, what, fn in STEPS:
        if name not in selected:
            continue
        log.line(f"{name}: {what}")
        try:
            result = fn(ctx)
        except Exception as err:  # a bug in this script: record it, run the other steps
            log.line(f"  {name}: script error {type(err).__name__}: {err}")
            result = StepResult(name, False, f"gpu_check error: {type(err).__name__}: {err}", 0.0)
        steps[name] = result
        log.line(
            f"  {name}: {'ok' if result.ok else 'FAILED: ' + result.reason} ({result.wall_s:.1f} s)"
        )
    for name, _, _ in STEPS:
        steps.setdefault(name, StepResult(name, False, "not selected (--only)", 0.0))

    cuda = ctx.on_cuda
    targets = [
        target_tests(steps, cuda),
        target_syncs(steps, cuda),
        target_sync_api(steps, cuda),
        target_bandwidth(steps, ctx.sizes, cuda),
        target_bit_equal(steps, ctx.sizes),
        target_check_time(steps, cuda),
        target_samples(steps),
        target_kv(steps),
        target_compare(steps, ctx.device, cuda),
    ]
    ran = {n: s for n, s in steps.items() if n in selected}
    passed = all(s.ok for s in ran.values()) and not any(
        t.status == "fail" for t in targets if relevant(t, selected)
    )
    summary = {
        "result": "pass" if passed else "fail",
        "exit_code": 0 if passed else 1,
        "date_utc": env_doc["date_utc"],
        "device": ctx.device,
        "gpu": env_doc.get("gpu"),
        "torch": env_doc["torch"],
        "sizes": "quick" if ctx.sizes is QUICK else "full",
        "elapsed_s": round(time.perf_counter() - started, 1),
        "hypothesis": env_doc["hypothesis"],
        "steps": {n: s.to_json() for n, s in ran.items()},
        "targets": {t.name: t.to_json() for t in targets if relevant(t, selected)},
        "fields_used": FIELDS_USED,
    }
    ctx.write("summary", summary)
    log.line("targets:")
    for t in targets:
        if relevant(t, selected):
            log.line(f"  {t.status.upper():4}  {t.name}: {json.dumps(t.value)} ({t.threshold})")
            for line in t.detail[:12] if t.status != "n/a" else []:
                log.line(f"          {line}")
    log.line("fields used from mmcli's JSON:")
    for command, fields in FIELDS_USED.items():
        log.line(f"  {command}: {', '.join(fields)}")
    log.line(f"result: {summary['result']} ({summary['elapsed_s']} s); {ctx.out / 'summary.json'}")
    return int(summary["exit_code"])


TARGET_STEPS = {
    "no CUDA test skipped or failing": {"pytest_cuda"},
    "0 host syncs per fast call (bench)": {"sync_bench", "bench_standard"},
    "public fast API sync-free under set_sync_debug_mode('error')": {"sync_api"},
    "fast scatter/gather >= 70% of copy bandwidth": {"bench_standard", "bench_large"},
    "reference and fast bit-equal on every case": {
        "sync_bench",
        "bench_standard",
        "bench_large",
        "sync_api",
    },
    "check-embeddings --device cuda on the 1 GiB dump <= 1.5x the CPU time": {"check_1gib"},
    "check-embeddings samples: same findings on the device as on CPU": {"check_samples"},
    "kv-share plan: aliasing verified on the device": {"kv_plan"},
    "compare --device cuda gives the CPU's result": {"compare"},
}


def relevant(target: Target, selected: set[str]) -> bool:
    """A target counts when every step it reads was selected (all of them, without --only)."""
    return TARGET_STEPS[target.name] <= selected


if __name__ == "__main__":
    sys.exit(main())
