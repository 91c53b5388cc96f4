"""Large-scale checks, measured end to end through the CLI (each in its own process):

* a directory of 200 dumps checked with ``mmcli check-embeddings`` (progress bar on stderr);
* a 100,000-layer layer config planned with ``mmcli kv-share plan``;
* a 64 GiB sparse safetensors file inspected with ``mmcli inspect`` (no tensor data read);
* a header of a million tensors (as the safetensors library lays it out) inspected, as a
  table and as JSON;
* a million-layer Hugging Face config (Gemma-3n-like, the second half sharing) planned, as a
  table and as JSON;
* the stated limits (``python benchmarks/scale.py limits`` runs only these): a 64-point
  ``--sweep`` of the million-layer config; ``-pp 1000000`` (refused, exit 2) and ``-pp 1024``
  (the limit) on a million layers none of which share; ``check-embeddings -q`` on a dump of a
  million zero-row items (refused, exit 2) and of 100,000 (the limit).

Each line gives the wall time, the CPU time (user + system, startup included) and the peak
resident memory of the mmcli process; the bounds the tests hold these runs to are 10 s of CPU
and 1 GiB.

Usage: ``python benchmarks/scale.py`` (or ``make bench-scale``). Everything is written to a
temporary directory and removed afterwards; the sparse file takes almost no disk.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import mmcli


def run(argv: list[str]) -> tuple[float, int]:
    """Wall time and exit code of one mmcli invocation (stdout discarded)."""
    seconds, code, _, _ = measure(argv)
    return seconds, code


#: Runs a command and prints its exit code, CPU seconds and peak resident KiB. A process
#: started by fork inherits its parent's peak, so mmcli is started from this small process,
#: not from the benchmark's own (torch, and the million names it built, are resident there).
_MEASURE = """
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
code = os.waitstatus_to_exitcode(status)
print(json.dumps([code, usage.ru_utime + usage.ru_stime, usage.ru_maxrss]))
"""


def measure(argv: list[str], refused: bool = False) -> tuple[float, int, float, int]:
    """Wall time, exit code, CPU seconds and peak resident MiB of one mmcli invocation."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, sys.executable, "-m", "mmcli", *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    code, cpu, peak = json.loads(proc.stdout)
    if code not in ((2,) if refused else (0, 1)):
        raise SystemExit(f"mmcli {' '.join(argv)} exited {code}:\n{proc.stderr}")
    return elapsed, code, cpu, peak >> 10


def report(label: str, argv: list[str], refused: bool = False) -> None:
    seconds, code, cpu, peak = measure(argv, refused)
    print(f"{label}: {seconds:.2f} s wall, {cpu:.2f} s CPU, {peak} MiB peak (exit {code})")


def make_million_tensors(path: Path, count: int) -> None:
    """A header of ``count`` empty tensors ``mm_embeddings.{i}``, laid out as the safetensors
    library writes headers (compact JSON, names in byte order, metadata first)."""
    names = sorted(f"mm_embeddings.{i}" for i in range(count))
    entry = '":{"dtype":"F32","shape":[0,4096],"data_offsets":[0,0]}'
    raw = '{"__metadata__":{"format":"mm_dump"},"' + ',"'.join(n + entry for n in names) + "}"
    data = raw.encode()
    data += b" " * (-len(data) % 8)
    path.write_bytes(struct.pack("<Q", len(data)) + data)


def make_million_layer_config(path: Path, count: int) -> None:
    """A Gemma-3n-like Hugging Face config of ``count`` layers, the second half sharing."""
    config = {
        "model_type": "gemma3n_text",
        "num_hidden_layers": count,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_size": 2048,
        "sliding_window": 1024,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
        "layer_types": [
            "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(count)
        ],
        "num_kv_shared_layers": count // 2,
    }
    path.write_text(json.dumps(config), encoding="utf-8")


def make_zero_row_dump(path: Path, count: int) -> None:
    """A valid dump of ``count`` zero-row (0, 4) items, as ``dump_encoder_outputs`` lays it
    out (a million make a 75 MB header, within the 100 MB header limit)."""
    names = sorted(f"mm_embeddings.{i}" for i in range(count))
    entry = '":{"dtype":"BF16","shape":[0,4],"data_offsets":[0,0]}'
    meta = {"expected_num_items": str(count), "format": "mm_dump", "format_version": "1"}
    head = '{"__metadata__":' + json.dumps({**meta, "hidden_size": "4"}) + ',"'
    data = (head + ',"'.join(n + entry for n in names) + "}").encode()
    data += b" " * (-len(data) % 8)
    path.write_bytes(struct.pack("<Q", len(data)) + data)


