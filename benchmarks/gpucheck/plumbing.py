"""The script's own preconditions, checked before any step, and the machine's description."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .harness import TIMEOUTS, Runner
from .plan import kv_samples
from .process import GIB, REPO, run_process


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
