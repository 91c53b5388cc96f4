"""The steps: each runs its commands, writes its JSON file and hands back its figures."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .harness import TIMEOUTS
from .hypothesis_stub import HYPOTHESIS_STUB, HYPOTHESIS_STUB_STRATEGIES
from .plan import Context, StepResult, kv_samples, plan_commands
from .process import GIB


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
