"""SGLang 0.5.4 – 0.5.6: a hybrid GDN / Mamba-2 model's pools with EAGLE / NEXTN speculative
decoding, against SGLang's own released code.

The slots and the profiled tokens come from running 0.5.5's and 0.5.6's
``ModelRunner.handle_max_mamba_cache`` (0.5.5 model_runner.py:1325, 0.5.6 :1450) unchanged, with
``speculative_num_draft_tokens`` 4, on the published Qwen3-Next config
(tests/kv/sglang_hybrid_reference.py with the 0.5.5 and 0.5.6 wheels): the slots are
``int(rest × 0.9/1.9 × 2³⁰ // mamba_cache_per_req // (1 + D))`` and ``slots ×
mamba_cache_per_req × (1 + D)`` leaves the budget. The rest is derived by hand from 0.5.5:

* server_args.py:1534 ``_handle_speculative_decoding``: ``max_running_requests`` 48 when not
  given; :1597 with top-k 1 the draft tokens are steps + 1.
* model_runner.py:1571 ``max_num_reqs = min(48, slots // 3)`` (radix cache on); :1582 the
  target's pool: ``tokens + reqs × steps × topk + reqs × D + 100`` (draft_runner_cache_size).
* tp_worker.py:281 ``max_running_requests = min(48, req_to_token_pool.size)``.
* memory_pool.py:207 / :239: ``intermediate_ssm_state_cache`` (layers, slots + 1, D, *ssm) in
  float32 and ``intermediate_conv_window_cache`` (layers, slots + 1, D, *conv) in bfloat16, named
  after the state sizes on the ``Mamba Cache is allocated`` line (:257).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sglang_hybrid_cases import CONV, NEMOTRON_H, QWEN3_NEXT, SPEC, SSM, GiB, plan_with

from mmcli.errors import InputError
from mmcli.kv.figures import EngineFigures

# (release, tp, budget) → (slots, profiled tokens) from SGLang's handle_max_mamba_cache, D = 4.
REFERENCE = [
    ("0.5.5", 1, 40 * GiB, 52, 930_186),
    ("0.5.5", 4, 60 * GiB, 315, 2_766_980),
    ("0.5.6", 1, 60 * GiB, 78, 1_395_280),
    ("0.5.6", 4, 40 * GiB, 210, 1_844_653),
]


def plan(path: Path, **options: Any) -> EngineFigures:
    return plan_with(None, path, **options)


@pytest.mark.parametrize(("release", "tp", "budget", "slots", "profiled"), REFERENCE)
def test_draft_states_share_each_slot_and_the_pool_gets_the_headroom(
    release: str, tp: int, budget: int, slots: int, profiled: int
) -> None:
    result = plan(QWEN3_NEXT, release=release, tp=tp, memory_bytes=budget, **SPEC)
    assert result.value("state_slots") == slots
    requests = min(48, slots // 3)
    assert result.value("pool_tokens") == profiled + requests * 3 * 1 + requests * 4 + 100
    assert result.value("max_running_requests") == requests
    assert result.refusal is None


def test_without_speculative_the_same_budget_gives_more_slots() -> None:
    # The same 0.5.5 run without speculative decoding: 263 slots, 920,754 tokens
    # (test_sglang_hybrid.QWEN3_NEXT_REFERENCE); with D = 4 the slots drop to 52.
    plain = plan(QWEN3_NEXT, release="0.5.5", memory_bytes=40 * GiB)
    assert (plain.value("state_slots"), plain.value("pool_tokens")) == (263, 920_754)


def test_the_mamba_line_names_the_intermediate_caches() -> None:
    result = plan(QWEN3_NEXT, release="0.5.5", memory_bytes=40 * GiB, **SPEC)
    rows = 52 + 1
    assert result.log_lines[0] == (
        f"Mamba Cache is allocated. max_mamba_cache_size: 52, "
        f"conv_state size: {CONV * rows / GiB:.2f}GB, ssm_state size: {SSM * rows / GiB:.2f}GB "
        f"intermediate_ssm_state_cache size: {SSM * rows * 4 / GiB:.2f}GB "
        f"intermediate_conv_window_cache size: {CONV * rows * 4 / GiB:.2f}GB"
    )
    assert result.log_lines[1].startswith("KV Cache is allocated. #tokens: 930405,")


def test_top_k_above_one_takes_the_draft_tokens_given() -> None:
    # topk 2, D 6: slots int(40 × 0.9/1.9 × 2³⁰ // 77,266,944 // 7) = 37 (52 at D 4 needs ÷ 5).
    result = plan(
        QWEN3_NEXT,
        release="0.5.5",
        memory_bytes=40 * GiB,
        speculative_num_steps=3,
        speculative_eagle_topk=2,
        speculative_num_draft_tokens=6,
    )
    raw = 40 * 0.9 / (1 + 0.9)
    assert result.value("state_slots") == int(raw * GiB // 77_266_944 // 7) == 37


def test_fixed_slots_with_speculative_are_the_48_requests() -> None:
    # Nemotron-H keeps the radix cache off: slots = max_running_requests, 48 with speculative
    # decoding; 48 × 102,137,856 B × 5 leave the budget.
    result = plan(NEMOTRON_H, release="0.5.6", memory_bytes=60 * GiB, **SPEC)
    assert result.value("state_slots") == 48
    left = 60 * GiB / GiB - 48 * 102_137_856 * 5 / GiB
    profiled = int(left * GiB // 16_384)
    assert result.value("pool_tokens") == profiled + 48 * 7 + 100


@pytest.mark.parametrize(
    ("path", "release", "options", "message"),
    [
        (QWEN3_NEXT, "0.5.5", {"speculative_num_steps": 3}, "needs --speculative-num-steps"),
        (QWEN3_NEXT, "0.5.3", SPEC, "mirrored only for the hybrid"),
        (
            QWEN3_NEXT,
            "0.5.5",
            {"speculative_num_steps": 3, "speculative_eagle_topk": 2},
            "needs a positive --speculative-num-draft-tokens",
        ),
    ],
)
def test_what_is_not_mirrored_is_refused(
    path: Path, release: str, options: dict[str, int], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        plan(path, release=release, memory_bytes=40 * GiB, **options)


def test_the_plan_command_takes_sglangs_flags() -> None:
    from typer.testing import CliRunner

    from mmcli.cli.main import app

    args = ["kv-share", "plan", str(QWEN3_NEXT), "--engine", "sglang", "--memory", "40GiB"]
    args += ["--sglang-version", "0.5.5", "--speculative-num-steps", "3"]
    result = CliRunner().invoke(app, [*args, "--speculative-eagle-topk", "1"])
    assert result.exit_code == 0, result.output
    assert "#tokens: 930405," in result.output
    # 52 slots × 77,266,944 B × 5 = 18.71 GiB off the budget.
    assert "// 5) = 52 " in result.output and "18.71 GiB taken off" in result.output
    plain = ["kv-share", "plan", str(QWEN3_NEXT), "--memory", "40GiB"]
    vllm = CliRunner().invoke(app, [*plain, "--speculative-num-steps", "3"])
    assert vllm.exit_code == 2 and "is a SGLang option" in vllm.output
