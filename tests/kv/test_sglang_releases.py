"""SGLang 0.5.5 – 0.5.9 (and the post releases of them): the rows added after 0.5.4.

Each number is SGLang's own formula, read in the release's wheel (``pip download --no-deps
sglang==VER``) at the file and line cited, evaluated by hand beside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hf_configs import gemma

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import DEFAULT_RELEASE, SglangOptions, plan_sglang, sglang_rules
from mmcli.kv.sglang.budget import default_fraction

CONFIGS = Path(__file__).parent / "configs"
QWEN3_235B = CONFIGS / "Qwen--Qwen3-235B-A22B-FP8.json"
DEEPSEEK_V3 = CONFIGS / "deepseek-ai--DeepSeek-R1.as-DeepSeek-V3.json"
QWEN3_NEXT = CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Thinking.json"
GiB = 2**30
#: 0.5.5 … 0.5.23: 0.5.14 on size the pool with the KV-cache configurator, whose budget, cell
#: and page floor are 0.5.13's (0.5.14 model_executor/model_runner_kv_cache_mixin.py:96 and
#: pool_configurator.py:174 / :204 / :225; 0.5.16 mem_cache/kv_cache_configurator.py:1548;
#: 0.5.23 :2990; 0.5.18's calculate_mla_kv_cache_dim, :2139, keeps a non-DSA model's cell).
NEW = tuple(f"0.5.{n}" for n in range(5, 24))


def plan(path: Path, **options: Any):  # type: ignore[no-untyped-def]
    return plan_sglang(load_config(path), read_document(path), SglangOptions(**options))


def write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize("release", NEW)
def test_dense_pool_is_rest_over_the_mha_cell(release: str) -> None:
    # sglang 0.5.5 srt/model_executor/model_runner.py:1317 (0.5.9
    # model_executor/model_runner_kv_cache_mixin.py:143): rest = avail − total × (1 − frac);
    # tokens = int(rest × 2³⁰) // cell; 0.5.9 mixin :99: cell = kv_heads/tp × (head_dim +
    # v_head_dim) × layers × bytes = 1 × (128 + 128) × 94 × 2 = 48,128 B at tp 4.
    # 10 GiB // 48,128 = 223,101 tokens; max_num_reqs = min(max(int(223101 / 40960 × 512) =
    # 2788, 2048), 4096) = 2788 (0.5.9 mixin :348); running = min(223101 // 2, 2788)
    # (0.5.9 model_executor/model_runner.py:593; 0.5.5 managers/tp_worker.py:281).
    result = plan(QWEN3_235B, release=release, tp=4, memory_bytes=10 * GiB)
    assert result.release == release
    assert result.value("bytes_per_token") == 48_128
    assert result.value("pool_tokens") == 223_101
    assert result.value("max_running_requests") == 2788


@pytest.mark.parametrize("release", NEW)
def test_mla_cell_is_the_latent_per_layer(release: str) -> None:
    # sglang 0.5.9 srt/model_executor/model_runner_kv_cache_mixin.py:51 (0.5.5 model_runner.py
    # :1279): (kv_lora_rank 512 + qk_rope_head_dim 64) × 61 layers × 2 B = 70,272 B, not by tp.
    result = plan(DEEPSEEK_V3, release=release, tp=8, memory_bytes=70_272 * 1000)
    assert result.value("bytes_per_token") == 70_272
    assert result.value("pool_tokens") == 1000


def test_default_release_is_the_newest_mirrored() -> None:
    # 0.5.23, the newest release read, has its default fraction mirrored
    # (test_sglang_fraction_0518.py), so it is the default.
    assert DEFAULT_RELEASE == "0.5.23"
    assert sglang_rules("0.5.23").fraction_rule == "breakable-mla"
    assert plan(QWEN3_235B, tp=4, memory_bytes=GiB).release == "0.5.23"


@pytest.mark.parametrize(
    ("spelling", "release"),
    [
        ("0.5.5.post1", "0.5.5"),
        ("0.5.5.post3", "0.5.5"),
        ("0.5.6.post2", "0.5.6"),
        ("v0.5.8.post1", "0.5.8"),
        ("0.5.9", "0.5.9"),
        # 0.5.15.post1 differs from 0.5.15 in no sizing file but server_args.py (an attention
        # backend lookup); 0.5.13.post1 in none; 0.5.12.post1 in model_runner.py's kernel
        # warm-up and the DeepSeek-V4 / SWA pools (not mirrored).
        ("0.5.12.post1", "0.5.12"),
        ("0.5.13.post1", "0.5.13"),
        ("0.5.15.post1", "0.5.15"),
        ("v0.5.23", "0.5.23"),
    ],
)
def test_post_releases_share_their_base_row(spelling: str, release: str) -> None:
    assert sglang_rules(spelling).release == release


def test_small_gpu_tier_graph_batch_changed_in_0_5_5() -> None:
    # A 24,564 MiB GPU, tp 1: the < 35 GiB tier has chunked prefill 2048 and cuda_graph_max_bs
    # 16 in sglang 0.5.4 srt/server_args.py (_handle_gpu_memory_settings, :643), 24 from 0.5.5
    # (server_args.py:717; 0.5.9 :953). reserved = 512 + 2048 × 1.5 + bs × 2 + 1/8 × 1024
    # (0.5.9 server_args.py:911): 0.5.4: 3,744 MiB → round(20820 / 24564, 3) = 0.848;
    # 0.5.9: 3,760 MiB → round(20804 / 24564, 3) = 0.847.
    gpu = 24_564 * 2**20
    old = default_fraction(sglang_rules("0.5.4"), gpu, tp=1, multimodal=False, doc={})
    new = default_fraction(sglang_rules("0.5.9"), gpu, tp=1, multimodal=False, doc={})
    assert (old.value, old.cuda_graph_max_bs) == (0.848, 16)
    assert (new.value, new.cuda_graph_max_bs) == (0.847, 24)


def test_sliding_layers_of_gemma_3_keep_every_token_where_the_pool_is_mirrored(
    tmp_path: Path,
) -> None:
    # Gemma 3 is not on is_hybrid_swa_model's list and server_args turns its hybrid SWA pool off
    # (0.5.10 server_args.py:1877, :1894): every layer keeps every token, as in 0.5.4: the cell
    # is 12 layers × 4 KV heads × 256 × 2 (K and V) × 2 B = 49,152 B, so 1 GiB holds 21,845
    # tokens (0.5.14 – 0.5.23 the same: 0.5.16 arg_groups/overrides.py:564, 0.5.23
    # arg_groups/model_overrides/gemma2_gemma3.py:26 keep the pool off).
    path = write(tmp_path, gemma(12, architectures=["Gemma3ForCausalLM"]))
    for release in ("0.5.4", "0.5.10", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.23"):
        assert plan(path, release=release, memory_bytes=GiB).value("pool_tokens") == 21_845


def test_v_head_dim_other_than_head_dim_is_refused_from_0_5_7(tmp_path: Path) -> None:
    # 0.5.7 srt/model_executor/model_runner_kv_cache_mixin.py:86: kv_heads · (head_dim +
    # v_head_dim); 0.5.6 model_executor/model_runner.py:1419: kv_heads · head_dim · 2.
    doc = json.loads(QWEN3_235B.read_text())
    path = write(tmp_path, {**doc, "v_head_dim": 64})
    with pytest.raises(InputError, match="v_head_dim 64 differs from head_dim 128"):
        plan(path, release="0.5.7", tp=4, memory_bytes=GiB)
    assert plan(path, release="0.5.6", tp=4, memory_bytes=GiB).value("bytes_per_token") == 48_128


@pytest.mark.parametrize("release", ["0.5.10.post1", "0.5.11", "0.5.12", "0.5.13"])
def test_0_5_10_sizes_requests_from_the_capped_capacity(release: str) -> None:
    # sglang 0.5.10 srt/model_executor/model_runner_kv_cache_mixin.py:171: the same rest; :826
    # capacity = min(profiled, --max-total-tokens) // page × page; :844 estimated =
    # clamp(int(capacity / context_len × 512), 2048, 4096); :849 with --max-running-requests R:
    # min(R, estimated). 10 GiB // 48,128 = 223,101 tokens, capped at 100,000: estimated =
    # max(int(100000 / 40960 × 512) = 1250, 2048) = 2048; running = min(5000, 2048) = 2048.
    # 0.5.9 (mixin :341, :348) takes R = 5000 as is: running = min(5000, 5000) = 5000.
    # 0.5.11 – 0.5.13: the same (0.5.13 model_runner_kv_cache_mixin.py _resolve_max_num_reqs;
    # pool_configurator.py DefaultPoolConfigurator.calculate_pool_sizes: bytes // cell, floored
    # to the page; _apply_token_constraints caps at --max-total-tokens).
    options: dict[str, Any] = {
        "tp": 4,
        "memory_bytes": 10 * GiB,
        "max_total_tokens": 100_000,
        "max_running_requests": 5000,
    }
    new = plan(QWEN3_235B, release=release, **options)
    assert new.release == release.split(".post")[0]
    assert new.value("pool_tokens") == 100_000
    assert new.value("max_running_requests") == 2048
    assert plan(QWEN3_235B, release="0.5.9", **options).value("max_running_requests") == 5000


def test_0_5_18_default_fraction_is_planned() -> None:
    # 0.5.18's default fraction is mirrored (test_sglang_fraction_0518.py): Qwen3-235B-A22B at
    # tp 4 on an 80 GiB GPU (81,920 MiB: chunk 8192, max_bs 512, 58 prefill counts) reserves
    # 512 + 12,288 + 1,024 + 512 + 464 = 14,800 MiB → round(67,120 / 81,920, 3) = 0.819; a
    # --mem-fraction-static given replaces it.
    gpu = {"gpu_bytes": 80 * GiB, "gpu_name": "H100", "weights_bytes": 16 * GiB}
    default = plan(QWEN3_235B, release="0.5.18", tp=4, **gpu)
    assert default.figures["budget_bytes"].value == int(80 * GiB * 0.819) - 4 * GiB
    given = plan(QWEN3_235B, release="0.5.18", tp=4, mem_fraction_static=0.85, **gpu)
    assert given.figures["budget_bytes"].value == int(80 * GiB * 0.85) - 4 * GiB


@pytest.mark.parametrize(
    "release",
    ["0.5.4", "0.5.9", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.18", "0.5.23"],
)
def test_kv_cache_quant_algo_is_still_refused(release: str, tmp_path: Path) -> None:
    # The checkpoint's kv_cache_quant_algo picks the KV dtype with --kv-cache-dtype auto
    # (sglang 0.5.4 srt/model_executor/model_runner.py:1612, 0.5.9 :1672, 0.5.13 :2247,
    # 0.5.14 :2340, 0.5.15 :2449, 0.5.16 / 0.5.17 mem_cache/kv_cache_dtype.py:34, 0.5.18 :39,
    # 0.5.23 :51): not mirrored in any of them, so none plans it with the model's dtype.
    doc = json.loads(QWEN3_235B.read_text())
    quant = {**doc.get("quantization_config", {}), "kv_cache_quant_algo": "FP8"}
    path = write(tmp_path, {**doc, "quantization_config": quant})
    with pytest.raises(InputError, match="kv_cache_quant_algo"):
        plan(path, release=release, tp=4, memory_bytes=GiB)


def test_docs_state_the_default_release() -> None:
    # docs/kv-share-engines.md names the default twice by hand: the SGLang section and the
    # options table; both follow DEFAULT_RELEASE.
    text = (Path(__file__).parents[2] / "docs" / "kv-share-engines.md").read_text()
    assert f"default **{DEFAULT_RELEASE}**" in text
    assert f"the `.postN` read; default {DEFAULT_RELEASE}) |" in text
