"""SGLang 0.5.7: a hybrid GDN / Mamba-2 model's pools, with and without EAGLE / NEXTN
speculative decoding, against SGLang's own released code.

The slots and the profiled tokens come from running 0.5.7's ``handle_max_mamba_cache``
(model_runner_kv_cache_mixin.py:145) unchanged on the published Qwen3-Next and Nemotron-H configs
(tests/kv/sglang_hybrid_reference.py with the 0.5.5, 0.5.6 and 0.5.7 wheels), without and with
``speculative_num_draft_tokens`` 4 (``max_running_requests`` 48). The rest is derived by hand
from the 0.5.7 wheel:

* model_runner_kv_cache_mixin.py:165 – :178: with speculative decoding, ``mamba_cache_per_req ×
  max_running_requests × D`` leaves the budget before the ratio solve (no ``// (1 + D)``).
* :39 – :41, :289 – :304: ``max_num_reqs = min(max_num_reqs, slots // (3 + 2))``: the default
  ``mamba_scheduler_strategy`` "auto" becomes "no_buffer" (server_args.py:473, :766), which still
  takes ``MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP`` 2 while the radix cache is on.
* :306 – :312: the target's ``draft_runner_cache_size`` is its own tokens (no draft headroom).
* model_runner.py: no ``disable_radix_cache`` for ``mamba2_config`` models any more (0.5.6 :448
  had it); server_args.py:1330 / :1444 keep it on for Nemotron-H and Falcon-H1 (off only with
  trtllm_mha on SM100).
* :386 – :397 ``HybridReqToTokenPool(mamba_size=slots, mamba_spec_state_size=max_num_reqs)``;
  memory_pool.py:188 / :195 the states of slots + 1 rows, :205 / :220 the intermediate caches of
  ``max_num_reqs + 1`` rows, :236 the ``Mamba Cache is allocated`` line.
* model_runner.py:524 ``max_running_requests = min(tokens // 2 or the given one, max_num_reqs)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sglang_hybrid_cases import CONV, NEMOTRON_H, QWEN3_NEXT, SPEC, SSM, GiB, plan_with

from mmcli.kv.figures import EngineFigures

# (config, tp, budget, speculative) → (max_mamba_cache_size, max_total_num_tokens) printed by
# 0.5.7's handle_max_mamba_cache (D = 4 with speculative decoding).
REFERENCE = [
    (QWEN3_NEXT, 1, 40 * GiB, False, 263, 920_754),
    (QWEN3_NEXT, 1, 60 * GiB, False, 394, 1_382_704),
    (QWEN3_NEXT, 4, 40 * GiB, False, 1053, 1_839_937),
    (QWEN3_NEXT, 1, 40 * GiB, True, 172, 603_210),
    (QWEN3_NEXT, 1, 60 * GiB, True, 304, 1_062_016),
    (QWEN3_NEXT, 4, 40 * GiB, True, 962, 1_681_165),
    (QWEN3_NEXT, 4, 60 * GiB, True, 1488, 2_601_920),
    (NEMOTRON_H, 1, 60 * GiB, False, 298, 2_074_428),
    (NEMOTRON_H, 2, 70 * GiB, False, 697, 4_829_942),
    (NEMOTRON_H, 1, 60 * GiB, True, 207, 1_444_794),
    (NEMOTRON_H, 2, 70 * GiB, True, 606, 4_200_308),
]


def plan(path: Path, **options: Any) -> EngineFigures:
    return plan_with("0.5.7", path, **options)


@pytest.mark.parametrize(("path", "tp", "budget", "spec", "slots", "tokens"), REFERENCE)
def test_slots_and_tokens_match_sglangs_own_code(
    path: Path, tp: int, budget: int, spec: bool, slots: int, tokens: int
) -> None:
    result = plan(path, tp=tp, memory_bytes=budget, **(SPEC if spec else {}))
    assert result.value("state_slots") == slots
    # No draft headroom: the pool is the profiled tokens (page 1).
    assert result.value("pool_tokens") == tokens
    # slots // 5 (radix cache on, no_buffer); 48 with speculative decoding; context 262,144
    # (Qwen3-Next) and 8,192 (Nemotron-H) give request pools of 2,048 or more.
    assert result.value("max_running_requests") == min(48 if spec else 4096, slots // 5)
    assert result.refusal is None


def test_nemotron_h_keeps_the_radix_cache_from_0_5_7() -> None:
    # 0.5.6 turns it off (512 fixed slots); 0.5.7 solves them by the ratio: 298 at 60 GiB.
    assert plan(NEMOTRON_H, release="0.5.6", memory_bytes=60 * GiB).value("state_slots") == 512
    result = plan(NEMOTRON_H, memory_bytes=60 * GiB)
    assert result.value("state_slots") == 298
    assert "radix cache on), requests capped at slots // 5" in result.notes[0]


def test_speculative_mamba_line_sizes_the_intermediate_caches_by_the_requests() -> None:
    # 172 slots → 173 state rows; the request pool min(48, 172 // 5) = 34 → 35 rows × D = 4.
    result = plan(QWEN3_NEXT, memory_bytes=40 * GiB, **SPEC)
    assert result.log_lines[0] == (
        f"Mamba Cache is allocated. max_mamba_cache_size: 172, "
        f"conv_state size: {CONV * 173 / GiB:.2f}GB, ssm_state size: {SSM * 173 / GiB:.2f}GB "
        f"intermediate_ssm_state_cache size: {SSM * 35 * 4 / GiB:.2f}GB "
        f"intermediate_conv_window_cache size: {CONV * 35 * 4 / GiB:.2f}GB"
    )
    assert result.log_lines[1].startswith("KV Cache is allocated. #tokens: 603210,")
    # 77,266,944 B × 48 × 4 = 13.82 GiB reserved; plus 172 slots: 26.19 GiB in all.
    reserve = 77_266_944 * 48 * 4 / GiB
    assert f"{reserve:.2f} GiB reserved first" in result.notes[0]
    assert f"{reserve + 172 * 77_266_944 / GiB:.2f} GiB taken off" in result.notes[0]


def test_a_given_max_running_requests_scales_the_reserve() -> None:
    # --max-running-requests 16: 77,266,944 × 16 × 4 B off 40 GiB, then the ratio solve.
    result = plan(QWEN3_NEXT, memory_bytes=40 * GiB, max_running_requests=16, **SPEC)
    rest = 40 - 77_266_944 * 16 * 4 / GiB
    slots = int(rest * 0.9 / (1 + 0.9) * GiB // 77_266_944)
    assert result.value("state_slots") == slots
    left = rest - slots * 77_266_944 / GiB
    assert result.value("pool_tokens") == int(left * GiB // 24_576)
    assert result.value("max_running_requests") == 16


def test_the_plan_command_plans_0_5_7() -> None:
    from typer.testing import CliRunner

    from mmcli.cli.main import app

    args = ["kv-share", "plan", str(QWEN3_NEXT), "--engine", "sglang", "--memory", "40GiB"]
    args += ["--sglang-version", "0.5.7", "--speculative-num-steps", "3"]
    result = CliRunner().invoke(app, [*args, "--speculative-eagle-topk", "1"])
    assert result.exit_code == 0, result.output
    assert "#tokens: 603210," in result.output
