"""Inputs are never modified, and every file mmcli writes appears whole or not at all."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import mmcli
from mmcli.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
runner = CliRunner()


def digests(folder: Path) -> dict[str, tuple[str, int]]:
    """Content hash and mtime of every file under ``folder``."""
    return {
        str(p.relative_to(folder)): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_mtime_ns,
        )
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


COMMANDS = [
    ["check-embeddings", "samples/dumps", "--device", "cpu"],
    ["check-embeddings", "samples/dumps", "--device", "cpu", "--format", "json", "--strict"],
    *[["inspect", f"samples/dumps/{p.name}"] for p in sorted((SAMPLES / "dumps").glob("*"))],
    *[["kv-share", "plan", f"samples/kv/{p.name}"] for p in sorted((SAMPLES / "kv").glob("*"))],
    ["kv-share", "plan", "samples/kv/gemma3n-e2b-like.json", "--memory", "20GiB"],
    ["kv-share", "plan", "samples/kv/gemma3n-e2b-like.json", "--device", "cpu"],
    ["bench", "--from", "samples/dumps/healthy.safetensors", "--quick", "--format", "json"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a)[:50])
def test_commands_leave_their_inputs_untouched(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    before = digests(SAMPLES)
    result = runner.invoke(app, args, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.stderr
    assert digests(SAMPLES) == before


def test_a_map_file_is_left_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    emitted = tmp_path / "map.json"
    result = runner.invoke(
        app,
        ["kv-share", "plan", "samples/kv/gemma3n-e2b-like.json", "--emit-map", str(emitted)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    before = digests(tmp_path)
    result = runner.invoke(
        app,
        ["kv-share", "plan", "samples/kv/gemma3n-e2b-like.json", "--map", str(emitted)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    assert digests(tmp_path) == before


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def test_interrupted_dump_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "dump.safetensors"
    mmcli.dump_encoder_outputs(path, [torch.ones(4, 8)])
    old = path.read_bytes()
    # Interrupted after the data is written, before it is made durable and renamed.
    monkeypatch.setattr(os, "fsync", _interrupt)
    with pytest.raises(KeyboardInterrupt):
        mmcli.dump_encoder_outputs(path, [torch.zeros(16, 8), torch.zeros(2, 8)])
    assert path.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["dump.safetensors"]


def test_interrupted_emit_map_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "map.json"
    target.write_text('{"old": null}\n', encoding="utf-8")
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(os, "fsync", _interrupt)
    # The CLI turns an interrupt into an abort ("Aborted!", non-zero exit).
    result = runner.invoke(
        app,
        ["kv-share", "plan", "samples/kv/gemma3n-e2b-like.json", "--emit-map", str(target)],
        catch_exceptions=False,
    )
    assert result.exit_code != 0
    assert target.read_text(encoding="utf-8") == '{"old": null}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["map.json"]


def test_killed_writer_never_leaves_a_partial_dump(tmp_path: Path) -> None:
    path = tmp_path / "dump.safetensors"
    mmcli.dump_encoder_outputs(path, [torch.ones(4, 8)])
    old = path.read_bytes()
    code = (
        "import sys, torch, mmcli\n"
        "items = [torch.randn(2048, 4096) for _ in range(24)]\n"
        "print('writing', flush=True)\n"
        f"mmcli.dump_encoder_outputs({str(path)!r}, items)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"
    time.sleep(0.2)  # somewhere in the 800 MB write (or already done: both must be whole)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    data = path.read_bytes()
    if data != old:
        dump = mmcli.load_dump(path)  # a complete new file, never a torn one
        assert dump.num_items == 24
    header_len = int.from_bytes(data[:8], "little")
    json.loads(data[8 : 8 + header_len])
