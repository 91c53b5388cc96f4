"""SGLang 0.5.16 – 0.5.23: a hybrid GDN / Mamba-2 model with EAGLE / NEXTN speculative decoding,
derived by hand from the wheels:

* arg_groups/speculative_hook.py ``_handle_eagle_family``: --max-running-requests defaults to 48
  (0.5.16 :508, 0.5.17 :512), and top-k 1 sets the draft tokens to steps + 1 (0.5.16 :632).
* The radix cache stays on: ``_mamba_radix_cache_resolution`` (0.5.16 arg_groups/overrides.py
  :1159) has no speculative branch (0.5.9 server_args.py:1760 turned it off), so "auto" is
  extra_buffer and ``_calculate_mamba_ratio`` is 3 + 2 = 5 (0.5.16
  mem_cache/kv_cache_configurator.py:1572, 0.5.23 :3062).
* ``_handle_max_mamba_cache`` (0.5.16 :1703): the share ``rest × 0.9 / 1.9`` solves the slots
  jointly, ``int(share // (per_req × (1 + D / 5)))`` (:1773), then ``per_req ×
  min(max_running_requests, slots // 5) × D`` (:1784) and the slots are taken off the budget
  (:1808). 0.5.17 on budget MambaPool's padding slot: ``int((share − per_req (1 + D)) //
  (per_req (1 + D / 5)))`` (0.5.17 :1935, 0.5.23 :3364), ``(min(…) + 1) × D`` (:1947 / :3376)
  and (slots + 1) × per_req (:1977 / :3405).
* No draft headroom in the target's pool: the draft worker takes the target's
  MemoryPoolConfig (0.5.16 kv_cache_configurator.py:221); the request pool is
  ``min(max_running_requests, tokens // 2, slots // 5)`` (``resolve_max_num_reqs`` :1622).
* MambaPool's intermediate caches have the request pool + 1 rows (``mamba_spec_state_size``
  = max_num_reqs, :705; memory_pool.py:631 ``spec_state_size + 1``), the conv windows
  deduplicated for top-k 1 on CUDA (memory_pool.py:110, :389).
"""

from __future__ import annotations

from typing import Any

import pytest
from sglang_hybrid_cases import CELL, NEMOTRON_H, PER_REQ, QWEN3_NEXT, SPEC, SSM, GiB, plan_with

from mmcli.errors import InputError
from mmcli.kv.figures import EngineFigures

RELEASES = [f"0.5.{n}" for n in range(16, 24)]
D = 4  # SPEC: three steps, top-k 1


def plan(release: str, **options: Any) -> EngineFigures:
    return plan_with(release, QWEN3_NEXT, **options, **SPEC)


