"""TensorRT-LLM's KV pool: published start-up logs reproduced, release rules, refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hf_configs import gemma

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.trtllm import TrtllmOptions, plan_trtllm, trtllm_rules
from mmcli.kv.trtllm.releases import RELEASES, UNREAD, trtllm_releases_help

CONFIGS = Path(__file__).parent / "configs"
GiB = 2**30
QWEN15_7B = CONFIGS / "Qwen--Qwen1.5-7B.json"


def plan(path: Path, **options: Any):  # type: ignore[no-untyped-def]
    return plan_trtllm(load_config(path), read_document(path), TrtllmOptions(**options))


@pytest.mark.parametrize("available_gib", [21.885, 21.89, 21.8949])
def test_qwen15_7b_matches_the_published_log(available_gib: float) -> None:
    # TensorRT-LLM#2268 (engine 0.13.0.dev2024082000, Qwen1.5-7B, 40 GB GPU, 64 tokens per
    # block): "Memory usage when calculating max tokens in paged kv cache: total: 39.39 GiB,
    # available: 21.89 GiB" → "Number of blocks in KV cache primary pool: 631". The log prints
    # the memory to 0.01 GiB: every value it may stand for gives 631.
    result = plan(QWEN15_7B, release="0.13", memory_bytes=int(available_gib * GiB))
    assert result.value("bytes_per_token") == 524_288  # 2 × 32 heads × 128 × 32 layers × 2 B
    assert result.value("blocks") == 631
    assert result.log_lines[0] == "Number of blocks in KV cache primary pool: 631"


def test_trtllm_faq_log_blocks_tokens_and_allocation(tmp_path: Path) -> None:
    # TensorRT-LLM docs, reference/memory.md (an "info" log): "available: 70.48 GiB" →
    # "Number of blocks in KV cache primary pool: 4060", "Number of tokens per block: 64.",
    # "Allocated 63.44 GiB for max tokens in paged KV cache (259840)". The log names no model;
    # 63.44 GiB / 259,840 tokens is 256 KiB per token, so the geometry here is one with 256
    # KiB per token (32 layers × 32 KV heads × 128, an 8-bit cache).
    layers = [{"name": f"l.{i}", "attention": "full"} for i in range(32)]
    doc = {
        "name": "faq",
        "defaults": {"num_kv_heads": 32, "head_size": 128, "dtype": "fp8"},
        "layers": layers,
        "max_model_len": 4096,
    }
    path = tmp_path / "faq.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    for gib in (70.475, 70.4849):
        result = plan(path, release="0.13", memory_bytes=int(gib * GiB))
        assert result.value("bytes_per_token") == 262_144
        assert result.log_lines == [
            "Number of blocks in KV cache primary pool: 4060",
            "Number of tokens per block: 64.",
            "[MemUsageChange] Allocated 63.44 GiB for max tokens in paged KV cache (259840).",
        ]


def test_pytorch_backend_budget_is_after_the_fraction() -> None:
    # 1.1: --memory is the logged budget (fraction applied): 20 GiB // 524,288 B = 40,960
    # tokens → ceil(40960 / 32) = 1,280 blocks of 32.
    result = plan(QWEN15_7B, memory_bytes=20 * GiB)
    assert result.release == "1.1"
    assert result.value("blocks") == 1280 and result.value("block_tokens") == 32
    assert result.to_json()["figures"]["blocks"]["engine"] == "trtllm"


def test_cpp_fraction_is_a_float() -> None:
    # 0.9f = 0.899999976…: a budget of ceil(100 × 524,288 / 0.9) = 58,254,223 B holds 100
    # tokens at a double 0.9 (52,428,800.7 B) but 99 at 0.9f (52,428,799.3 B); the C++ runtime
    # multiplies the float. The PyTorch path's --memory is already the product.
    result = plan(QWEN15_7B, release="0.13", memory_bytes=58_254_223, tokens_per_block=1)
    assert result.value("pool_tokens") == 99


def test_max_tokens_caps_the_pool() -> None:
    # 1.1: the smaller of the two; 0.13 without --free-gpu-memory-fraction: max_tokens alone.
    assert plan(QWEN15_7B, memory_bytes=20 * GiB, max_tokens=1000).value("blocks") == 32
    big = plan(QWEN15_7B, release="0.13", memory_bytes=GiB, max_tokens=64_000)
    assert big.value("blocks") == 1000
    both = plan(
        QWEN15_7B, release="0.13", memory_bytes=GiB, max_tokens=64_000, free_gpu_memory_fraction=0.9
    )
    assert both.value("blocks") == -(-int(0.9 * GiB / 524_288) // 64)


def test_mla_is_k_only() -> None:
    # DeepSeek-V3 on 1.1: (512 + 64) × 61 × 2 B = 70,272 B per token (SELFKONLY), any tp.
    path = CONFIGS / "deepseek-ai--DeepSeek-R1.as-DeepSeek-V3.json"
    assert plan(path, tp=8, memory_bytes=GiB).value("bytes_per_token") == 70_272
    with pytest.raises(InputError, match="MLA models are not mirrored for 0.13"):
        plan(path, release="0.13", memory_bytes=GiB)


def test_gpu_budget_is_an_estimate() -> None:
    result = plan(
        QWEN15_7B, gpu_bytes=round(39.39 * GiB), gpu_name="A100-40GB", weights_bytes=15 * 10**9
    )
    assert result.figures["blocks"].estimate is not None
    assert "upper bound" in (result.figures["budget_bytes"].estimate or "")


def test_sliding_models_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(gemma(12)), encoding="utf-8")
    with pytest.raises(InputError, match="VSWA"):
        plan(path, memory_bytes=GiB)


def test_kv_heads_not_dividing_tp_are_refused() -> None:
    with pytest.raises(InputError, match="do not divide over tp 3"):
        plan(QWEN15_7B, tp=3, memory_bytes=GiB)


def test_releases() -> None:
    assert trtllm_rules("0.13.0.dev2024082000").release == "0.13"
    assert trtllm_rules("v1.1.0rc2").release == "1.1"
    with pytest.raises(InputError, match="TensorRT-LLM 0.12 is not mirrored"):
        trtllm_rules("0.12")


@pytest.mark.parametrize("release", ["1.2", "1.2.0", "v1.2.1", "1.3.0rc7"])
def test_releases_whose_source_was_not_read_are_refused(release: str) -> None:
    # 1.2.0 / 1.2.1 are the newest stable tensorrt-llm on PyPI and 1.3.0rc7 a pre-release
    # NVIDIA's containers ship, but pip finds no wheel of them and no stored copy of the
    # PyTorch backend's KV-sizing files is at a commit of those releases (the release/1.2.1
    # pin 2fdb9e6 of triton-inference-server/tensorrtllm_backend#856 and the 1.2.0rc5-rc8 pins
    # are not among the stored versions): they are refused, naming why, rather than planned
    # with 1.1's rules.
    with pytest.raises(InputError, match=f"TensorRT-LLM {release} is not mirrored") as info:
        trtllm_rules(release)
    message = str(info.value)
    assert "pip finds no tensorrt-llm" in message
    assert "_torch/pyexecutor/_util.py, resource_manager.py or llmapi/llm_args.py" in message
    assert info.value.hint == "use one of the releases read: 0.13, 1.1"
    assert trtllm_rules(None).release == "1.1"


def test_the_unread_releases_name_what_they_change() -> None:
    # 1.2: the per-window (VSWA) pools, max_gpu_total_bytes, use_kv_cache_manager_v2;
    # 1.3 pre-releases: the V2 manager ('auto'), named as the reason.
    with pytest.raises(InputError, match="per-window \\(VSWA\\) pools, max_gpu_total_bytes"):
        trtllm_rules("1.2.1")
    with pytest.raises(InputError, match="KV cache manager V2 .*use_kv_cache_manager_v2"):
        trtllm_rules("1.3.0rc7")
    with pytest.raises(InputError, match="its KV-sizing source was not read"):
        trtllm_rules("0.12")


def test_the_version_help_is_formatted_from_the_tables() -> None:
    text = trtllm_releases_help()
    for rules in RELEASES:
        assert f"{rules.release}: " in text
    for unread in UNREAD:
        assert f"{unread.series}.x ({unread.known})" in text
    assert "1.1: PyTorch backend, the default" in text


def test_non_positive_sizes_are_refused() -> None:
    with pytest.raises(InputError, match="must be positive"):
        plan(QWEN15_7B, memory_bytes=GiB, tokens_per_block=0)
