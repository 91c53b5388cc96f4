"""SGLang and TensorRT-LLM start-up logs: read, and explained against the config's plan.

The KV lines are the published ones (cited); the SGLang ``server_args`` line is written from
the launch command published with it (``--tp 4 --mem-fraction-static 0.93``), in the form
SGLang prints it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mmcli.errors import InputError
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


# --- SGLang 0.5.5 – 0.5.23: the KV line's wording, and which releases' rules reproduce a log ---
#
# The KV line (mem_cache/memory_pool.py, MHATokenToKVPool / MLATokenToKVPool):
#   0.5.4 :453  0.5.5 :509  0.5.6 :479  0.5.7 :562  0.5.8 :605  0.5.9 :652  0.5.10 :696
#   0.5.11 :735  0.5.12 :744  "KV Cache is allocated. #tokens: {n}, K size: {k:.2f} GB, V size: …"
#   0.5.13 :819  0.5.14 :1023  0.5.15 :1242  0.5.16 :1616
#       "KV Cache is allocated. dtype: {self.dtype}, #tokens: {n}, K size: …" (MLA: "KV size")
#   0.5.17 :1670 – 0.5.23 :2089  the same words split over f-strings, "{label} KV Cache" for a
#       labelled (SWA / Full) pool; from 0.5.18 "KV Cache VA upper bound." when the
#       post-capture resize is on.
# The scheduler line (managers/scheduler.py: 0.5.4 :378, 0.5.9 :623, 0.5.13 :877, 0.5.14 :936,
# 0.5.17 :1069, 0.5.23 :1269) is the same in every release: "max_total_num_tokens=…,
# chunked_prefill_size=…, max_prefill_tokens=…, max_running_requests=…, context_len=…,
# available_gpu_mem=… GB". No release logs its version at start-up (sglang.version.__version__
# is only served: entrypoints/http_server.py, engine.py get_server_info).

DTYPE_LINE = SGLANG_LOG.replace("allocated. #tokens", "allocated. dtype: torch.bfloat16, #tokens")


def test_sglang_kv_line_wordings_are_read() -> None:
    log = parse_sglang_log(DTYPE_LINE)
    assert log is not None and log.tokens == 367_404 and log.k_gib == 8.23
    assert log.kv_line_dtype == "torch.bfloat16" and not log.va_upper_bound
    mla = parse_sglang_log(
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 60000, KV size: 0.13 GB\n"
    )
    assert mla is not None and mla.mla and mla.k_gib == 0.13
    va = parse_sglang_log(SGLANG_LOG.replace("is allocated", "VA upper bound"))
    assert va is not None and va.va_upper_bound


def test_sglang_log_without_dtype_is_of_releases_to_0_5_12() -> None:
    log = parse_sglang_log(SGLANG_LOG)
    assert log is not None
    result = explain_sglang(*_doc(QWEN3_235B), log)
    assert result.matches
    assert result.releases_matching[0] == "0.4.6.post5"
    assert result.releases_matching[-1] == "0.5.12"
    assert "0.5.13" not in result.releases_matching
    assert result.to_json(exit_code=0)["releases_matching"] == result.releases_matching


def test_sglang_log_with_dtype_is_of_0_5_13_on() -> None:
    log = parse_sglang_log(DTYPE_LINE)
    assert log is not None
    result = explain_sglang(*_doc(QWEN3_235B), log)
    assert result.matches
    assert result.releases_matching[0] == "0.5.13" and result.releases_matching[-1] == "0.5.23"


def test_sglang_server_args_field_narrows_the_releases() -> None:
    # dcp_size is a ServerArgs field from 0.5.15 (server_args.py:823 there; not in 0.5.14).
    log = parse_sglang_log(DTYPE_LINE.replace("tp_size=4,", "tp_size=4, dcp_size=1,"))
    assert log is not None and log.arg_markers == ["dcp_size"]
    result = explain_sglang(*_doc(QWEN3_235B), log)
    assert result.releases_matching[0] == "0.5.15"
    assert any("dcp_size (first in SGLang 0.5.15)" in note for note in result.notes)


def test_sglang_request_cap_rule_tells_releases_apart() -> None:
    # --max-running-requests 300000 with context_len 40960: 0.5.14 on cap it at capacity // 2
    # (model_runner_kv_cache_mixin.py _resolve_max_num_reqs) = 367404 // 2 = 183702; 0.5.13
    # sizes the request pool from the capacity, min(max(367404 / 40960 * 512, 2048), 4096) =
    # 4096 (model_executor/pool_configurator.py), and the scheduler takes the smaller.
    text = DTYPE_LINE.replace("tp_size=4,", "tp_size=4, max_running_requests=300000,")
    text += (
        "max_total_num_tokens=367404, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests={running}, context_len=40960, available_gpu_mem=5.00 GB\n"
    )
    capped = parse_sglang_log(text.format(running=183702))
    assert capped is not None
    result = explain_sglang(*_doc(QWEN3_235B), capped)
    assert result.matches and result.releases_matching[0] == "0.5.14"
    pooled = parse_sglang_log(text.format(running=4096))
    assert pooled is not None
    result = explain_sglang(*_doc(QWEN3_235B), pooled)
    assert result.releases_matching == ["0.5.13"]
    neither = parse_sglang_log(text.format(running=5000))
    assert neither is not None
    result = explain_sglang(*_doc(QWEN3_235B), neither)
    assert not result.matches and result.releases_matching == []


def test_sglang_va_upper_bound_line_is_refused() -> None:
    log = parse_sglang_log(DTYPE_LINE.replace("is allocated", "VA upper bound"))
    assert log is not None
    with pytest.raises(InputError, match="VA upper bound"):
        explain_sglang(*_doc(QWEN3_235B), log)
