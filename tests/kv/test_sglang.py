"""SGLang's KV pool: published start-up logs reproduced, release rules, and what is refused.

Figures come from published logs (cited per test) or from SGLang's own formulas read in the
released wheels (``sglang/srt/server_args.py`` and ``model_executor/model_runner.py``; see
docs/kv-share-engines.md), evaluated by hand in the comment beside each number.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hf_configs import gemma

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import RELEASES, SglangOptions, plan_sglang, sglang_rules
from mmcli.kv.sglang.budget import default_fraction

CONFIGS = Path(__file__).parent / "configs"
GiB = 2**30


def plan(path: Path, **options: Any):  # type: ignore[no-untyped-def]
    return plan_sglang(load_config(path), read_document(path), SglangOptions(**options))


def write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


QWEN3_235B = CONFIGS / "Qwen--Qwen3-235B-A22B-FP8.json"


@pytest.mark.parametrize("release", [r.release for r in RELEASES])
def test_qwen3_235b_tp4_matches_the_published_log(release: str) -> None:
    # vllm#21348: SGLang, Qwen3-235B-A22B-FP8, --tp 4 --mem-fraction-static 0.93 on 4×H100:
    # "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB".
    # The log does not give the pool budget; any budget in [367404, 367405) cells gives it.
    low = plan(QWEN3_235B, release=release, tp=4, memory_bytes=367_404 * 48_128)
    high = plan(QWEN3_235B, release=release, tp=4, memory_bytes=367_405 * 48_128 - 1)
    for result in (low, high):
        assert result.value("bytes_per_token") == 48_128  # 1 KV head × 128 × 94 × 2 × 2 B
        assert result.value("pool_tokens") == 367_404
        # 0.5.13 on name the pool's dtype (memory_pool.py:819 "dtype: {self.dtype}"): the
        # checkpoint's bfloat16, its KV cache being auto.
        named = "dtype: torch.bfloat16, " if sglang_rules(release).kv_line_names_dtype else ""
        assert result.log_lines[0] == (
            f"KV Cache is allocated. {named}#tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"
        )
        assert result.refusal is None
    assert plan(QWEN3_235B, tp=4, memory_bytes=367_405 * 48_128).value("pool_tokens") == 367_405


def test_json_names_engine_and_release_per_figure() -> None:
    result = plan(QWEN3_235B, release="0.4.9", tp=4, memory_bytes=10 * GiB)
    doc = result.to_json()
    assert doc["engine"] == "sglang" and doc["release"] == "0.4.9.post2"
    for figure in doc["figures"].values():
        assert figure["engine"] == "sglang" and figure["release"] == "0.4.9.post2"
        assert figure["exact"] is True


def test_page_size_floors_the_pool_and_pads_the_buffers() -> None:
    # 10 GiB / 48,128 B = 223,101 cells; page 64 → 223,040 tokens, buffers of 223,104 slots.
    result = plan(QWEN3_235B, tp=4, memory_bytes=10 * GiB, page_size=64, page_size_given=True)
    assert result.value("pool_tokens") == 223_040
    assert result.value("blocks") == 223_040 // 64
    k_gb = 223_104 * 128 * 94 * 2 / GiB
    assert result.log_lines[0].endswith(f"K size: {k_gb:.2f} GB, V size: {k_gb:.2f} GB")


def test_max_running_requests_follows_the_release_rule() -> None:
    # 100,000 tokens at context 40,960: max(int(100000/40960*512)=1250, 2048) = 2048 requests,
    # capped by tokens // 2 = 50,000 → 2048.
    result = plan(QWEN3_235B, tp=4, memory_bytes=100_000 * 48_128)
    assert result.value("max_running_requests") == 2048
    # 3,000 tokens: tokens // 2 = 1,500 < 2048.
    assert plan(QWEN3_235B, tp=4, memory_bytes=3_000 * 48_128).value("max_running_requests") == 1500


def test_concurrency_at_max_model_len() -> None:
    result = plan(QWEN3_235B, tp=4, memory_bytes=100_000 * 48_128, max_model_len=8192)
    assert result.value("max_concurrency") == pytest.approx(100_000 / 8192)


def test_too_little_memory_is_the_engines_refusal() -> None:
    result = plan(QWEN3_235B, tp=4, memory_bytes=1000)
    assert result.value("pool_tokens") == 0
    assert result.refusal is not None and "Not enough memory" in result.refusal


def test_mla_cell_is_not_split_by_tp() -> None:
    # DeepSeek-V3: (512 + 64) × 61 layers × 2 B = 70,272 B per token on every rank.
    path = CONFIGS / "deepseek-ai--DeepSeek-R1.as-DeepSeek-V3.json"
    for tp in (1, 8):
        result = plan(path, tp=tp, memory_bytes=70_272 * 1000)
        assert result.value("bytes_per_token") == 70_272
        assert result.value("pool_tokens") == 1000
        assert "#tokens: 1000, KV size:" in result.log_lines[0]
    assert any("page size 1 assumed" in n for n in result.notes)


def test_kv_heads_fewer_than_tp_are_replicated() -> None:
    # max(1, 4 // 8) = 1 head per rank, as at tp 4.
    assert plan(QWEN3_235B, tp=8, memory_bytes=GiB).value("bytes_per_token") == 48_128


def test_fp8_kv_cache_halves_the_cell() -> None:
    result = plan(QWEN3_235B, tp=4, memory_bytes=GiB, kv_dtype="fp8_e4m3")
    assert result.value("bytes_per_token") == 24_064


def test_sliding_layers_pay_full_attention(tmp_path: Path) -> None:
    # Gemma 3: server_args turns the hybrid SWA pool off for Gemma3ForCausalLM in 0.5.3/0.5.4;
    # 0.4.x has no such pool: every layer holds every token (12 × 4 × 256 × 2 × 2 B).
    path = write(tmp_path, gemma(12, architectures=["Gemma3ForCausalLM"]))
    for release in ("0.4.7", "0.5.4"):
        result = plan(path, release=release, memory_bytes=GiB)
        assert result.value("bytes_per_token") == 12 * 4 * 256 * 2 * 2
        assert any("10 sliding layers keep every token" in n for n in result.notes)


def test_default_fraction_by_release() -> None:
    rules = {r.release: r for r in RELEASES}
    h100 = round(79.11 * GiB)  # 81,008.6 MiB
    # 0.4.6: ≤ 80 GiB and tp 4 → 0.85.
    assert (
        default_fraction(rules["0.4.6.post5"], h100, tp=4, multimodal=False, doc={}).value == 0.85
    )
    # 0.4.9: (9.5 + 4/2) GiB reserved: round((81008.6 − 11776) / 81008.6, 3) = 0.855.
    assert (
        default_fraction(rules["0.4.9.post2"], h100, tp=4, multimodal=False, doc={}).value == 0.855
    )
    # 0.5.4: 512 + 8192×1.5 + 512×2 + 4/8×1024 = 14,336 MiB: round(66672.6/81008.6, 3) = 0.823.
    five = default_fraction(rules["0.5.4"], h100, tp=4, multimodal=False, doc={})
    assert (
        five.value == 0.823 and five.chunked_prefill_size == 8192 and five.cuda_graph_max_bs == 512
    )
    # tp 1: 512 + 12288 + 512 + 128 = 13,440 MiB: round(67568.6/81008.6, 3) = 0.834.
    assert default_fraction(rules["0.5.4"], h100, tp=1, multimodal=False, doc={}).value == 0.834


def test_gpu_budget_is_an_estimate() -> None:
    result = plan(
        QWEN3_235B, tp=4, gpu_bytes=round(79.11 * GiB), gpu_name="H100", weights_bytes=236 * 10**9
    )
    assert result.figures["budget_bytes"].estimate is not None
    assert result.figures["pool_tokens"].estimate is not None
    assert result.figures["bytes_per_token"].estimate is None
    assert result.to_json()["figures"]["pool_tokens"]["exact"] is False
    # The default release (0.5.23 arg_groups/memory_hook.py handle_gpu_memory_settings, reserve
    # :309 – :325 with reserve_for_graph_mb :357; 0.5.17 server_args.py:4607, 0.5.15's :3625 –
    # :3673, 0.5.13's :1594 – :1635 in a plain launch) at tp 4 on 81,008.6 MiB: 512 + 12,288 +
    # 512 × 2 + 512 + 58 piecewise sizes × 8 = 14,800 MiB; round(66,208.6 / 81,008.6, 3) = 0.817.
    assert result.release == "0.5.23"
    assert "mem_fraction_static 0.817" in result.reserves


@pytest.mark.parametrize(
    ("release", "message"),
    [
        ("0.5.24", "SGLang 0.5.24 is not mirrored"),
        ("0.4.8", "SGLang 0.4.8 is not mirrored"),
    ],
)
def test_unread_release_is_refused(release: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        sglang_rules(release)


@pytest.mark.parametrize(
    ("config", "options", "message"),
    [
        ("ai21labs--AI21-Jamba-1.5-Mini.json", {}, "hybrid Mamba / GDN"),
        ("Qwen--Qwen3-235B-A22B-FP8.json", {"enable_dp_attention": True}, "DP attention"),
        ("Qwen--Qwen3-235B-A22B-FP8.json", {"pp": 2}, "pipeline parallelism"),
        ("Qwen--Qwen3-235B-A22B-FP8.json", {"speculative": True}, "speculative"),
    ],
)
def test_unmirrored_cases_are_refused(config: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        plan(CONFIGS / config, memory_bytes=GiB, **options)


def test_no_budget_is_refused() -> None:
    with pytest.raises(InputError, match="no KV budget"):
        plan(QWEN3_235B, tp=4)


def test_mla_pool_matches_a_published_log(tmp_path: Path) -> None:
    # sglang#14071 (description): a 2-layer DeepSeek-V3 ("MLA(kv_lora=512, rope=64) layers=2
    # … 2.25KB/tok … rest=35.9GB max_tokens=16725761", context_len=163840) started with
    # --max-total-tokens 60000: "KV Cache is allocated. #tokens: 60000, KV size: 0.13 GB,
    # layout=(60001, 1, 576)" — 60,000 tokens plus one page of slots.
    doc = json.loads((CONFIGS / "deepseek-ai--DeepSeek-R1.as-DeepSeek-V3.json").read_text())
    path = write(tmp_path, {**doc, "num_hidden_layers": 2})
    # "rest=35.9GB" is printed to 0.1 GiB: the logged token count lies between the plans
    # of the interval's ends.
    low, high = (plan(path, memory_bytes=int(g * GiB)) for g in (35.85, 35.95))
    assert low.value("bytes_per_token") == 2304  # 576 × 2 layers × 2 B = 2.25 KiB
    assert int(low.value("pool_tokens") or 0) <= 16_725_761 <= int(high.value("pool_tokens") or 0)
    # The log's line names no dtype: a release before 0.5.13 (memory_pool.py:819 adds it).
    capped = plan(path, release="0.5.12", memory_bytes=int(35.9 * GiB), max_total_tokens=60_000)
    assert capped.value("pool_tokens") == 60_000
    assert capped.log_lines[0] == "KV Cache is allocated. #tokens: 60000, KV size: 0.13 GB"


def test_non_positive_page_size_is_refused() -> None:
    with pytest.raises(InputError, match="must be positive"):
        plan(QWEN3_235B, tp=4, memory_bytes=GiB, page_size=0)


@pytest.mark.parametrize(
    ("kv_dtype", "named"),
    [
        ("auto", "torch.bfloat16"),
        ("fp8_e4m3", "torch.float8_e4m3fn"),
        ("fp8_e5m2", "torch.float8_e5m2"),
    ],
)
def test_the_kv_line_names_the_pool_dtype_from_0_5_13(kv_dtype: str, named: str) -> None:
    # 0.5.13 mem_cache/memory_pool.py:819, 0.5.23 :2089: "KV Cache is allocated. dtype:
    # {self.dtype}, #tokens: …" with the pool's torch dtype (the model's for auto); 0.5.12
    # :744 prints no dtype.
    line = plan(QWEN3_235B, release="0.5.23", tp=4, memory_bytes=GiB, kv_dtype=kv_dtype)
    assert line.log_lines[0].startswith(f"KV Cache is allocated. dtype: {named}, #tokens: ")
    old = plan(QWEN3_235B, release="0.5.12", tp=4, memory_bytes=GiB, kv_dtype=kv_dtype)
    assert old.log_lines[0].startswith("KV Cache is allocated. #tokens: ")
