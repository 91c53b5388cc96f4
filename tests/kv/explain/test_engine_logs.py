"""SGLang and TensorRT-LLM start-up logs: read, and explained against the config's plan.

The KV lines are the published ones (cited); the SGLang ``server_args`` line is written from
the launch command published with it (``--tp 4 --mem-fraction-static 0.93``), in the form
SGLang prints it.
"""

from __future__ import annotations

from pathlib import Path

from mmcli.kv.explain.engine_logs import (
    MAX_LINE,
    SglangLog,
    TrtllmLog,
    engine_log_of,
    parse_sglang_log,
    parse_trtllm_log,
)
from mmcli.kv.explain.engines import explain_sglang, explain_trtllm
from mmcli.kv.inputs.layer_config import load_config, read_document

CONFIGS = Path(__file__).parents[1] / "configs"
QWEN3_235B = CONFIGS / "Qwen--Qwen3-235B-A22B-FP8.json"
QWEN15_7B = CONFIGS / "Qwen--Qwen1.5-7B.json"

# vllm#21348 (SGLang, Qwen3-235B-A22B-FP8 on 4×H100).
SGLANG_LOG = (
    "[2025-07-22 10:00:00] server_args=ServerArgs(model_path='/path/to/Qwen3-235B-A22B-FP8', "
    "tp_size=4, mem_fraction_static=0.93, page_size=1, kv_cache_dtype='auto', "
    "enable_dp_attention=False)\n"
    "[2025-07-22 10:01:00 TP0] KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, "
    "V size: 8.23 GB\n"
)
# TensorRT-LLM#2268 (0.13.0.dev2024082000, Qwen1.5-7B-sft).
TRTLLM_LOG = (
    "[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: "
    "39.39 GiB, available: 21.89 GiB\n"
    "[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 631\n"
)


def _doc(path: Path) -> tuple:  # type: ignore[type-arg]
    return load_config(path), read_document(path)


def test_sglang_log_is_read() -> None:
    log = parse_sglang_log(SGLANG_LOG)
    assert log is not None and log.tokens == 367_404 and log.k_gib == 8.23 and not log.mla
    assert log.args["tp_size"] == "4" and log.args["mem_fraction_static"] == "0.93"


def test_sglang_log_is_explained() -> None:
    log = parse_sglang_log(SGLANG_LOG)
    assert log is not None
    result = explain_sglang(*_doc(QWEN3_235B), log)
    assert result.matches
    statuses = {row.figure: row.status for row in result.rows}
    assert statuses["K size"] == "match"
    assert statuses["K size, bytes per token per buffer"] == "match"


def test_sglang_log_with_another_tp_differs() -> None:
    # At tp 2 a rank holds 2 KV heads: 96,256 B per token, 16.47 GB K buffers, not 8.23.
    log = parse_sglang_log(SGLANG_LOG.replace("tp_size=4", "tp_size=2"))
    assert log is not None
    result = explain_sglang(*_doc(QWEN3_235B), log)
    assert not result.matches


def test_trtllm_log_is_read_and_explained() -> None:
    log = parse_trtllm_log(TRTLLM_LOG)
    assert log is not None and log.path == "cpp" and log.available_gib == 21.89
    result = explain_trtllm(*_doc(QWEN15_7B), log)
    assert result.release == "0.13" and result.matches
    assert result.rows[0].planned == "631"


def test_trtllm_log_with_another_block_count_differs() -> None:
    log = parse_trtllm_log(TRTLLM_LOG.replace("pool: 631", "pool: 700"))
    assert log is not None
    assert not explain_trtllm(*_doc(QWEN15_7B), log).matches


def test_pytorch_backend_line_gives_the_kv_size() -> None:
    # The PyTorch backend's line (tensorrt_llm/_torch/pyexecutor/_util.py, _cal_max_memory).
    line = (
        "Peak memory during memory usage profiling (torch + non-torch): 20.10 GiB, available "
        "KV cache memory when calculating max tokens: 40.00 GiB, fraction is set 0.9, kv size "
        "is 524288. device total memory 79.11 GiB, , tmp kv_mem 0.50 GiB\n"
    )
    log = parse_trtllm_log(line)
    assert log is not None and log.path == "pytorch" and log.kv_size_per_token == 524_288
    result = explain_trtllm(*_doc(QWEN15_7B), log)
    assert result.release == "1.1"
    assert result.rows[0].status == "match"


def test_other_logs_and_hostile_lines_are_not_engine_logs(tmp_path: Path) -> None:
    assert parse_sglang_log("INFO Available KV cache memory: 8.11 GiB\n") is None
    assert parse_trtllm_log("GPU KV cache size: 178,880 tokens\n") is None
    long = "KV Cache is allocated. #tokens: 5, K size: 1.00 GB, V size: 1.00 GB" + "x" * MAX_LINE
    assert parse_sglang_log(long) is None
    assert parse_sglang_log("KV Cache is allocated. #tokens: 99999999999999999999, K s") is None
    assert engine_log_of(b"\xff\xfe not utf-8 \x00\n") is None
    assert isinstance(engine_log_of(SGLANG_LOG.encode()), SglangLog)
    assert isinstance(engine_log_of(TRTLLM_LOG.encode()), TrtllmLog)


# TensorRT-LLM prints its release when imported (tensorrt_llm/__init__.py:
# "[TensorRT-LLM] TensorRT-LLM version: X"); a log that names an unmirrored release is refused.
PYTORCH_LINE = (
    "Peak memory during memory usage profiling (torch + non-torch): 20.10 GiB, available "
    "KV cache memory when calculating max tokens: 40.00 GiB, fraction is set 0.9, kv size "
    "per token is 524288. device total memory 79.11 GiB, , tmp kv_mem 0.50 GiB\n"
)


def test_the_version_line_names_the_release() -> None:
    log = parse_trtllm_log("[TensorRT-LLM] TensorRT-LLM version: 1.1.0\n" + PYTORCH_LINE)
    assert log is not None and log.release == "1.1.0"
    result = explain_trtllm(*_doc(QWEN15_7B), log)
    assert result.release == "1.1"
    assert "the log is of TensorRT-LLM 1.1.0 (its version line)" in result.notes


def test_a_log_without_the_version_line_says_which_rules() -> None:
    log = parse_trtllm_log(PYTORCH_LINE)
    assert log is not None and log.release is None
    result = explain_trtllm(*_doc(QWEN15_7B), log)
    assert any("no 'TensorRT-LLM version' line" in note for note in result.notes)


def test_a_log_of_an_unmirrored_release_is_refused() -> None:
    import pytest

    from mmcli.errors import InputError

    for release in ("1.2.0", "1.3.0rc7"):
        log = parse_trtllm_log(f"[TensorRT-LLM] TensorRT-LLM version: {release}\n" + PYTORCH_LINE)
        assert log is not None
        with pytest.raises(InputError) as caught:
            explain_trtllm(*_doc(QWEN15_7B), log)
        assert f"the log is of TensorRT-LLM {release} (its version line)" in str(caught.value)
        assert "were not read" in str(caught.value) or "was not read" in str(caught.value)
