"""Time and memory of ``mmcli check-embeddings`` on a 1 GiB dump, against a minimal user script.

Builds a 1 GiB dump of 64 bf16 items (with image-break style masks) in a temporary
directory, then runs, each in its own subprocess and in the same run: the interpreter plus
``import torch`` (the baseline), a minimal script (safetensors ``load_file``, then
``torch.isfinite(t).all()`` per tensor) and ``mmcli check-embeddings --device cpu``. Reports
wall time and peak RSS; the bars are mmcli time <= 2x the script's, and mmcli peak RSS over
the baseline <= half the file size. The temporary directory is removed afterwards.

Usage: python benchmarks/check_dump.py [--items 64] [--rows 2048] [--hidden 4096] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE = "import torch"
MINIMAL = """
import sys, torch
from safetensors.torch import load_file
tensors = load_file(sys.argv[1])
ok = all(bool(torch.isfinite(t).all()) for t in tensors.values())
print(ok)
"""


def build(path: Path, items: int, rows: int, hidden: int) -> None:
    """Write the dump: each item (rows, hidden) bf16, its mask with a break after 64 rows."""
    import torch

    from mmcli.dump import dump_encoder_outputs

    gen = torch.Generator().manual_seed(0)
    embeds = [torch.randn(rows, hidden, generator=gen, dtype=torch.bfloat16) for _ in range(items)]
    breaks = (rows + 63) // 64
    mask = torch.ones(rows + breaks, dtype=torch.bool)
    mask[64::65] = False
    assert int(mask.sum()) == rows
    dump_encoder_outputs(path, embeds, is_embed=[mask] * items, dtype="bf16", hidden_size=hidden)


def run(argv: list[str]) -> tuple[float, float, int, int]:
    """Run a subprocess; return (wall seconds, CPU seconds, peak RSS bytes, exit code)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.stderr is not None:
        err = proc.stderr.read().decode(errors="replace").strip()
        if proc.returncode not in (0, 1) and err:
            print(err, file=sys.stderr)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build is not None:
        build(args.build, args.items, args.rows, args.hidden)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="mmcli-bench-"))
    try:
        path = tmp / "big.safetensors"
        # Built in a child process: a forked child's peak RSS would otherwise start from this
        # process's, which just held the whole dump.
        subprocess.run(
            [sys.executable, __file__, "--build", str(path), "--items", str(args.items),
             "--rows", str(args.rows), "--hidden", str(args.hidden)],
            check=True,
        )  # fmt: skip
        size = path.stat().st_size
        print(f"dump: {size / 2**30:.3f} GiB, {args.items} items of ({args.rows}, {args.hidden})")
        py = sys.executable
        commands = {
            "baseline": [py, "-c", BASELINE],
            "minimal": [py, "-c", MINIMAL, str(path)],
            "mmcli": [py, "-m", "mmcli", "check-embeddings", str(path), "--device", "cpu",
                      "--format", "json"],
        }  # fmt: skip
        # Best (lowest) wall and CPU time over the repeats: other load on the machine only
        # ever adds time. Peak RSS: the highest seen.
        best: dict[str, tuple[float, float, int]] = {}
        for rep in range(args.repeat):
            for name, argv in commands.items():
                wall, cpu, rss, code = run(argv)
                mib = rss / 2**20
                print(
                    f"  run {rep + 1} {name:<8} wall {wall:7.2f} s  CPU {cpu:7.2f} s  "
                    f"peak RSS {mib:8.1f} MiB"
                )
                if code != 0:
                    print(f"{name} failed with exit code {code}", file=sys.stderr)
                    return 1
                old = best.get(name)
                best[name] = (
                    (min(wall, old[0]), min(cpu, old[1]), max(rss, old[2]))
                    if old
                    else (wall, cpu, rss)
                )
        base_wall, base_cpu, base_rss = best["baseline"]
        min_wall, min_cpu, min_rss = best["minimal"]
        cli_wall, cli_cpu, cli_rss = best["mmcli"]
        over = cli_rss - base_rss
        print(
            f"baseline (python + torch): wall {base_wall:.2f} s, CPU {base_cpu:.2f} s, "
            f"{base_rss / 2**20:.1f} MiB"
        )
        print(
            f"minimal script: wall {min_wall:.2f} s, CPU {min_cpu:.2f} s, "
            f"{(min_rss - base_rss) / 2**20:.1f} MiB over the baseline"
        )
        print(
            f"mmcli: wall {cli_wall:.2f} s, CPU {cli_cpu:.2f} s, {over / 2**20:.1f} MiB over "
            "the baseline"
        )
        print(f"CPU time ratio (mmcli / minimal): {cli_cpu / min_cpu:.2f}x")
        time_ok = cli_wall <= 2 * min_wall
        rss_ok = over <= size / 2
        print(
            f"time bar (mmcli <= 2x minimal): {cli_wall / min_wall:.2f}x "
            f"{'PASS' if time_ok else 'FAIL'}"
        )
        print(
            f"memory bar (mmcli over baseline <= half the file): {over / size:.3f} of the file "
            f"{'PASS' if rss_ok else 'FAIL'}"
        )
        return 0 if time_ok and rss_ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
