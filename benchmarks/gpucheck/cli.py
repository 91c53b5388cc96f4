"""The command line: parse the options, check the plumbing, run the steps, judge, report."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from .children import child_build_dump, child_sync_api
from .harness import DEFAULT_BUDGET_S, LOG_NAME, Log, Runner, write_json
from .plan import Context, StepResult, plan_commands
from .plumbing import check_plumbing, environment
from .process import child_env, display
from .sizes import FULL, QUICK
from .steps import STEPS
from .targets import (
    FIELDS_USED,
    relevant,
    target_bandwidth,
    target_bit_equal,
    target_check_time,
    target_compare,
    target_kv,
    target_samples,
    target_sync_api,
    target_syncs,
    target_tests,
)

#: The parser's description: the first line of benchmarks/gpu_check.py's docstring.
DESCRIPTION = "Prove every CUDA path of mmcli on one real GPU, in one prepared run (issue 14)."


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=DESCRIPTION,
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
