"""Reading vLLM start-up logs: real excerpts from public issues, and logs made from a plan.

Each excerpt (vllm_logs/*.log) is a few lines quoted from the public issue SOURCES names (kept
short; lines not about the KV cache cut), with the prefixes, stage tags and formats vLLM printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mmcli.errors import InputError
from mmcli.kv.explain.vllm_log import parse_vllm_log, read_vllm_log, startup_lines

LOGS = Path(__file__).resolve().parents[1] / "vllm_logs"
#: Each excerpt: its file under vllm_logs/, and the public issue it is quoted from.
SOURCES = {
    # Qwen3-14B, one GPU, vLLM ~0.10.2
    "lmcache-1739": "https://github.com/LMCache/LMCache/issues/1739",
    # Llama-3.1-8B geometry: 128 KiB per token
    "vllm-20707": "https://github.com/vllm-project/vllm/pull/20707",
    # Qwen3-1.7B, LLM(max_model_len=1024)
    "vllm-33263": "https://github.com/vllm-project/vllm/issues/33263",
    # Qwen3-235B-A22B-FP8, --tensor-parallel-size 4
    "vllm-21348": "https://github.com/vllm-project/vllm/issues/21348",
    # Qwen3.6-35B-A3B NVFP4, RTX 5090, v0.24.0
    "club3090-612": "https://github.com/noonghunna/club-3090/issues/612",
    # a "[Stage-0]" tag after the prefix
    "vllm-omni-1160": "https://github.com/vllm-project/vllm-omni/pull/1160",
    # release and engine arguments, tp 2
    "vllm-24162": "https://github.com/vllm-project/vllm/pull/24162",
    # the start-up refusal, pipeline parallel
    "vllm-34076": "https://github.com/vllm-project/vllm/issues/34076",
    # no process prefix; a progress bar line
    "vllm-windows-build-4": "https://github.com/aivrar/vllm-windows-build/issues/4",
}


def excerpt(name: str) -> str:
    assert name in SOURCES, name
    return (LOGS / f"{name}.log").read_text(encoding="utf-8")


LMCACHE_1739 = excerpt("lmcache-1739")
VLLM_20707 = excerpt("vllm-20707")
VLLM_33263 = excerpt("vllm-33263")
VLLM_21348 = excerpt("vllm-21348")
CLUB3090_612 = excerpt("club3090-612")
OMNI_1160 = excerpt("vllm-omni-1160")
VLLM_24162 = excerpt("vllm-24162")
VLLM_34076 = excerpt("vllm-34076")
WINDOWS_4 = excerpt("vllm-windows-build-4")


def test_lmcache_1739() -> None:
    log = parse_vllm_log(LMCACHE_1739)
    assert [(r.label, r.gib) for r in log.available] == [("EngineCore_DP0 pid=1133552", 6.51)]
    assert (log.kv_cache_tokens, log.max_concurrency, log.max_model_len) == (42656, 1.30, 32768)
    assert log.release is None and log.lines_used == 3


def test_vllm_20707_blocks_line() -> None:
    log = parse_vllm_log(VLLM_20707)
    assert log.available[0].gib == 112.61 and log.available[0].label == "EngineCore_0 pid=1399537"
    assert (log.kv_cache_tokens, log.num_gpu_blocks, log.max_model_len) == (922496, 57656, 40000)
    assert log.max_concurrency == 23.06


def test_vllm_33263_and_21348_without_concurrency() -> None:
    log = parse_vllm_log(VLLM_33263)
    assert (log.min_available_gib, log.kv_cache_tokens, log.max_concurrency) == (
        18.78,
        175856,
        None,
    )
    assert log.max_model_len is None
    bare = parse_vllm_log(VLLM_21348)
    assert bare.available[0].label is None and bare.kv_cache_tokens == 178880


def test_club3090_612_args_and_release() -> None:
    log = parse_vllm_log(CLUB3090_612)
    assert log.release == "0.24.0"
    assert log.model == "~/.cache/huggingface/qwen3.6-35b-a3b-nvfp4"
    assert log.args["kv_cache_dtype"] == "fp8"
    assert log.args["enable_prefix_caching"] is True
    assert log.int_arg("max_num_batched_tokens") == 8192
    assert log.int_arg("max_num_seqs") == 1
    assert log.int_arg("max_model_len") == 131072
    assert (log.kv_cache_tokens, log.max_concurrency) == (567978, 4.33)


def test_stage_tag_and_ansi_colours() -> None:
    coloured = "\x1b[1;36m" + OMNI_1160.replace("INFO", "\x1b[32mINFO\x1b[0m")
    for text in (OMNI_1160, coloured):
        log = parse_vllm_log(text)
        assert log.available[0].gib == 100.43
        assert (log.kv_cache_tokens, log.max_concurrency, log.max_model_len) == (
            2925232,
            89.27,
            32768,
        )


def test_vllm_24162_release_and_engine_config() -> None:
    log = parse_vllm_log(VLLM_24162)
    assert log.release == "0.10.2.dev378+g4d7fe40fc.d20250829"
    assert log.model == "/data/datasets/models-hf/Qwen2.5-0.5B/"
    assert log.int_arg("tensor_parallel_size") == 2
    assert log.int_arg("pipeline_parallel_size") == 1
    assert log.int_arg("max_model_len") == 32768
    assert log.int_arg("max_num_batched_tokens") == 2048
    assert log.args["kv_cache_dtype"] == "auto"
    assert log.args["enable_prefix_caching"] is True
    assert log.args["dtype"] == "bfloat16"
    assert not log.has_kv_report()


def test_vllm_34076_refusal() -> None:
    log = parse_vllm_log(VLLM_34076)
    assert log.refusal is not None
    assert (log.refusal.max_model_len, log.refusal.needed_gib, log.refusal.available_gib) == (
        262144,
        24.0,
        3.18,
    )
    assert log.refusal.estimated_max_model_len == 34736
    assert log.max_model_len == 262144 and log.has_kv_report()


def test_windows_4_no_prefix() -> None:
    log = parse_vllm_log(WINDOWS_4)
    assert (log.kv_cache_tokens, log.max_concurrency, log.max_model_len) == (396928, 3.03, 131072)
    assert log.lines_used == 2


def test_several_ranks_are_all_kept() -> None:
    text = "\n".join(
        f"(Worker_TP{i} pid={100 + i}) INFO 01-01 00:00:00 [gpu_worker.py:1] "
        f"Available KV cache memory: {gib} GiB"
        for i, gib in enumerate((8.11, 8.02, 8.11, 8.05))
    )
    log = parse_vllm_log(text)
    assert [r.label for r in log.available] == [f"Worker_TP{i} pid={100 + i}" for i in range(4)]
    assert log.min_available_gib == 8.02


def test_generated_lines_read_back() -> None:
    lines = startup_lines(
        release="0.34.0",
        model="org/model",
        available_gib=20.0,
        kv_cache_tokens=123456,
        max_model_len=32768,
        max_concurrency=3.77,
        args={"max_model_len": 32768, "kv_cache_dtype": "fp8", "tensor_parallel_size": 2},
    )
    log = parse_vllm_log("\n".join(lines))
    assert (log.release, log.model) == ("0.34.0", "org/model")
    assert (log.min_available_gib, log.kv_cache_tokens, log.max_concurrency) == (20.0, 123456, 3.77)
    assert log.args["kv_cache_dtype"] == "fp8" and log.int_arg("tensor_parallel_size") == 2


def test_read_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    filler = "INFO 01-01 00:00:00 [loggers.py:1] Avg prompt throughput: 0.0 tokens/s\n" * 50_000
    path.write_text(LMCACHE_1739 + filler, encoding="utf-8")
    log = read_vllm_log(path, max_bytes=2**20)
    assert log.truncated and log.bytes_read <= 2**20
    assert log.kv_cache_tokens == 42656
    late = tmp_path / "late.log"
    late.write_text(filler + LMCACHE_1739, encoding="utf-8")
    with pytest.raises(InputError, match=r"the first [\d,]+ bytes of the log holds no KV-cache"):
        read_vllm_log(late, max_bytes=2**20)


def test_unreadable_inputs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no KV-cache report"):
        read_vllm_log(empty)
    with pytest.raises(InputError, match="(?i)is a directory"):
        read_vllm_log(tmp_path)
    binary = tmp_path / "binary.log"
    binary.write_bytes(b"\xff\xfe\x00" + LMCACHE_1739.encode())
    assert read_vllm_log(binary).kv_cache_tokens == 42656
