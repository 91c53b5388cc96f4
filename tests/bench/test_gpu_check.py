"""`benchmarks/gpu_check.py` off a GPU: plumbing, the no-CUDA exit, the dry run, and (slow)
every step on CPU with tiny sizes. Run as a subprocess, as on the GPU machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"
STEPS = [
    "pytest_cuda",
    "sync_bench",
    "sync_api",
    "bench_standard",
    "bench_large",
    "check_samples",
    "check_1gib",
    "kv_plan",
    "compare",
]


def run_script(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["CUDA_VISIBLE_DEVICES"] = ""  # no CUDA device, even on a machine with one
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=timeout,
        check=False,
    )


def read(path: Path) -> dict[str, object]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def test_without_cuda_checks_plumbing_then_exits_2_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_script("--out", str(out))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: no CUDA device: gpu_check needs one (torch ")
    assert "sees none" in lines[0]
    plumbing = read(out / "plumbing.json")
    assert plumbing["ok"] is True and plumbing["problems"] == []
    assert plumbing["out_dir_writable"] is True
    assert plumbing["cuda_available"] is False
    assert plumbing["cli"]["exit_code"] == 0  # type: ignore[index]
    assert plumbing["mmcli"]["missing"] == []  # type: ignore[index]
    assert "healthy.safetensors" in plumbing["samples"]["dumps"]  # type: ignore[index]
    assert read(out / "summary.json")["result"] == "no-cuda"
    assert (out / "gpu_check.log").read_text(encoding="utf-8").strip()
    assert not (out / "pytest_cuda.json").exists()  # no step ran


def test_dry_run_lists_the_steps_and_runs_none(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_script("--out", str(out), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "plumbing ok" in result.stdout
    for step in STEPS:
        assert f"  {step}: " in result.stdout
    assert "bench --device cuda --dtype bf16 --hidden 4096 --placeholders 576,2304,9216" in (
        result.stdout
    )
    assert "--placeholders 32768" in result.stdout and "--hidden 8192" in result.stdout
    assert "kv-share plan samples/kv/toy.toml --device cuda" in result.stdout
    plan = read(out / "plan.json")
    assert list(plan["steps"]) == STEPS  # type: ignore[call-overload]
    assert read(out / "plumbing.json")["ok"] is True
    assert not (out / "summary.json").exists()


def test_unwritable_out_is_exit_2_with_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    result = run_script("--out", str(blocker / "out"))
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: cannot write to ")


def test_bad_device_is_a_usage_error(tmp_path: Path) -> None:
    result = run_script("--out", str(tmp_path), "--device", "tpu")
    assert result.returncode == 2
    assert "--device must be cuda, cuda:N or cpu" in result.stderr


@pytest.mark.slow
def test_every_step_runs_on_cpu_with_tiny_sizes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_script("--out", str(out), "--device", "cpu", "--quick", timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert result.stderr == ""
    summary = read(out / "summary.json")
    assert summary["result"] == "pass"
    steps = summary["steps"]
    assert isinstance(steps, dict) and list(steps) == STEPS
    for name, step in steps.items():
        assert step["ok"], (name, step)
        assert (out / f"{name}.json").exists()
    targets = summary["targets"]
    assert isinstance(targets, dict) and len(targets) == 9
    statuses = {name: t["status"] for name, t in targets.items()}
    # On CPU the CUDA-only targets are n/a; the others are real checks.
    assert statuses["reference and fast bit-equal on every case"] == "pass"
    assert statuses["check-embeddings samples: same findings on the device as on CPU"] == "pass"
    assert statuses["kv-share plan: aliasing verified on the device"] == "pass"
    compare = read(out / "compare.json")["output"]
    assert isinstance(compare, dict) and list(compare["compare"]) == ["cpu"]
    assert compare["compare"]["cpu"]["equal_to_first_device"] is True
    assert set(statuses.values()) == {"pass", "n/a"}
    pytest_doc = read(out / "pytest_cuda.json")
    counts = pytest_doc["counts"]
    assert isinstance(counts, dict) and counts["skipped"] > 0 and counts["failed"] == 0
    for name in ("env", "plumbing"):
        assert (out / f"{name}.json").exists()
    assert sorted(p.name for p in out.iterdir() if p.suffix != ".json") == ["gpu_check.log"]
