"""`mmcli kv-share explain` end to end: the table, the JSON document, exit codes, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "samples" / "vllm" / "startup.log"  # LMCache/LMCache#1739, Qwen3-14B
CONFIG = ROOT / "samples" / "kv" / "qwen3-14b-like.json"
runner = CliRunner()


def explain(*args: str) -> Any:
    return runner.invoke(app, ["kv-share", "explain", *args], catch_exceptions=False)


def test_table_reproduces_the_sample_log() -> None:
    result = explain(str(LOG), "--config", str(CONFIG))
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "GPU KV cache size (tokens)" in out and "42,656" in out
    assert "1.30×" in out
    assert "the plan reproduces the log" in out
    assert result.stderr == ""


def test_json_document() -> None:
    result = explain(
        str(LOG), "--config", str(CONFIG), "--format", "json", "--vllm-version", "0.10"
    )
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["matches"] is True and doc["exit_code"] == 0
    assert (
        doc["vllm_rules"] == "vLLM 0.10 rules (those of 0.10.2)"
        and doc["release_source"] == "option"
    )
    assert doc["log"]["kv_cache_tokens"] == 42656
    assert doc["log"]["available_kv_cache_gib"] == [
        {"process": "EngineCore_DP0 pid=1133552", "gib": 6.51}
    ]
    figures = {c["figure"]: c for c in doc["comparisons"]}
    assert figures["GPU KV cache size (tokens)"]["planned"] == "42,624 – 42,688"
    assert figures["Maximum concurrency"]["status"] == "match"


def test_a_difference_exits_1_and_is_explained(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    text = LOG.read_text(encoding="utf-8").replace("42,656 tokens", "40,000 tokens")
    log.write_text(text, encoding="utf-8")
    result = explain(str(log), "--config", str(CONFIG))
    assert result.exit_code == 1
    assert "differs" in result.stdout
    assert "corresponds to about 6.11 GiB" in result.stdout  # 6.51 × 40,000 / 42,624
    assert "the plan differs from the log" in result.stdout


def test_bad_inputs_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("INFO nothing to see\n", encoding="utf-8")
    result = explain(str(empty), "--config", str(CONFIG))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and "holds no KV-cache report" in result.stderr
    missing = explain(str(tmp_path / "none.log"), "--config", str(CONFIG))
    assert missing.exit_code == 2 and "cannot read" in missing.stderr
    result = explain(str(LOG), "--config", str(CONFIG), "--vllm-version", "x.y")
    assert result.exit_code == 2 and "cannot read 'x.y' as a vLLM release" in result.stderr


def _refused(result: Any, *words: str) -> None:
    assert result.exit_code == 2, result.stdout + result.stderr
    error, hint = result.stderr.splitlines()
    assert error.startswith("error: ") and hint.startswith("hint: ")
    for word in words:
        assert word in error + hint


def test_a_malformed_figure_is_not_a_crash(tmp_path: Path) -> None:
    # Before: float('1.2.3') escaped as an internal error (exit 3).
    log = tmp_path / "bad.log"
    log.write_text("INFO Available KV cache memory: 1.2.3 GiB\n", encoding="utf-8")
    _refused(explain(str(log), "--config", str(CONFIG)), "no KV-cache report")


def test_the_log_can_come_from_stdin() -> None:
    # Before: '-' was opened as a file named '-' (exit 2, "No such file or directory").
    with LOG.open("rb") as stream:
        result = runner.invoke(
            app, ["kv-share", "explain", "-", "--config", str(CONFIG)], input=stream.read()
        )
    assert result.exit_code == 0, result.stderr
    assert "42,656" in result.stdout


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    # Before: open() waited for a writer forever. Run in a child, so a hang fails the test.
    import os
    import subprocess
    import sys

    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    command = [sys.executable, "-m", "mmcli", "kv-share", "explain", str(fifo), "--config"]
    done = subprocess.run(
        [*command, str(CONFIG)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 2
    error, hint = done.stderr.splitlines()
    assert "not a regular file" in error and "log" in hint


def test_max_mib_is_checked_and_allocates_nothing_up_front() -> None:
    # Before: --max-mib 0 gave an error naming --max-bytes and no hint; a huge value
    # allocated that much up front (MemoryError, exit 3).
    _refused(explain(str(LOG), "--config", str(CONFIG), "--max-mib", "0"), "--max-mib")
    result = explain(str(LOG), "--config", str(CONFIG), "--max-mib", str(10**8))
    assert result.exit_code == 0, result.stderr


def test_crafted_lines_cost_linear_work(tmp_path: Path) -> None:
    # Lines built for the old patterns' backtracking: a lazy label before repeated pid=, an
    # unclosed brace after "non-default args: {", an unclosed engine-config parenthesis;
    # each just under the longest line read, and one far over it. Before, one such line
    # took minutes; the child's time limit makes a regression fail rather than hang.
    import subprocess
    import sys

    near = 60_000
    lines = [
        "(A" + " pid=1" * (near // 6) + " Available KV cache memory: 1.00 GiB",
        "non-default args: {" + "'a': 1, {" * (near // 10),
        "LLM engine (" + "x" * near + " with config: model='m'",
        "(" + "A pid=1 " * 200_000,
    ]
    log = tmp_path / "crafted.log"
    log.write_text("\n".join([*lines, *LOG.read_text(encoding="utf-8").splitlines()]) + "\n")
    command = [sys.executable, "-m", "mmcli", "kv-share", "explain", str(log), "--config"]
    done = subprocess.run(
        [*command, str(CONFIG)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode in (0, 1), done.stderr


_HUGE_TOKENS = "9" * 5000
_HUGE_CONCURRENCY = "9" * 400


@pytest.mark.parametrize(
    ("old", "new", "line", "shown", "words"),
    [
        ("1.30x", "1..3x", 3, "'1..3x'", "not a well-formed number"),
        ("1.30x", "infx", 3, "'infx'", "not a well-formed number"),
        ("1.30x", "nanx", 3, "'nanx'", "not a well-formed number"),
        ("1.30x", "1.30", 3, "'1.30'", "not a well-formed number"),
        ("1.30x", f"{_HUGE_CONCURRENCY}x", 3, "characters left out", "larger than any engine"),
        ("1.30x", "1000000000.01x", 3, "'1000000000.01x'", "at most 1,000,000,000"),
        ("32,768 tokens per", "1e9 tokens per", 3, "'1e9'", "not a well-formed number"),
        ("42,656 tokens", f"{_HUGE_TOKENS} tokens", 2, "characters left out", "larger than"),
        ("42,656 tokens", "9007199254740993 tokens", 2, "'9007199254740993'", "9,007,199"),
        ("42,656 tokens", "42,65,6 tokens", 2, "'42,65,6'", "not a well-formed number"),
        ("42,656 tokens", "-42656 tokens", 2, "'-42656'", "not a well-formed number"),
    ],
)
def test_a_figure_no_engine_prints_is_refused_naming_its_line(
    tmp_path: Path, old: str, new: str, line: int, shown: str, words: str
) -> None:
    # Before: the line was passed over and the rest of the log explained (exit 0).
    log = tmp_path / "hostile.log"
    text = LOG.read_text(encoding="utf-8")
    assert old in text
    log.write_text(text.replace(old, new), encoding="utf-8")
    result = explain(str(log), "--config", str(CONFIG))
    _refused(result, f"line {line}:", shown, words)
    assert len(result.stderr.splitlines()[0]) < 300


def test_a_block_count_beyond_any_engine_is_refused(tmp_path: Path) -> None:
    # Before: a generic "number too large" error that named no line.
    log = tmp_path / "blocks.log"
    text = LOG.read_text(encoding="utf-8")
    log.write_text(f"INFO 10-03 16:22:17 # GPU blocks: {'7' * 5000}\n{text}", encoding="utf-8")
    _refused(explain(str(log), "--config", str(CONFIG)), "line 1:", "GPU blocks", "larger than")
