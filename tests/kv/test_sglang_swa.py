"""SGLang 0.5.5 – 0.5.7's sliding-window rule: 0.5.4's, and where it stops.

Read from the wheels (sglang/srt): the model classes that define
``get_attention_sliding_window_size`` are the same seven in 0.5.4 – 0.5.7 (models/gemma2.py,
gemma3_causal.py, gemma3_mm.py, gemma3n_causal.py, gemma3n_mm.py, gpt_oss.py, olmo2.py), and
server_args turns the hybrid SWA pool off for every one of them (0.5.5 server_args.py:997
GPT-OSS, :1029 Gemma 2/3/3n, :1035 Olmo2; 0.5.6 :1123, :1166, :1172; 0.5.7 :1214, :1278,
:1284). Llama 4's chunked layers get a hybrid pool only with --hybrid-kvcache-ratio
(configs/model_config.py ``is_hybrid_model``, 0.5.5 – 0.5.7; 0.5.5 model_runner.py:407 also
skips Llama 4). So every attention layer holds every token: the cell is 0.5.4's.
0.5.7 model_config.py:1153 makes MiMo-V2-Flash always hybrid (not mirrored: refused);
0.5.8 model_config.py:1220 ``is_hybrid_swa_model`` puts GPT-OSS and Llama 4 on an allow-list
(mirrored from 0.5.8: test_sglang_swa_pool.py); 0.5.10 on are refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang
from mmcli.kv.sglang.version_help import sglang_version_help

KV = Path(__file__).parent
GPT_OSS_20B = KV / "gpu_logs" / "configs" / "openai--gpt-oss-20b.json"
GEMMA3_27B = KV / "realworld" / "configs" / "google--gemma-3-27b-it_config.json"
LLAMA4_SCOUT = KV / "configs" / "meta-llama--Llama-4-Scout-17B-16E-Instruct.subset.json"
GiB = 2**30
SAME_AS_054 = ("0.5.5", "0.5.6", "0.5.7")


def plan(path: Path, **options: Any):  # type: ignore[no-untyped-def]
    return plan_sglang(load_config(path), read_document(path), SglangOptions(**options))


@pytest.mark.parametrize("release", SAME_AS_054)
def test_gpt_oss_20b_keeps_every_token_in_its_sliding_layers(release: str) -> None:
    # 24 layers (12 sliding 128, 12 full) × 8 KV heads × head_dim 64 × (K, V) × 2 B (bf16).
    result = plan(GPT_OSS_20B, release=release, memory_bytes=GiB)
    assert result.value("bytes_per_token") == 24 * 8 * 64 * 2 * 2 == 49_152
    assert result.value("pool_tokens") == 2**30 // 49_152 == 21_845
    assert any(
        "turns the hybrid SWA pool off for GptOssForCausalLM" in n
        and "12 sliding layers keep every token" in n
        for n in result.notes
    )


@pytest.mark.parametrize("release", SAME_AS_054)
def test_gemma3_27b_is_charged_on_every_layer(release: str) -> None:
    # text_config: 62 layers (52 sliding 1024) × 16 KV heads × head_dim 128 × 2 × 2 B.
    result = plan(GEMMA3_27B, release=release, memory_bytes=GiB)
    assert result.value("bytes_per_token") == 62 * 16 * 128 * 2 * 2 == 507_904
    assert result.value("pool_tokens") == 2**30 // 507_904 == 2_114
    assert any("52 sliding layers keep every token" in n for n in result.notes)


@pytest.mark.parametrize("release", SAME_AS_054)
def test_llama4_chunked_layers_keep_every_token(release: str) -> None:
    # 48 layers (36 chunked 8192) × 8 KV heads × head_dim 128 × 2 × 2 B.
    result = plan(LLAMA4_SCOUT, release=release, memory_bytes=GiB)
    assert result.value("bytes_per_token") == 48 * 8 * 128 * 2 * 2 == 196_608
    assert any("--hybrid-kvcache-ratio" in n for n in result.notes)


def test_mimo_v2_flash_is_refused_in_0_5_7(tmp_path: Path) -> None:
    # A GPT-OSS-shaped config named MiMo-V2-Flash: 0.5.7 gives it the hybrid pool.
    doc = json.loads(GPT_OSS_20B.read_text(encoding="utf-8"))
    doc["architectures"] = ["MiMoV2FlashForCausalLM"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError, match="0.5.7 gives MiMoV2FlashForCausalLM a hybrid"):
        plan(path, release="0.5.7", memory_bytes=GiB)
    assert plan(path, release="0.5.6", memory_bytes=GiB).refusal is None


def test_help_names_the_newest_sliding_and_state_releases() -> None:
    text = sglang_version_help()
    assert "sliding-window models: 0.4.6.post5 – 0.5.23" in text
    # The state pool is mirrored for 0.5.3 – 0.5.15 (model_runner.py, then
    # model_runner_kv_cache_mixin.py:122 handle_max_mamba_cache in 0.5.14, :141 in 0.5.15) and
    # 0.5.16 – 0.5.23 (kv_cache_configurator.py:1703 in 0.5.16): one run.
    assert "hybrid GDN / Mamba models: 0.5.3 – 0.5.23)" in text
