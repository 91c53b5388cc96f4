"""``kv-share plan``'s serve line and vLLM's own flags through the command line (CliRunner).

Facts used: vLLM 0.34.0 vllm/engine/arg_utils.py reads --kv-cache-memory-bytes with
human_readable_int (in human_readable_int_args; G = 2**30); vLLM 0.10.2 vllm/engine/arg_utils.py
is the first release with kv_cache_memory_bytes, read the same way."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from mmcli.cli.main import app

runner = CliRunner()
CONFIG = "samples/kv/qwen3-14b-like.json"
GIB = 2**30


def plan(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["kv-share", "plan", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def plan_json(*args: str, stdin: str | None = None) -> dict[str, object]:
    code, out, err = plan(*args, "--format", "json", stdin=stdin)
    assert code == 0, err
    doc: dict[str, object] = json.loads(out)
    return doc


def test_kv_cache_memory_bytes_option_is_the_memory() -> None:
    given = plan_json(CONFIG, "--kv-cache-memory-bytes", "20G", "--max-model-len", "32768")
    plain = plan_json(CONFIG, "--memory", "20GiB", "--max-model-len", "32768")
    assert given == plain
    in_bytes = plan_json(
        CONFIG, "--kv-cache-memory-bytes", str(20 * GIB), "--max-model-len", "32768"
    )
    assert in_bytes == plain


def test_kv_cache_memory_bytes_refused() -> None:
    code, _, err = plan(CONFIG, "--kv-cache-memory-bytes", "20GiB")
    assert code == 2
    assert "error: --kv-cache-memory-bytes must be a positive integer, got '20GiB'" in err
    code, _, err = plan(CONFIG, "--kv-cache-memory-bytes", "20G", "--memory", "20GiB")
    assert code == 2 and "give --memory or --kv-cache-memory-bytes, not both" in err
