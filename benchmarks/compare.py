"""Time and memory of ``mmcli compare`` on two 1 GiB bf16 dumps, against reading both files.

Builds, in a temporary directory, a 1 GiB REF dump of 64 bf16 items (2048, 4096) and a CAND
dump of the same values as a second kernel would return them (Gaussian noise of 2e-3, clipped
at 3 sigma, rounded back to bf16: within the port profile, not bit-identical, so every
element is measured). Then runs, each in its own subprocess and in the same run: the
interpreter importing what ``mmcli compare`` imports (the baseline), a script reading both
files with ``safetensors.torch.load_file``, a script reading every byte of both, and
``mmcli compare REF CAND --device cpu --format json``. Reports wall time and peak RSS. The
bars (issue 21): compare wall time <= 1.5x the load_file script's, and peak RSS over the
baseline <= 0.1x the two files. The temporary directory is removed afterwards.

``--devices cpu,cuda`` runs the compare once per device and checks that every device gives
the CPU's result (the same statuses and finding codes, every metric within a relative 1e-9:
float64 sums in another order); ``--json PATH`` writes the figures as one JSON document.

Usage: python benchmarks/compare.py [--items 64] [--rows 2048] [--hidden 4096] [--repeat 1]
                                    [--devices cpu] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE = "import torch, safetensors, typer, rich, mmcli.compare, mmcli.cli.main"
READ_BOTH = """
import sys
from safetensors.torch import load_file
for path in sys.argv[1:]:
    tensors = load_file(path)
    del tensors