def _expected(release: str, budget_gib: float, requests: int) -> tuple[int, int, int, int]:
    pad = int(release != "0.5.16")
    share = budget_gib * 0.9 / (1 + 0.9) * (1 << 30)
    slots = int((share - pad * PER_REQ * (1 + D)) // (PER_REQ * (1 + D / 5)))
    reserve = PER_REQ * (min(requests, slots // 5) + pad) * D
    left = budget_gib - reserve / (1 << 30) - (slots + pad) * PER_REQ / (1 << 30)
    tokens = int(left * (1 << 30)) // CELL
    return slots, reserve, tokens, min(requests, tokens // 2, slots // 5)


@pytest.mark.parametrize("release", RELEASES)
def test_the_slots_are_solved_with_the_intermediate_states(release: str) -> None:
    slots, _, tokens, requests = _expected(release, 40, 48)
    result = plan(release, memory_bytes=40 * GiB)
    assert result.value("state_slots") == slots
    # No draft headroom: the pool is the budget left over the cell, nothing added.
    assert result.value("pool_tokens") == tokens
    assert result.value("max_running_requests") == requests


@pytest.mark.parametrize("release", ["0.5.16", "0.5.23"])
def test_a_given_max_running_requests_caps_the_reserve(release: str) -> None:
    slots, reserve, tokens, requests = _expected(release, 40, 8)
    result = plan(release, memory_bytes=40 * GiB, max_running_requests=8)
    assert (result.value("state_slots"), result.value("pool_tokens")) == (slots, tokens)
    assert result.value("max_running_requests") == requests == 8
    assert f"{reserve / GiB:.2f} GiB" in " ".join(result.notes)


def test_the_padding_slot_is_what_0_5_17_changes() -> None:
    old, new = plan("0.5.16", memory_bytes=40 * GiB), plan("0.5.17", memory_bytes=40 * GiB)
    # The padding slot and one more request's D states come first, so fewer slots solve,
    # and the budget they leave holds more tokens.
    assert new.value("state_slots") < old.value("state_slots")
    assert new.value("pool_tokens") > old.value("pool_tokens")


@pytest.mark.parametrize("release", ["0.5.16", "0.5.23"])
def test_intermediate_caches_have_the_request_pool_plus_one_rows(release: str) -> None:
    result = plan(release, memory_bytes=40 * GiB)
    rows = result.value("max_running_requests") + 1
    ssm = SSM * rows * D / GiB
    assert f"intermediate_ssm_state_cache size: {ssm:.2f}GB" in result.log_lines[0]
    # Top-k 1 on CUDA: one deduplicated (8192, D + 3 − 1) window per layer and row
    # (memory_pool.py:110 conv_window_dedup_enabled, :389 D + win − 1; 0.5.16), not D × (8192, 3).
    conv = 36 * rows * 8192 * (D + 3 - 1) * 2 / GiB
    assert f"intermediate_conv_window_cache size: {conv:.2f}GB" in result.log_lines[0]
    assert conv < 36 * rows * 8192 * 3 * D * 2 / GiB


@pytest.mark.parametrize("release", ["0.5.16", "0.5.23"])
def test_nemotron_h_keeps_the_radix_cache_under_speculative_decoding(release: str) -> None:
    # 0.5.9 turned it off (slots = the 48 requests); here the slots take the ratio.
    result = plan_with(release, NEMOTRON_H, memory_bytes=60 * GiB, **SPEC)
    assert result.value("state_slots") > 48
    assert result.value("max_running_requests") <= result.value("state_slots") // 5
    assert any("radix cache stays on" in n for n in result.notes)


#: ``python tests/kv/sglang_hybrid_reference.py --configurator SRC_0.5.16 … SRC_0.5.23`` (each
#: wheel's KVCacheConfigurator._handle_max_mamba_cache and _calculate_mamba_ratio, unchanged,
#: on a stubbed self): Qwen3-Next, tp 1, 40 GiB → (slots, max_total_num_tokens) without
#: speculative decoding, with D 4 and 48 requests, with D 4 and 8 requests. 0.5.17 – 0.5.23
#: printed the same figures.
WHEEL = {
    "0.5.16": ((263, 920754), (146, 923898), (146, 1187994)),
    **{f"0.5.{n}": ((262, 920754), (143, 930186), (143, 1181706)) for n in range(17, 24)},
}


@pytest.mark.parametrize("release", RELEASES)
def test_the_wheels_own_solve_gives_the_same_figures(release: str) -> None:
    runs = (
        plan_with(release, QWEN3_NEXT, memory_bytes=40 * GiB),
        plan(release, memory_bytes=40 * GiB),
        plan(release, memory_bytes=40 * GiB, max_running_requests=8),
    )
    got = tuple((r.value("state_slots"), r.value("pool_tokens")) for r in runs)
    assert got == WHEEL[release]


@pytest.mark.parametrize("release", ["0.5.16", "0.5.23"])
def test_more_draft_tokens_than_the_track_interval_are_refused(release: str) -> None:
    # extra_buffer asserts mamba_track_interval (256 by default) >= the draft tokens (0.5.16
    # server_args.py:2142, :4844; 0.5.23 arg_groups/fields/exec_.py:533, mamba_hook.py:133).
    ok = {"speculative_num_steps": 255, "speculative_eagle_topk": 1}
    assert plan_with(release, QWEN3_NEXT, memory_bytes=400 * GiB, **ok).value("state_slots")
    with pytest.raises(InputError, match="257 draft tokens exceed --mamba-track-interval 256"):
        plan_with(
            release,
            QWEN3_NEXT,
            memory_bytes=400 * GiB,
            speculative_num_steps=256,
            speculative_eagle_topk=1,
        )
