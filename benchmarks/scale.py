"""Large-scale checks, measured end to end through the CLI (each in its own process):

* a directory of 200 dumps checked with ``mmcli check-embeddings`` (progress bar on stderr);
* a 100,000-layer layer config planned with ``mmcli kv-share plan``;
* a 64 GiB sparse safetensors file inspected with ``mmcli inspect`` (no tensor data read).

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
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mmcli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"mmcli {' '.join(argv)} exited {proc.returncode}:\n{proc.stderr}")
    return elapsed, proc.returncode


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


if __name__ == "__main__":
    main()
