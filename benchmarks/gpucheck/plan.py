"""What the steps share, and the commands each one runs (what ``--dry-run`` lists)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .harness import Runner, write_json
from .process import REPO, SCRIPT
from .sizes import QUICK, Sizes


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
