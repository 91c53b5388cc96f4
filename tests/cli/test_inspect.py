"""``mmcli inspect``: a header-only view, instant on huge files, clean on corrupt headers."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from mmcli import dump_encoder_outputs
from mmcli.cli.main import app

runner = CliRunner()


def inspect(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["inspect", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_dump_table_and_json(tmp_path: Path) -> None:
    path = dump_encoder_outputs(
        tmp_path / "d.safetensors",
        [torch.ones(4, 8), torch.ones(3, 8)],
        is_embed=[torch.ones(4, dtype=torch.bool), None],
        hidden_size=8,
        model="toy",
    )
    code, out, _ = inspect(str(path))
    assert code == 0
    assert "mm_embeddings.1" in out and "[4, 8]" in out and "model = toy" in out
    assert "mm_dump v1 dump: 2 items (per-item tensors), masks for 1" in out
    code, out, _ = inspect(str(path), "--format", "json")
    doc = json.loads(out)
    assert code == doc["exit_code"] == 0
    assert doc["tensors"][0] == {
        "name": "is_embed.0",
        "dtype": "bool",
        "safetensors_dtype": "BOOL",
        "shape": [4],
        "bytes": 4,
        "data_offsets": doc["tensors"][0]["data_offsets"],
    }
    assert doc["metadata"]["hidden_size"] == "8"
    assert doc["dump"] == {
        "follows_schema": True,
        "problem": None,
        "num_items": 2,
        "stacked": False,
        "masks": [0],
        "placeholders": [],
    }


def test_other_safetensors_file_is_shown_and_judged(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    save_file({"weight": torch.ones(2, 2)}, str(path))
    code, out, _ = inspect(str(path), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["dump"]["follows_schema"] is False
    assert doc["dump"]["problem"].startswith("not an mm_dump file: unexpected keys [weight]")


def test_huge_file_is_instant(tmp_path: Path) -> None:
    size = 64 * 2**30
    header = json.dumps({"w": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}})
    path = tmp_path / "huge.safetensors"
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(header)) + header.encode())
        f.truncate(8 + len(header) + size)  # sparse: no data on disk
    start = time.perf_counter()
    code, out, _ = inspect(str(path), "--format", "json")
    assert time.perf_counter() - start < 2.0
    assert code == 0 and json.loads(out)["tensors"][0]["bytes"] == size


def test_corrupt_header_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "c.safetensors"
    path.write_bytes(struct.pack("<Q", 5) + b"{oops")
    code, out, err = inspect(str(path))
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"error: {path}: header is not valid JSON")
    assert lines[1].startswith("hint: ")


def test_directory_and_missing_are_exit_2(tmp_path: Path) -> None:
    code, _, err = inspect(str(tmp_path))
    assert code == 2 and err.startswith(f"error: {tmp_path}: is a directory")
    code, _, err = inspect(str(tmp_path / "nope.safetensors"))
    assert code == 2 and err.startswith(f"error: {tmp_path / 'nope.safetensors'}: no such file")


def test_inspect_does_not_import_torch(tmp_path: Path) -> None:
    path = tmp_path / "d.safetensors"
    save_file({"mm_embeddings.0": torch.ones(2, 2)}, str(path))
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from mmcli.cli.main import app\n"
        f"r = CliRunner().invoke(app, ['inspect', {str(path)!r}])\n"
        "print(r.exit_code, 'torch' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    )
    assert proc.stdout.split() == ["0", "False"]
