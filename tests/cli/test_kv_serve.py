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
    code, out, err = plan("--format", "json", *args, stdin=stdin)
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


LINE = f"vllm serve {CONFIG} -tp 2 --max-model-len 32k --host 0.0.0.0"
AS_OPTIONS = (CONFIG, "-tp", "2", "--max-model-len", "32000", "--memory", "20GiB")


def without_serve(doc: dict[str, object]) -> dict[str, object]:
    serve = doc.pop("serve")
    assert isinstance(serve, dict)
    assert serve["applied"] == {"tensor_parallel_size": 2, "max_model_len": 32_000}
    assert serve["not_affecting"] == ["--host"]
    return doc


def test_serve_text_file_stdin_and_trailing_line_plan_alike(tmp_path) -> None:
    plain = plan_json(*AS_OPTIONS)
    (tmp_path / "serve.sh").write_text(LINE + "\n")
    for args, stdin in [
        (("--serve", LINE), None),
        (("--serve", f"@{tmp_path / 'serve.sh'}"), None),
        (("--serve", "-"), LINE),
        (("--", *LINE.split()), None),
    ]:
        doc = plan_json("--memory", "20GiB", *args, stdin=stdin)
        assert without_serve(doc) == plain, args


def test_what_follows_the_separator_is_the_serve_line() -> None:
    """An mmcli option after -- is read as a vllm serve flag, which --memory is not."""
    code, _, err = plan("--", "vllm", "serve", CONFIG, "--memory", "20GiB")
    assert code == 2
    assert "error: --serve: --memory is not a flag of vllm serve in any mirrored release" in err


def test_unknown_mmcli_option_is_still_an_error() -> None:
    code, _, err = plan(CONFIG, "--memory", "20GiB", "--host", "0.0.0.0")
    assert code == 2 and "No such option: --host" in err
    code, _, err = plan("--host", "0.0.0.0", "--", "vllm", "serve", CONFIG)
    assert code == 2 and "No such option: --host" in err


def test_serve_option_and_trailing_line_refused_together() -> None:
    code, out, err = plan("--memory", "20GiB", "--serve", LINE, "--", *LINE.split())
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "error: give the serve line once: --serve or after --",
        "hint: kv-share plan [OPTIONS] -- vllm serve MODEL [FLAGS], or --serve 'vllm serve …'",
    ]


def test_older_release_flag() -> None:
    """vLLM 0.16.0 vllm/engine/arg_utils.py registers --disable-log-requests; 0.17.0's does
    not."""
    line = ("--", "vllm", "serve", CONFIG, "--disable-log-requests")
    doc = plan_json("--memory", "20GiB", "--vllm-version", "0.16.0", *line)
    assert doc["serve"] == {
        "release": "0.16.0",
        "applied": {},
        "not_affecting": ["--disable-log-requests"],
    }
    code, _, err = plan("--memory", "20GiB", "--vllm-version", "0.17.0", *line)
    assert code == 2
    assert "error: --serve: --disable-log-requests was removed after vLLM 0.16.0" in err


def test_kv_flag_not_modelled_refused_naming_it() -> None:
    """vLLM 0.34.0 vllm/engine/arg_utils.py registers --kv-offloading-size (CacheConfig) and
    --kv-transfer-config: KV blocks offloaded to CPU memory or moved by a connector."""
    for flags in (["--kv-offloading-size", "10"], ["--kv-transfer-config", '{"kv_role": "x"}']):
        code, out, err = plan("--memory", "20GiB", "--", "vllm", "serve", CONFIG, *flags)
        assert code == 2 and out == ""
        error, hint = err.splitlines()
        assert error.startswith(f"error: --serve: {flags[0]} changes the KV memory")
        assert hint == f"hint: plan without {flags[0]}"
