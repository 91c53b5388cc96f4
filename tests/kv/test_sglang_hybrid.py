"""SGLang's hybrid GDN / Mamba-2 pools (0.5.3 – 0.5.6) against SGLang's own released code.

Every figure below was produced by running SGLang's released functions outside the project:
tests/kv/sglang_hybrid_reference.py takes, unchanged, from the 0.5.3 and 0.5.4 wheels the
config classes' state-shape properties (``configs/qwen3_next.py``, ``configs/nemotron_h.py``,
``configs/mamba_utils.py``) and ``ModelRunner.handle_max_mamba_cache`` (0.5.4
model_runner.py:1433, 0.5.5 :1325, 0.5.6 :1450; 0.5.3's subtraction at model_runner.py:1291),
runs them with torch on
the same config.json files and budgets, and prints ``mamba_cache_per_req``,
``max_mamba_cache_size`` and ``max_total_num_tokens`` (``int(rest × 2³⁰ // cell)``, :1430).
The configs are the published ones (tests/kv/configs/PROVENANCE.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang

CONFIGS = Path(__file__).parent / "configs"
GiB = 2**30
QWEN3_NEXT = CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Thinking.json"
NEMOTRON_H = CONFIGS / "nvidia--Nemotron-H-8B-Base-8K.json"


def plan(path: Path, **options: Any):  # type: ignore[no-untyped-def]
    # 0.5.3 – 0.5.6 rules; later releases' state pools are not mirrored (refused).
    options.setdefault("release", "0.5.4")
    return plan_sglang(load_config(path), read_document(path), SglangOptions(**options))


# (release, tp, budget bytes) → (mamba_cache_per_req, max_mamba_cache_size, max_total_num_tokens)
QWEN3_NEXT_REFERENCE = [
    ("0.5.4", 1, 40 * GiB, 77_266_944, 263, 920_754),
    ("0.5.4", 1, 60 * GiB, 77_266_944, 394, 1_382_704),
    ("0.5.4", 1, 17_682_419_712, 77_266_944, 108, 379_947),
    ("0.5.4", 4, 40 * GiB, 19_316_736, 1053, 1_839_937),
    ("0.5.4", 4, 60 * GiB, 19_316_736, 1579, 2_760_692),
    ("0.5.4", 4, 17_682_419_712, 19_316_736, 433, 758_323),
    ("0.5.5", 1, 40 * GiB, 77_266_944, 263, 920_754),
    ("0.5.5", 4, 60 * GiB, 19_316_736, 1579, 2_760_692),
    ("0.5.6", 1, 60 * GiB, 77_266_944, 394, 1_382_704),
    ("0.5.6", 4, 40 * GiB, 19_316_736, 1053, 1_839_937),
    ("0.5.3", 1, 40 * GiB, 77_266_944, 512, 137_898),
    ("0.5.3", 1, 60 * GiB, 77_266_944, 512, 1_011_712),
    ("0.5.3", 4, 40 * GiB, 19_316_736, 512, 2_690_389),
    ("0.5.3", 4, 17_682_419_712, 19_316_736, 512, 634_135),
]


@pytest.mark.parametrize(
    ("release", "tp", "budget", "per_req", "slots", "tokens"), QWEN3_NEXT_REFERENCE
)
def test_qwen3_next_matches_sglangs_own_code(
    release: str, tp: int, budget: int, per_req: int, slots: int, tokens: int
) -> None:
    result = plan(QWEN3_NEXT, release=release, tp=tp, memory_bytes=budget)
    assert result.value("state_bytes_per_request") == per_req
    assert result.value("state_slots") == slots
    assert result.value("pool_tokens") == tokens
    # 2 KV heads (1 per rank from tp 2) × 256 × 2 × 12 full-attention layers × 2 B.
    assert result.value("bytes_per_token") == (24_576 if tp == 1 else 12_288)
    assert result.refusal is None


def test_qwen3_next_requests_and_log_lines() -> None:
    # 0.5.4, 40 GiB at tp 1: 263 slots; max_num_reqs min(max(int(920754/262144×512), 2048),
    # 4096) = 2048, then min with 263 // 3 = 87 (model_runner.py:1657); tp_worker: min(920754
    # // 2, 87) = 87. Mamba pool of 263 + 1 slots: conv 36 × 264 × 8192 × 3 × 2 B = 0.435 GiB,
    # ssm 36 × 264 × 32 × 128 × 128 × 4 B = 18.56 GiB (memory_pool.py:222); K 920,755 slots × 2
    # × 256 × 12 × 2 B = 10.537 GiB ("GB" in the log is GiB).
    result = plan(QWEN3_NEXT, memory_bytes=40 * GiB)
    assert result.value("max_running_requests") == 87
    assert result.log_lines[:2] == [
        "Mamba Cache is allocated. max_mamba_cache_size: 263, conv_state size: 0.44GB, "
        "ssm_state size: 18.56GB",
        "KV Cache is allocated. #tokens: 920754, K size: 10.54 GB, V size: 10.54 GB",
    ]
    # 0.5.3: 512 slots, radix cache off: requests min(2048, 512) = 512; its MambaPool is the
    # request pool (512 + 1 slots) and its line names no size (memory_pool.py:175): conv
    # 36 × 513 × 8192 × 3 × 2 B = 0.845 GiB, ssm 36 × 513 × 32 × 128 × 128 × 4 B = 36.07 GiB.
    old = plan(QWEN3_NEXT, release="0.5.3", memory_bytes=60 * GiB)
    assert old.value("max_running_requests") == 512
    assert old.log_lines[0] == (
        "Mamba Cache is allocated. conv_state size: 0.85GB, ssm_state size: 36.07GB"
    )
    doc = old.to_json()
    assert doc["figures"]["state_slots"] == {
        "value": 512,
        "engine": "sglang",
        "release": "0.5.3",
        "exact": True,
        "estimate_reason": None,
    }


# (release, tp, budget) → (mamba_cache_per_req, max_total_num_tokens); 512 slots (radix
# cache off); the reference run prints the same figures for 0.5.4, 0.5.5 and 0.5.6.
NEMOTRON_REFERENCE = [
    ("0.5.4", 1, 60 * GiB, 102_137_856, 740_352),
    ("0.5.4", 1, 70 * GiB, 102_137_856, 1_395_712),
    ("0.5.4", 2, 60 * GiB, 51_068_928, 4_672_512),
    ("0.5.4", 2, 70 * GiB, 51_068_928, 5_983_232),
    ("0.5.5", 1, 70 * GiB, 102_137_856, 1_395_712),
    ("0.5.6", 2, 60 * GiB, 51_068_928, 4_672_512),
]


@pytest.mark.parametrize(("release", "tp", "budget", "per_req", "tokens"), NEMOTRON_REFERENCE)
def test_nemotron_h_matches_sglangs_own_code(
    release: str, tp: int, budget: int, per_req: int, tokens: int
) -> None:
    result = plan(NEMOTRON_H, release=release, tp=tp, memory_bytes=budget)
    assert result.value("state_bytes_per_request") == per_req
    assert result.value("state_slots") == 512
    assert result.value("pool_tokens") == tokens
    # 8 KV heads / tp × 128 × 2 × 4 attention layers ('*') × 2 B.
    assert result.value("bytes_per_token") == 16_384 // tp
    assert result.value("max_running_requests") == 512


def test_fixed_slots_follow_max_running_requests() -> None:
    # 0.5.4 handle_max_mamba_cache: radix cache off → max_mamba_cache_size =
    # max_running_requests; 64 × 102,137,856 B off 20 GiB, the rest // 16,384 B.
    result = plan(NEMOTRON_H, memory_bytes=20 * GiB, max_running_requests=64)
    assert result.value("state_slots") == 64
    left = 20 * GiB / GiB - 64 * 102_137_856 / GiB
    assert result.value("pool_tokens") == int(left * GiB // 16_384)
    assert result.value("max_running_requests") == 64


def test_state_that_does_not_fit_is_the_engines_refusal() -> None:
    # 512 × 102,137,856 B = 48.7 GiB of state: nothing left of 20 GiB.
    result = plan(NEMOTRON_H, memory_bytes=20 * GiB)
    assert result.value("pool_tokens") == 0
    assert result.refusal is not None and "Not enough memory" in result.refusal


def test_budget_from_gpu_makes_ratio_slots_an_estimate() -> None:
    result = plan(
        QWEN3_NEXT, gpu_bytes=round(139.8 * GiB), gpu_name="H200", weights_bytes=160 * 10**9, tp=4
    )
    assert result.figures["state_slots"].estimate is not None
    assert result.figures["state_bytes_per_request"].estimate is None


@pytest.mark.parametrize(
    ("config", "release", "message"),
    [
        (NEMOTRON_H, "0.5.3", "no hybrid state pool in SGLang 0.5.3"),
        (QWEN3_NEXT, "0.4.9", "no hybrid state pool in SGLang 0.4.9.post2"),
        (CONFIGS / "ai21labs--AI21-Jamba-1.5-Mini.json", "0.5.4", "JambaForCausalLM"),
        (CONFIGS / "ai21labs--AI21-Jamba-1.5-Mini.json", "0.5.6", "JambaForCausalLM"),
    ],
)
def test_hybrids_a_release_does_not_serve_are_refused(
    config: Path, release: str, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        plan(config, release=release, memory_bytes=40 * GiB)


def test_state_heads_that_do_not_divide_over_tp_are_refused() -> None:
    # 32 value heads over tp 3: SGLang's divide() asserts.
    with pytest.raises(InputError, match="does not divide over tp 3"):
        plan(QWEN3_NEXT, tp=3, memory_bytes=40 * GiB)
