"""``kv-share plan`` from what a vLLM user knows: --gpu/--weights, --max-model-len auto, --sweep."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
QWEN = str(ROOT / "samples" / "kv" / "qwen3-14b-like.json")
GEMMA = str(ROOT / "samples" / "kv" / "gemma3n-e2b-like.json")
GiB = 2**30


def run(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, ["kv-share", "plan", *args], catch_exceptions=False)
    assert result.exit_code == code, result.stdout + result.stderr
    return result


def estimate(*extra: str) -> dict[str, Any]:
    args = [QWEN, "--gpu", "H100", "--weights", "28GiB", "--format", "json", *extra]
    doc: dict[str, Any] = json.loads(run(*args).stdout)
    return doc


def test_gpu_estimate_terms_and_the_plan_use_them() -> None:
    doc = estimate("--vllm-version", "0.33")
    est = doc["memory_estimate"]
    # 79.11 GiB as CUDA reports an H100 × 0.92 (0.20-0.33's default gpu_memory_utilization,
    # vllm/config/cache.py) − 28 GiB of weights − the named components held back (the sample
    # leaves intermediate_size and vocab_size to Qwen3Config's defaults, which fill them).
    usable = int(est["gpu_total_bytes"] * 0.92)
    assert est["usable_bytes"] == usable
    held = sum(c["bytes"] for c in est["components"])
    assert est["reserve_bytes"] == held > 0
    assert est["kv_cache_bytes"] == usable - 28 * GiB - held
    assert "margin_cut_bytes" not in est
    side = doc["engine_side"]
    # Blocks of 16 tokens: 40 layers × 65,536 B a block (0.29+: one null block held back).
    assert doc["memory"]["num_blocks"][side] == est["kv_cache_bytes"] // (40 * 65536)


def test_034_sizes_an_extensible_cache_below_a_margin() -> None:
    # vLLM 0.34: gpu_memory_utilization defaults to 1.0 under the extensible KV cache
    # (CacheConfig.resolved_gpu_memory_utilization), which keeps a margin of
    # max(1 GiB, 0.75 × the transient peak) below the device headroom
    # (v1/worker/extensible_kv_cache.py measure_kv_cache_bytes); the activation peak stands
    # for the transient peak. Blocks of 64 tokens (DEFAULT_BLOCK_SIZE).
    doc = estimate()
    est = doc["memory_estimate"]
    total = est["gpu_total_bytes"]
    assert est["gpu_memory_utilization"] == 1.0 and est["usable_bytes"] == total
    peak = next(c["bytes"] for c in est["components"] if c["name"] == "activation peak")
    margin = max(GiB, int(peak * 0.75))
    assert est["extensible_kv_cache_margin_bytes"] == est["margin_cut_bytes"] == margin
    held = est["reserve_bytes"]
    assert est["kv_cache_bytes"] == total - margin - 28 * GiB - held
    assert doc["memory"]["block_size"] == 64
    # A utilization that leaves the margin free loses nothing to it.
    low = estimate("--gpu-memory-utilization", "0.9")["memory_estimate"]
    assert low["margin_cut_bytes"] == 0
    assert low["kv_cache_bytes"] == int(total * 0.9) - 28 * GiB - held


@pytest.mark.parametrize(("release", "default"), [("0.19", 0.9), ("0.20", 0.92), ("0.34", 1.0)])
def test_the_utilization_default_is_the_releases(release: str, default: float) -> None:
    est = estimate("--vllm-version", release)["memory_estimate"]
    assert est["gpu_memory_utilization"] == default


def test_gpu_and_memory_together_are_refused() -> None:
    result = run(QWEN, "--gpu", "H100", "--memory", "20GiB", code=2)
    assert "not both" in result.stderr


def test_weights_without_gpu_is_refused() -> None:
    assert "need --gpu" in run(QWEN, "--weights", "1GiB", code=2).stderr


def test_auto_max_model_len_reduces_to_what_fits() -> None:
    result = run(QWEN, "--memory", "1GiB", "--max-model-len", "auto", "--format", "json")
    doc = json.loads(result.stdout)
    # 1 GiB holds 102 blocks of 64 tokens (40 × 256 KiB); less the null block, 101: 6,464.
    assert doc["max_model_len"] == (GiB // (40 * 4 * 65536) - 1) * 64
    assert "Auto-fit max_model_len: reduced from 40,960 to 6,464" in result.stderr


def test_max_model_len_rejects_words_and_huge_numbers() -> None:
    for bad in ("big", "0", "1" * 400, "²"):
        assert "--max-model-len" in run(QWEN, "--max-model-len", bad, code=2).stderr


def test_max_model_len_takes_vllm_suffixes() -> None:
    # vLLM's human_readable_int: k = 1000, K = 1024 (qwen3-14b-like derives 40,960).
    for text, want in (("32k", 32_000), ("32K", 32_768), ("1.5k", 1500)):
        doc = json.loads(run(QWEN, "--max-model-len", text, "--format", "json").stdout)
        assert doc["max_model_len"] == want
    refused = run(QWEN, "--max-model-len", "1.5K", code=2).stderr
    assert "no decimals with the binary suffix K" in refused and "1.5k" in refused
    old = run(QWEN, "--max-model-len", "auto", "--vllm-version", "0.13", code=2).stderr
    assert "vLLM 0.13 has no auto-fit of max_model_len (it came in 0.14)" in old


def test_sweep_json_series_and_plot(tmp_path: Path) -> None:
    plot = tmp_path / "sweep.svg"
    args = [GEMMA, "--memory", "20GiB", "--sweep", "max-model-len=4K..16K", "--plot", str(plot)]
    doc = json.loads(run(*args, "--format", "json").stdout)
    assert doc["sweep"]["values"] == [4096, 8192, 16384]
    conc = doc["sweep"]["series"]["with_sharing"]["max_concurrency"]
    assert conc[0] > conc[1] > conc[2]
    assert plot.stat().st_size > 1000


def test_plot_needs_sweep(tmp_path: Path) -> None:
    assert "--plot needs --sweep" in run(GEMMA, "--plot", str(tmp_path / "x.png"), code=2).stderr


def refused(*args: str) -> list[str]:
    """The stderr of an exit-2 run: exactly one error line and one hint line, nothing else."""
    result = run(*args, code=2)
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), result.stderr
    # A --format json run prints the error as its one document; a table run prints nothing.
    assert (
        result.stdout == "" if "json" not in args else json.loads(result.stdout)["exit_code"] == 2
    )
    return lines


def test_gpu_parallel_sizes_are_refused_with_a_hint() -> None:
    gpu = ("--gpu", "H100", "--weights", "28GiB")
    error, hint = refused(QWEN, *gpu, "-tp", "0")
    assert error == "error: --tensor-parallel-size must be a positive integer, got 0"
    assert "e.g. 1, 2, 8" in hint
    error, hint = refused(QWEN, *gpu, "-pp", "-1")
    assert error == "error: --pipeline-parallel-size must be a positive integer, got -1"
    assert "e.g. 1, 2, 4" in hint


def test_reserve_zero_is_no_reserve() -> None:
    gpu = ("--gpu", "H100", "--weights", "28GiB", "--format", "json")
    for zero in ("0", "0GiB"):
        est = json.loads(run(QWEN, *gpu, "--reserve", zero).stdout)["memory_estimate"]
        assert est["reserve_bytes"] == 0
        # 0.34's margin is then its floor, 1 GiB.
        assert est["margin_cut_bytes"] == GiB
        assert est["kv_cache_bytes"] == est["usable_bytes"] - GiB - 28 * GiB
    error, hint = refused(QWEN, *gpu, "--reserve", "")
    assert error == "error: --reserve: cannot read '' as a size"
    assert "0 for none" in hint


def test_gpu_memory_utilization_needs_gpu() -> None:
    for other in ((), ("--memory", "20GiB")):
        error, _ = refused(QWEN, *other, "--gpu-memory-utilization", "0.5")
        assert error == "error: --gpu-memory-utilization needs --gpu"
    # the release's default, when not given: 1.0 under 0.34's extensible KV cache
    assert estimate()["memory_estimate"]["gpu_memory_utilization"] == 1.0


def test_a_sweep_factor_must_be_finite() -> None:
    for factor in ("xnan", "xinf"):
        error, _ = refused(QWEN, "--memory", "20GiB", "--sweep", f"max-model-len=4K..16K:{factor}")
        assert error.endswith("is not a finite number")


def test_no_progress_line_before_an_error(tmp_path: Path, monkeypatch: Any) -> None:
    """``Auto-fit …`` and ``wrote …`` are said once the run has worked: an exit-2 run prints
    exactly its error and hint, whatever came before the error."""
    auto = (QWEN, "--memory", "1GiB", "--max-model-len", "auto")
    refused(*auto, "--sweep", "max-model-len=4K")  # the range is read before the fit
    refused(*auto, "--emit-map", str(tmp_path / "missing" / "map.json"))
    refused(*auto, "--emit-map", "/dev/stdout")
    with monkeypatch.context() as patched:  # a full disk: found only once the map is written
        patched.setattr("mmcli.atomic.os.fsync", _full_disk)
        error, _ = refused(*auto, "--emit-map", str(tmp_path / "map.json"))
        assert error.endswith("No space left on device")
    done = run(*auto, "--emit-map", str(tmp_path / "map.json"))
    lines = done.stderr.splitlines()
    assert lines[0].startswith("Auto-fit max_model_len: reduced from 40,960")
    assert lines[1] == f"wrote 0 map entries to {tmp_path / 'map.json'}"


def _full_disk(fd: int) -> None:
    import errno
    import os

    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
