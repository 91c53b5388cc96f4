"""SGLang 0.5.8 / 0.5.9's hybrid sliding-window pool (mmcli/kv/sglang/swa.py).

Read from the wheels (sglang/srt):
* configs/model_config.py ``is_hybrid_swa_model`` (0.5.8 :1220, 0.5.9 :1320): Llama 4,
  GPT-OSS, MiMo-V2-Flash / MTP (0.5.9 adds Step-3.5); ``get_hybrid_layer_ids``: GPT-OSS's
  sliding layers from ``layer_types``, Llama 4's every layer with (i + 1) % 4 != 0.
* server_args.py ``swa_full_tokens_ratio: float = 0.8`` (0.5.8 :325, 0.5.9 :339); Gemma 2/3/3n
  and Olmo 2 get ``disable_hybrid_swa_memory`` (not on the list either); GPT-OSS on SM100 gets
  trtllm_mha, which turns the pool off (0.5.8 :1257 – :1282, 0.5.9 :1333 – :1358).
* model_executor/model_runner_kv_cache_mixin.py: the cell (0.5.9 :82 sums F·n_full + S·n_swa;
  0.5.8 counts every layer, adding MiMo-V2-Flash's sliding layers again, :99 — refused here);
  ``set_num_tokens_hybrid_swa`` after the cap and page floor: 0.5.8 :206 ``full =
  int(tokens × num_hidden_layers / (r·n_swa + n_full))``, 0.5.9 :251 ``full = int(tokens ×
  (F·n_full + S·n_swa) / (F·n_full + r·S·n_swa))``; ``swa = int(full × r)``; both page-floored;
  max_total_num_tokens is the full pool's.
* mem_cache/swa_memory_pool.py:88 "SWAKVPool mem usage: … GB, swa size: …, full size: …",
  after the SWA pool's and the full pool's "KV Cache is allocated" lines (memory_pool.py:652 in
  0.5.9; buffers of size + page_size slots).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang

KV = Path(__file__).parent
GPT_OSS_20B = KV / "gpu_logs" / "configs" / "openai--gpt-oss-20b.json"
GEMMA3_27B = KV / "realworld" / "configs" / "google--gemma-3-27b-it_config.json"
LLAMA4_SCOUT = KV / "configs" / "meta-llama--Llama-4-Scout-17B-16E-Instruct.subset.json"
GiB = 2**30
HYBRID = ("0.5.8", "0.5.9")


def plan(path: Path, **options: Any):  # type: ignore[no-untyped-def]
    return plan_sglang(load_config(path), read_document(path), SglangOptions(**options))


@pytest.mark.parametrize("release", HYBRID)
def test_gpt_oss_20b_splits_into_full_and_swa_pools(release: str) -> None:
    # 12 full + 12 sliding layers, 8 KV heads × (64 + 64) × 2 B = 2,048 B per token per layer.
    result = plan(GPT_OSS_20B, release=release, memory_bytes=GiB)
    profiled = GiB // (24 * 2_048)
    assert profiled == 21_845
    # 0.5.9: 21,845 × 49,152 / (2,048 × 12 + 0.8 × 2,048 × 12) = 24,272.5…; 0.5.8:
    # 21,845 × 24 / (0.8 × 12 + 12) = 24,272.2…; SWA: int(24,272 × 0.8) = 19,417.
    assert result.value("pool_tokens") == 24_272
    assert result.value("swa_pool_tokens") == 19_417
    # context 131,072: max(int(21,845 / 131,072 × 512), 2048) = 2048 < 24,272 // 2.
    assert result.value("max_running_requests") == 2_048
    # K per pool: (tokens + 1) × 8 × 64 × 2 B × 12 layers.
    assert result.log_lines[:4] == [
        "Use sliding window memory pool. full_layer_tokens=24272, swa_layer_tokens=19417",
        "KV Cache is allocated. #tokens: 19417, K size: 0.22 GB, V size: 0.22 GB",
        "KV Cache is allocated. #tokens: 24272, K size: 0.28 GB, V size: 0.28 GB",
        "SWAKVPool mem usage: 1.00 GB, swa size: 19417, full size: 24272",
    ]
    assert any("before SM100" in n for n in result.notes)


def test_gpt_oss_page_floors_each_pool() -> None:
    # --page-size 64: 21,845 → 21,824 profiled; full int(21,824 × 49,152 / 44,236.8) = 24,248
    # → 24,192; SWA from the unfloored full: int(24,248 × 0.8) = 19,398 → 19,392.
    result = plan(GPT_OSS_20B, release="0.5.9", memory_bytes=GiB, page_size=64)
    assert result.value("pool_tokens") == 24_192
    assert result.value("swa_pool_tokens") == 19_392


def test_gpt_oss_on_b200_keeps_every_token() -> None:
    # trtllm_mha on SM100 sets disable_hybrid_swa_memory: one pool of 2^30 // 49,152 tokens.
    result = plan(GPT_OSS_20B, release="0.5.9", memory_bytes=GiB, gpu_name="B200")
    assert result.value("pool_tokens") == 21_845
    assert result.value("swa_pool_tokens") is None
    assert any("trtllm_mha" in n for n in result.notes)


@pytest.mark.parametrize("release", HYBRID)
def test_llama4_scout_splits_its_chunked_layers(release: str) -> None:
    # 12 full + 36 chunked layers, 8 KV heads × (128 + 128) × 2 B = 4,096 B per token per
    # layer; profiled 2^30 // 196,608 = 5,461; full int(5,461 × 196,608 / (4,096 × 12 +
    # 0.8 × 4,096 × 36)) = int(5,461 × 48 / 40.8) = 6,424; SWA int(6,424 × 0.8) = 5,139.
    result = plan(LLAMA4_SCOUT, release=release, memory_bytes=GiB)
    assert result.value("pool_tokens") == 6_424
    assert result.value("swa_pool_tokens") == 5_139


@pytest.mark.parametrize("release", HYBRID)
def test_gemma3_off_the_list_is_charged_on_every_layer(release: str) -> None:
    result = plan(GEMMA3_27B, release=release, memory_bytes=GiB)
    assert result.value("pool_tokens") == GiB // (62 * 16 * 128 * 2 * 2) == 2_114
    assert result.value("swa_pool_tokens") is None
    assert any("52 sliding layers keep every token" in n for n in result.notes)


@pytest.mark.parametrize(
    ("release", "arch"),
    [
        ("0.5.8", "MiMoV2FlashForCausalLM"),
        ("0.5.9", "MiMoV2FlashForCausalLM"),
        ("0.5.9", "Step3p5ForCausalLM"),
    ],
)
def test_listed_models_not_mirrored_are_refused(release: str, arch: str, tmp_path: Path) -> None:
    doc = json.loads(GPT_OSS_20B.read_text(encoding="utf-8"))
    doc["architectures"] = [arch]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError, match=f"{release} gives {arch} a hybrid"):
        plan(path, release=release, memory_bytes=GiB)