"""
#: Every byte of both files read (64 MiB at a time): what any comparison must at least do.
#: safetensors' load_file maps the file and copies nothing until a tensor is touched, so the
#: reading script above does not read the data; both baselines are reported.
READ_EVERY_BYTE = """
import sys
buf = bytearray(64 << 20)
for path in sys.argv[1:]:
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
"""


def build(directory: Path, items: int, rows: int, hidden: int) -> None:
    """Write ref.safetensors and cand.safetensors (see the module docstring)."""
    import torch

    from mmcli.dump import dump_encoder_outputs

    gen = torch.Generator().manual_seed(0)
    ref = [torch.randn(rows, hidden, generator=gen, dtype=torch.bfloat16) for _ in range(items)]
    dump_encoder_outputs(directory / "ref.safetensors", ref, dtype="bf16", hidden_size=hidden)
    cand = []
    for t in ref:
        noise = torch.randn(rows, hidden, generator=gen).clamp_(-3, 3).mul_(2e-3)
        cand.append(t.float().add_(noise).to(torch.bfloat16))
    del ref
    dump_encoder_outputs(directory / "cand.safetensors", cand, dtype="bf16", hidden_size=hidden)


def run(argv: list[str], stdout: Path | None = None) -> tuple[float, float, int, int]:
    """Run a subprocess; return (wall seconds, CPU seconds, peak RSS bytes, exit code)."""
    start = time.perf_counter()
    with open(stdout or os.devnull, "wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if proc.stderr is not None:
        err = proc.stderr.read().decode(errors="replace").strip()
        if code not in (0, 1) and err:
            print(err, file=sys.stderr)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, code


#: Fields of a compare document that name the run rather than measure the pair.
RUN_FIELDS = {"device", "ref", "cand", "mmcli_version", "timings_ms", "wall_s"}


def differences(a: object, b: object, where: str = "") -> tuple[list[str], float]:
    """Where two compare documents differ (beyond a relative 1e-9), and the largest relative
    difference of their numbers."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        worst = 0.0
        for key in sorted(set(a) | set(b)):
            if key in RUN_FIELDS:
                continue
            if key not in a or key not in b:
                out.append(f"{where}.{key}: in one document only")
                continue
            sub, rel = differences(a[key], b[key], f"{where}.{key}")
            out += sub
            worst = max(worst, rel)
        return out, worst
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} vs {len(b)} entries"], 0.0
        out, worst = [], 0.0
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            sub, rel = differences(x, y, f"{where}[{i}]")
            out += sub
            worst = max(worst, rel)
        return out, worst
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        if isinstance(b, bool):
            return [f"{where}: {a!r} vs {b!r}"], 0.0
        if math.isnan(a) and math.isnan(b):
            return [], 0.0
        rel = abs(a - b) / max(abs(a), abs(b), 1e-300) if a != b else 0.0
        return ([f"{where}: {a!r} vs {b!r}"] if rel > 1e-9 else []), rel
    return ([] if a == b else [f"{where}: {a!r} vs {b!r}"]), 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--devices", default="cpu", help="comma-separated: cpu, cuda, cuda:N")
    parser.add_argument("--json", type=Path, help="write the figures here as one JSON document")
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    if args.build is not None:
        build(args.build, args.items, args.rows, args.hidden)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="mmcli-bench-compare-"))
    try:
        # Built in a child process, so that this one stays small (no torch imported here).
        subprocess.run(
            [sys.executable, __file__, "--build", str(tmp), "--items", str(args.items),
             "--rows", str(args.rows), "--hidden", str(args.hidden)],
            check=True,
        )  # fmt: skip
        ref, cand = tmp / "ref.safetensors", tmp / "cand.safetensors"
        size = ref.stat().st_size + cand.stat().st_size
        print(
            f"dumps: 2 × {ref.stat().st_size / 2**30:.3f} GiB, {args.items} bf16 items of "
            f"({args.rows}, {args.hidden}) each"
        )
        py = sys.executable
        commands = {
            "baseline": [py, "-c", BASELINE],
            "load_file": [py, "-c", READ_BOTH, str(ref), str(cand)],
            "read_all": [py, "-c", READ_EVERY_BYTE, str(ref), str(cand)],
        }
        for device in devices:
            commands[f"compare[{device}]"] = [
                py, "-m", "mmcli", "compare", str(ref), str(cand), "--device", device,
                "--format", "json",
            ]  # fmt: skip
        # Lowest wall and CPU time over the repeats (other load only adds time); highest RSS.
        best: dict[str, tuple[float, float, int]] = {}
        for rep in range(args.repeat):
            for name, argv in commands.items():
                doc_path = tmp / f"{name}.json" if name.startswith("compare") else None
                wall, cpu, rss, code = run(argv, doc_path)
                print(
                    f"  run {rep + 1} {name:<14} wall {wall:7.2f} s  CPU {cpu:7.2f} s  "
                    f"peak RSS {rss / 2**20:8.1f} MiB  exit {code}"
                )
                if code != 0:
                    print(f"{name} exited with {code}", file=sys.stderr)
                    return 1
                old = best.get(name)
                best[name] = (
                    (min(wall, old[0]), min(cpu, old[1]), max(rss, old[2]))
                    if old
                    else (wall, cpu, rss)
                )
        _, _, base_rss = best["baseline"]
        load_wall, load_cpu, _ = best["load_file"]
        read_wall, read_cpu, _ = best["read_all"]
        print(f"baseline imports: {base_rss / 2**20:.1f} MiB")
        print(f"load_file both: wall {load_wall:.2f} s, CPU {load_cpu:.2f} s")
        print(f"every byte of both read: wall {read_wall:.2f} s, CPU {read_cpu:.2f} s")
        report: dict[str, object] = {
            "files_bytes": size,
            "items": args.items,
            "rows": args.rows,
            "hidden": args.hidden,
            "repeat": args.repeat,
            "cpu_count": os.cpu_count(),
            "baseline_rss_mib": round(base_rss / 2**20, 1),
            "load_file": {"wall_s": round(load_wall, 3), "cpu_s": round(load_cpu, 3)},
            "read_all": {"wall_s": round(read_wall, 3), "cpu_s": round(read_cpu, 3)},
            "compare": {},
        }
        passed = True
        docs = {d: json.loads((tmp / f"compare[{d}].json").read_text()) for d in devices}
        for device in devices:
            cmp_wall, cmp_cpu, cmp_rss = best[f"compare[{device}]"]
            over = cmp_rss - base_rss
            time_ok = cmp_wall <= 1.5 * load_wall
            rss_ok = over <= 0.1 * size
            diffs, worst = differences(docs[devices[0]], docs[device])
            same = not diffs
            passed = passed and time_ok and rss_ok and same
            print(
                f"mmcli compare --device {device}: wall {cmp_wall:.2f} s, CPU {cmp_cpu:.2f} s, "
                f"{over / 2**20:.1f} MiB over the baseline"
            )
            print(
                f"  time bar (compare <= 1.5x load_file): {cmp_wall / load_wall:.2f}x "
                f"{'PASS' if time_ok else 'FAIL'}; compare / reading every byte: "
                f"{cmp_wall / read_wall:.2f}x (context)"
            )
            print(
                f"  memory bar (over baseline <= 0.1x the files): {over / size:.3f}x "
                f"{'PASS' if rss_ok else 'FAIL'}"
            )
            if device != devices[0]:
                print(
                    f"  result equal to --device {devices[0]}'s: {'yes' if same else 'NO'} "
                    f"(largest relative difference {worst:.3g})"
                )
                for line in diffs[:10]:
                    print(f"    {line}")
            report["compare"][device] = {  # type: ignore[index]
                "wall_s": round(cmp_wall, 3),
                "cpu_s": round(cmp_cpu, 3),
                "rss_over_baseline_mib": round(over / 2**20, 1),
                "time_ratio_load_file": round(cmp_wall / load_wall, 3),
                "time_ok": time_ok,
                "rss_ratio_files": round(over / size, 4),
                "rss_ok": rss_ok,
                "equal_to_first_device": same,
                "largest_relative_difference": worst,
                "differences": diffs[:20],
                "exit_code": docs[device].get("exit_code"),
            }
        report["passed"] = passed
        if args.json is not None:
            args.json.write_text(json.dumps(report, indent=2) + "\n")
        return 0 if passed else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
