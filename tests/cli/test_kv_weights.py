"""``kv-share plan --gpu … --weights``: a size, an index, a ``.safetensors`` header (read by the
dump room's strict header parser, the only one), or a folder; bad ones are one error + hint."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv.inputs.weights import weights_total

ROOT = Path(__file__).resolve().parents[2]
QWEN = str(ROOT / "samples" / "kv" / "qwen3-14b-like.json")
GIB = 2**30


def plan(weights: str) -> Any:
    return CliRunner().invoke(
        app,
        ["kv-share", "plan", QWEN, "--gpu", "H100", "--weights", weights, "--format", "json"],
        catch_exceptions=False,
    )


def refused(weights: str) -> list[str]:
    """The stderr lines of a refused ``--weights`` (exit 2; stdout: the JSON error document)."""
    result = plan(weights)
    assert result.exit_code == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == 2 and [f"error: {doc['error']}", f"hint: {doc['hint']}"] == lines
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert "Traceback" not in result.stderr
    return lines


def shard(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(
        {
            "a": torch.zeros(3, 5, dtype=torch.bfloat16),  # 30 bytes
            "b": torch.zeros(7, dtype=torch.float32),  # 28 bytes
        },
        str(path),
    )
    return path


def test_size_index_file_and_folders(tmp_path: Path) -> None:
    assert weights_total("16GiB") == 16 * GIB
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 16_060_522_496}, "weight_map": {}}))
    assert weights_total(str(index)) == 16_060_522_496
    assert weights_total(str(tmp_path)) == 16_060_522_496  # the folder: its index
    one = shard(tmp_path / "shards" / "model-00001-of-00002.safetensors")
    shard(tmp_path / "shards" / "model-00002-of-00002.safetensors")
    assert weights_total(str(one)) == 58
    assert weights_total(str(one.parent)) == 116  # no index: every shard's header


def test_the_cli_passes_the_total_into_the_estimate(tmp_path: Path) -> None:
    one = shard(tmp_path / "model.safetensors")
    for weights, total in (("1GiB", GIB), (str(one), 58)):
        result = plan(weights)
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["memory_estimate"]["weights_bytes"] == total


def test_bad_inputs_are_one_error_and_one_hint(tmp_path: Path) -> None:
    bad = tmp_path / "index.json"
    bad.write_text(json.dumps({"weight_map": {}}))
    assert "no positive metadata.total_size" in refused(str(bad))[0]
    other = tmp_path / "weights.bin"
    other.write_bytes(b"x")
    assert "neither a .safetensors file" in refused(str(other))[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no model.safetensors.index.json" in refused(str(empty))[0]
    assert "no such file" in refused(str(tmp_path / "missing.safetensors"))[0]


def test_a_corrupt_safetensors_header_is_refused(tmp_path: Path) -> None:
    # The messages are the dump reader's (mmcli inspect says the same), behind "--weights: ".
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes((10**12).to_bytes(8, "little") + b"{}")
    error, hint = refused(str(bad))
    assert error == (
        f"error: --weights: {bad}: header declares 1000000000000 bytes but the file has only "
        "2 bytes after the length field"
    )
    assert hint.startswith("hint: the file is truncated or not a safetensors file")
    odd = tmp_path / "odd.safetensors"
    body = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}).encode()
    odd.write_bytes(len(body).to_bytes(8, "little") + body)
    error, _ = refused(str(odd))
    assert error.startswith(f"error: --weights: {odd}: tensor 'w'")
    with pytest.raises(InputError, match=r"^--weights: .*header length is 0"):
        (tmp_path / "zero.safetensors").write_bytes(bytes(8))
        weights_total(str(tmp_path / "zero.safetensors"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "w.safetensors"
    os.mkfifo(fifo)
    outcome: list[str] = []
    worker = threading.Thread(target=lambda: outcome.append(refused(str(fifo))[0]), daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert outcome and "not a regular file" in outcome[0]


LLAMA70 = str(ROOT / "tests/kv/realworld/configs/meta-llama--Llama-3.3-70B-Instruct_config.json")


@pytest.mark.parametrize("size", ["70B", "70", "7b", "1000KB", ""])
def test_a_size_needs_a_byte_unit_and_a_model_size(size: str) -> None:
    """``70B`` is 70 bytes to a size parser, and 70 billion parameters to a reader."""
    error, hint = refused(size)
    assert "--weights" in error
    assert "140GB" in hint


def test_without_weights_a_hf_config_is_estimated() -> None:
    """Llama-3.3-70B, tp 4 on an H100: the estimate takes 70.55 B bf16 parameters (the
    published index's 141,107,412,992 bytes) instead of none."""
    result = CliRunner().invoke(
        app,
        ["kv-share", "plan", LLAMA70, "--gpu", "H100", "-tp", "4", "--vllm-version", "0.19"]
        + ["--format", "json"],
        catch_exceptions=False,
    )
    assert result.exit_code in (0, 1), result.stderr
    est = json.loads(result.stdout)["memory_estimate"]
    assert est["weights_bytes"] == 141_107_412_992 and est["weights_estimated"] is True
    assert est["weights_source"].startswith("ESTIMATE from config.json: 70.55 B parameters")
    assert est["weights_per_gpu_bytes"] == 141_107_412_992 // 4
    assert est["reserve_bytes"] == sum(c["bytes"] for c in est["components"])
    kv = est["usable_bytes"] - est["weights_per_gpu_bytes"] - est["reserve_bytes"]
    assert est["kv_cache_bytes"] == kv and 30 * GIB < kv < 40 * GIB
    text = CliRunner().invoke(app, ["kv-share", "plan", LLAMA70, "--gpu", "H100", "-tp", "4"])
    assert "− weights ÷ 4 (ESTIMATE)" in text.stdout


def test_without_weights_a_config_it_cannot_estimate_is_refused() -> None:
    result = CliRunner().invoke(app, ["kv-share", "plan", QWEN, "--gpu", "H100"])
    assert result.exit_code == 2
    error, hint = result.stderr.splitlines()
    assert error.startswith("error: --gpu: cannot estimate the weights from the config")
    assert "--weights" in hint
    toy = str(ROOT / "samples" / "kv" / "toy.toml")
    result = CliRunner().invoke(app, ["kv-share", "plan", toy, "--gpu", "H100"])
    assert result.exit_code == 2 and "give --weights" in result.stderr


def test_the_weights_file_is_an_input_no_output_replaces(tmp_path: Path) -> None:
    """``--emit-map`` (or ``--plot`` through a link) onto ``--weights FILE.safetensors`` is
    refused as an input of the run; the file keeps every byte."""
    weights = shard(tmp_path / "model.safetensors")
    before = weights.read_bytes()
    (tmp_path / "w.png").symlink_to(weights)
    base = ["kv-share", "plan", QWEN, "--gpu", "H100", "--weights", str(weights)]
    for output in (
        ["--emit-map", str(weights)],
        ["--sweep", "max-model-len=4K..8K", "--plot", str(tmp_path / "w.png")],
    ):
        result = CliRunner().invoke(app, [*base, *output], catch_exceptions=False)
        assert result.exit_code == 2, result.stdout + result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 2 and "it is an input of this run" in lines[0], result.stderr
        assert lines[1].startswith("hint: ")
        assert weights.read_bytes() == before


def test_a_key_repeated_in_the_index_is_refused(tmp_path: Path) -> None:
    """JSON would keep the last ``total_size``; which one was meant is unknown."""
    index = tmp_path / "model.safetensors.index.json"
    index.write_text('{"metadata": {"total_size": 16060522496, "total_size": 1}, "weight_map": {}}')
    error, hint = refused(str(index))
    assert error == (
        f"error: --weights: {index}: the key 'total_size' appears more than once in one object"
    )
    assert hint.startswith("hint: give each key once")
