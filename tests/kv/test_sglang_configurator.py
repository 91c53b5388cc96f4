"""SGLang 0.5.14 – 0.5.23: the configurator releases, for dense (MHA / GQA) and MLA models.

Read in each release's wheel (``pip download --no-deps sglang==VER``): 0.5.14 and 0.5.15
size the pool in ``srt/model_executor/model_runner_kv_cache_mixin.py`` with
``model_executor/pool_configurator.py``; 0.5.16 on in ``srt/mem_cache/kv_cache_configurator.py``
(KVCacheConfigurator) with the same pool configurators. Each number is evaluated by hand
beside the formula it comes from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang

CONFIGS = Path(__file__).parent / "configs"
QWEN3_235B = CONFIGS / "Qwen--Qwen3-235B-A22B-FP8.json"
DEEPSEEK_V3 = CONFIGS / "deepseek-ai--DeepSeek-R1.as-DeepSeek-V3.json"
GiB = 2**30
CONFIGURATOR = tuple(f"0.5.{n}" for n in range(14, 24))


def plan(path: Path, **options: Any):  # type: ignore[no-untyped-def]
    return plan_sglang(load_config(path), read_document(path), SglangOptions(**options))


@pytest.mark.parametrize("release", ["0.5.14", "0.5.16", "0.5.23"])
def test_page_floor_after_the_token_cap(release: str) -> None:
    # 0.5.14 pool_configurator.py:226 floors 223,101 to the page: 223,101 // 64 × 64 =
    # 223,040; with --max-total-tokens 100,001 (mixin :967 min(capacity, user)) the
    # configurator re-runs calculate_pool_sizes_from_max_tokens (:232): 100,001 // 64 × 64
    # = 99,968 (0.5.16 kv_cache_configurator.py:1679 config_from_budget, the same).
    base = {"release": release, "tp": 4, "memory_bytes": 10 * GiB, "page_size": 64}
    assert plan(QWEN3_235B, **base).value("pool_tokens") == 223_040
    capped = plan(QWEN3_235B, **base, max_total_tokens=100_001)
    assert capped.value("pool_tokens") == 99_968
    assert capped.value("blocks") == 99_968 // 64


@pytest.mark.parametrize("release", CONFIGURATOR)
def test_max_running_requests_is_capped_at_half_the_capacity(release: str) -> None:
    # 0.5.14 mixin :990 (0.5.16 kv_cache_configurator.py:1632, 0.5.23 :3129): with
    # --max-running-requests R, min(R, capacity // 2): capacity 6000 (--max-total-tokens),
    # R 5000 → min(5000, 3000) = 3000. 0.5.13 (mixin :885) capped R at the estimate instead:
    # max(int(6000 / 40960 × 512) = 75, 2048) = 2048 → min(5000, 2048) = 2048.
    options: dict[str, Any] = {
        "tp": 4,
        "memory_bytes": 10 * GiB,
        "max_total_tokens": 6000,
        "max_running_requests": 5000,
    }
    assert plan(QWEN3_235B, release=release, **options).value("max_running_requests") == 3000
    assert plan(QWEN3_235B, release="0.5.13", **options).value("max_running_requests") == 2048


@pytest.mark.parametrize("release", ["0.5.14", "0.5.23"])
def test_a_budget_the_weights_leave_non_positive_is_its_own_error(release: str) -> None:
    # 0.5.14 mixin :103 (0.5.16 kv_cache_configurator.py:1553): rest ≤ 0 raises "Loaded
    # weights leave no GPU memory for the KV cache under --mem-fraction-static=…" before the
    # pool is sized; 0.5.13 went on to "Not enough memory" (pool_configurator.py
    # MemoryPoolConfig.__post_init__). 80 GiB × 0.2 − 80 GiB / 4 = 16 − 20 GiB < 0.
    gpu = {"gpu_bytes": 80 * GiB, "gpu_name": "H100", "weights_bytes": 80 * GiB}
    new = plan(QWEN3_235B, release=release, tp=4, mem_fraction_static=0.2, **gpu)
    assert new.refusal is not None and "Loaded weights leave no GPU memory" in new.refusal
    assert plan(QWEN3_235B, release=release, tp=4, memory_bytes=0).refusal == new.refusal
    old = plan(QWEN3_235B, release="0.5.13", tp=4, mem_fraction_static=0.2, **gpu)
    assert old.refusal is not None and "Not enough memory" in old.refusal
    # A positive budget under one cell still stops with "Not enough memory" (0.5.14
    # pool_configurator.py:57).
    small = plan(QWEN3_235B, release=release, tp=4, memory_bytes=1000)
    assert small.refusal is not None and "Not enough memory" in small.refusal


@pytest.mark.parametrize("release", ["0.5.18", "0.5.23"])
def test_multimodal_budget_loses_the_runtime_reserve_from_0_5_18(
    tmp_path: Path, release: str
) -> None:
    # 0.5.18 mem_cache/kv_cache_configurator.py:1789 (0.5.23 :3038): rest_memory =
    # available − slack − mm_runtime_reservation_gb; :130 (0.5.23 the same function):
    # SGLANG_VLM_CACHE_SIZE_MB (environ.py:1146, 0.5.23 :1598: 100) / 1024, plus
    # SGLANG_MM_FEATURE_CACHE_MB (1024) only with the cuda_ipc / cuda_vmm transport. A
    # single-node launch resolves the transport to cpu (0.5.18 server_args.py:7911 ``if
    # self.nnodes == 1: requested_transport = "cpu"``, 0.5.23 arg_groups/serving_hook.py:839),
    # so the reserve is 100 MiB. 0.5.17 has no such reserve.
    doc = json.loads(QWEN3_235B.read_text())
    path = tmp_path / "config.json"
    # Multimodal by SGLang's architecture list (0.5.18 configs/model_config.py:1822, which
    # names Qwen3VLMoeForConditionalGeneration), not by the vision_config alone.
    mm = {**doc, "vision_config": {"hidden_size": 1024}}
    mm["architectures"] = ["Qwen3VLMoeForConditionalGeneration"]
    path.write_text(json.dumps(mm), "utf-8")
    # --memory is rest_memory, after the reserve: 10 GiB // 48,128 B (94 layers × K+V × 1
    # head per rank × 128 × 2 B) = 223,101 tokens on 0.5.17 and on 0.5.18 on alike.
    for name in (release, "0.5.17"):
        assert plan(path, release=name, tp=4, memory_bytes=10 * GiB).value("pool_tokens") == (
            223_101
        )
    # From --gpu: int(80 GiB × 0.8) − 16 GiB / 4 = 60 GiB = 64,424,509,440 B, less 100 MiB
    # (104,857,600 B) = 64,319,651,840 B; the text-only config keeps all 60 GiB.
    gpu = {"gpu_bytes": 80 * GiB, "gpu_name": "H100", "weights_bytes": 16 * GiB}
    vlm = plan(path, release=release, tp=4, mem_fraction_static=0.8, **gpu)
    assert vlm.figures["budget_bytes"].value == 64_319_651_840
    assert "mm_runtime_reservation_gb's 100 MiB" in (vlm.figures["budget_bytes"].estimate or "")
    text = plan(QWEN3_235B, release=release, tp=4, mem_fraction_static=0.8, **gpu)
    assert text.figures["budget_bytes"].value == 64_424_509_440
    old = plan(path, release="0.5.17", tp=4, mem_fraction_static=0.8, **gpu)
    assert old.figures["budget_bytes"].value == 64_424_509_440


@pytest.mark.parametrize("release", ["0.5.18", "0.5.23"])
def test_default_fraction_is_planned(release: str) -> None:
    # 0.5.18 server_args.py:4802 (0.5.23 arg_groups/memory_hook.py handle_gpu_memory_settings,
    # reserve :309 – :325): Qwen3-235B-A22B (not MLA) at tp 4 on 81,920 MiB: chunk 8192, max_bs
    # 512, 58 prefill counts: 512 + 12,288 + 1,024 + 512 + 464 = 14,800 MiB;
    # round(67,120 / 81,920, 3) = 0.819; budget int(80 GiB × 0.819) − 16 GiB / 4.
    gpu = {"gpu_bytes": 80 * GiB, "gpu_name": "H100", "weights_bytes": 16 * GiB}
    result = plan(QWEN3_235B, release=release, tp=4, **gpu)
    assert result.figures["budget_bytes"].value == int(80 * GiB * 0.819) - 4 * GiB
    assert "mem_fraction_static 0.819" in result.reserves
