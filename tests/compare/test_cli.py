"""The ``mmcli compare`` contract: exit codes, two stderr lines on error, one JSON document."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import mmcli
from mmcli.cli.main import app


@pytest.fixture
def dumps(tmp_path: Path, base) -> dict[str, Path]:
    ref = mmcli.dump_encoder_outputs(tmp_path / "ref.safetensors", base)
    scaled = mmcli.dump_encoder_outputs(
        tmp_path / "scaled.safetensors", [(t.double() / math.sqrt(64)).bfloat16() for t in base]
    )
    return {"ref": ref, "scaled": scaled, "dir": tmp_path}


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["compare", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_identical_exit_0(dumps) -> None:
    code, out, err = _run(str(dumps["ref"]), str(dumps["ref"]), "--device", "cpu")
    assert code == 0 and err == ""
    assert "identical" in out and "1 pair, 3 items compared, 0 failed, 0 errors" in out


def test_findings_exit_1(dumps) -> None:
    code, out, err = _run(str(dumps["ref"]), str(dumps["scaled"]), "--device", "cpu")
    assert code == 1 and err == ""
    assert out.count("compare-scale") == 3 and "hint: c ≈ 1/√64" in out


def test_json_is_one_document(dumps) -> None:
    code, out, _ = _run(str(dumps["ref"]), str(dumps["scaled"]), "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["exit_code"] == 1 and doc["profile"] == "port"
    assert doc["paired_by"] == "files"
    item = doc["pairs"][0]["items"][0]
    assert item["status"] == "failed" and item["metrics"]["scale"] == pytest.approx(0.125)
    assert item["tolerance"]["min_row_cosine"] == 0.99
    assert doc["pairs"][0]["findings"][0]["code"] == "compare-scale"
    assert doc["summary"] == {
        "pairs": 1,
        "items": 3,
        "failed_items": 3,
        "errors": 3,
        "warnings": 0,
        "infos": 0,
    }


def test_json_has_no_bare_nan(dumps, tmp_path: Path, base) -> None:
    nan = [t.clone() for t in base]
    nan[0][0, 0] = float("nan")
    path = mmcli.dump_encoder_outputs(tmp_path / "nan.safetensors", nan)
    code, out, _ = _run(str(dumps["ref"]), str(path), "--format", "json")
    assert code == 1 and ": NaN" not in out and "Infinity" not in out
    assert json.loads(out)["pairs"][0]["findings"][0]["code"] == "compare-nonfinite"


@pytest.mark.parametrize(
    ("args", "first"),
    [
        (["missing.safetensors", "{ref}"], "error: missing.safetensors: no such file"),
        (["{ref}", "{dir}"], "error: {ref} is a file but {dir} is a directory"),
        (["{ref}", "{ref}", "--profile", "loose"], "error: Invalid value for '--profile'"),
        (["{ref}", "{ref}", "--rtol", "-1"], "error: --rtol -1.0 is negative"),
        (["{ref}", "{ref}", "--min-cosine", "2"], "error: --min-cosine 2.0 is outside"),
        (["{ref}", "{ref}", "--device", "tpu"], "error:"),
    ],
)
def test_bad_input_exit_2_two_lines(dumps, args: list[str], first: str) -> None:
    fill = {"ref": str(dumps["ref"]), "dir": str(dumps["dir"])}
    argv = [a.format(**fill) for a in args]
    proc = subprocess.run(
        [sys.executable, "-m", "mmcli", "compare", *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and len(lines) == 2, lines
    assert lines[0].startswith(first.format(**fill)) and lines[1].startswith("hint: ")
    assert "Traceback" not in proc.stderr


def test_unpairable_directories_hint_names_pair_order(tmp_path: Path, base) -> None:
    for side, name in (("a", "x"), ("b", "y")):
        (tmp_path / side).mkdir()
        mmcli.dump_encoder_outputs(tmp_path / side / f"{name}.safetensors", base)
    code, out, err = _run(str(tmp_path / "a"), str(tmp_path / "b"))
    assert code == 2 and out == ""
    assert err.splitlines()[1].startswith("hint: pass --pair order")
    code, out, _ = _run(str(tmp_path / "a"), str(tmp_path / "b"), "--pair", "order")
    assert code == 0 and "(paired by capture order)" in out


def test_help_does_not_import_torch() -> None:
    probe = (
        "import sys\nfrom mmcli.cli.main import main\n"
        "try:\n    main(['compare', '--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules and 'safetensors' not in sys.modules\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "--profile" in proc.stdout and "--pair" in proc.stdout


def test_library_export() -> None:
    assert "compare_dumps" in mmcli.__all__ and callable(mmcli.compare_dumps)
    assert torch is not None
