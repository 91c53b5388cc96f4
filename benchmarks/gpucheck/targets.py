"""The targets: the thresholds each step's figures are judged against (pass, fail, n/a)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .plan import StepResult
from .sizes import Sizes

BANDWIDTH_TARGET = 0.70
CHECK_TIME_RATIO = 1.5


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