def limits(root: Path) -> None:
    """The three runs the stated limits bound, at and beyond them."""
    hf = root / "config.json"
    make_million_layer_config(hf, 1_000_000)
    sweep = ["--memory", "80GiB", "--sweep", "max-model-len=1K..32K:64"]
    report("kv-share plan, 1,000,000 layers, 64-point sweep", ["kv-share", "plan", str(hf), *sweep])
    flat = root / "flat.json"
    config = json.loads(hf.read_text(encoding="utf-8"))
    flat.write_text(json.dumps({**config, "num_kv_shared_layers": 0}), encoding="utf-8")
    plan = ["kv-share", "plan", str(flat), "--memory", "80GiB", "-pp"]
    report("kv-share plan, 1,000,000 layers, -pp 1000000", [*plan, "1000000"], refused=True)
    report("kv-share plan, 1,000,000 layers, -pp 1024", [*plan, "1024"])
    for count, refused in ((1_000_000, True), (100_000, False)):
        dump = root / f"zero_rows_{count}.safetensors"
        make_zero_row_dump(dump, count)
        check = ["check-embeddings", "-q", str(dump), "--device", "cpu"]
        report(f"check-embeddings -q, {count:,} zero-row items", check, refused)


def make_dumps(folder: Path, count: int) -> None:
    gen = torch.Generator().manual_seed(0)
    for n in range(count):
        items = [torch.randn(64, 256, generator=gen).to(torch.bfloat16) for _ in range(4)]
        masks = [torch.tensor(([True] * 8 + [False]) * 8) for _ in items]
        mmcli.dump_encoder_outputs(
            folder / f"dump_{n:03d}.safetensors",
            items,
            is_embed=masks,
            expected_num_items=4,
            hidden_size=256,
        )


def make_layer_config(path: Path, num_layers: int) -> None:
    layers: list[dict[str, object]] = []
    for i in range(num_layers):
        layer: dict[str, object] = {"name": f"model.layers.{i}.self_attn.attn"}
        if i % 2:
            layer["kv_sharing_target"] = f"model.layers.{i - 1}.self_attn.attn"
        layers.append(layer)
    config = {
        "name": f"scale-{num_layers}",
        "defaults": {"num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16"},
        "layers": layers,
    }
    path.write_text(json.dumps(config), encoding="utf-8")


def make_sparse_safetensors(path: Path, size_bytes: int) -> None:
    elements = size_bytes // 4
    header = {
        "weight": {
            "dtype": "F32",
            "shape": [elements // 1024, 1024],
            "data_offsets": [0, size_bytes],
        },
        "__metadata__": {"note": "sparse"},
    }
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.truncate(8 + len(raw) + size_bytes)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if sys.argv[1:] == ["limits"]:
            limits(root)
            return
        dumps = root / "dumps"
        dumps.mkdir()
        make_dumps(dumps, 200)
        seconds, code = run(["check-embeddings", str(dumps), "--device", "cpu"])
        print(f"check-embeddings on 200 dumps (800 items): {seconds:.2f} s (exit {code})")

        config = root / "layers.json"
        make_layer_config(config, 100_000)
        seconds, code = run(
            ["kv-share", "plan", str(config), "--memory", "80GiB", "--max-model-len", "8192"]
        )
        print(f"kv-share plan on 100,000 layers: {seconds:.2f} s (exit {code})")

        big = root / "big.safetensors"
        make_sparse_safetensors(big, 64 * 2**30)
        seconds, code = run(["inspect", str(big)])
        print(f"inspect on a 64 GiB sparse file: {seconds:.2f} s (exit {code})")

        header = root / "million.safetensors"
        make_million_tensors(header, 1_000_000)
        report("inspect, 1,000,000 tensors, table", ["inspect", str(header)])
        report("inspect, 1,000,000 tensors, JSON", ["inspect", str(header), "--format", "json"])

        hf = root / "config.json"
        make_million_layer_config(hf, 1_000_000)
        plan = ["kv-share", "plan", str(hf), "--memory", "80GiB"]
        report("kv-share plan, 1,000,000 layers, table", plan)
        report("kv-share plan, 1,000,000 layers, JSON", [*plan, "--format", "json"])
        limits(root)


if __name__ == "__main__":
    main()
