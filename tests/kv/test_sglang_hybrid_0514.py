"""SGLang 0.5.14 and 0.5.15: a hybrid GDN / Mamba-2 model's state pool, with and without EAGLE /
NEXTN speculative decoding, derived by hand from the wheels:

* ``handle_max_mamba_cache`` (0.5.14 model_executor/model_runner_kv_cache_mixin.py:122, 0.5.15
  :141; the same code as 0.5.16's KVCacheConfigurator._handle_max_mamba_cache, mem_cache/
  kv_cache_configurator.py:1703): without speculative decoding ``int(rest × 0.9 / 1.9 × 2^30 //
  mamba_cache_per_req)`` slots (0.5.14 :201), their bytes off the budget (:219 – :224); with it
  the joint solve ``int(share // (per_req × (1 + D / ratio)))`` (:189) and ``per_req ×
  min(max_running_requests, slots // ratio) × D`` reserved (:192 – :199). No padding slot is
  budgeted (0.5.17 on budget it).
* The radix strategy "auto" becomes extra_buffer under the overlap schedule for Qwen3-Next,
  Falcon-H1 and Nemotron-H on the triton linear-attention backend (0.5.14 server_args.py:4380
  ``_handle_mamba_radix_cache``, :4338 ``_support_mamba_cache_extra_buffer``, default
  linear_attn_backend "triton" :1756; 0.5.15 arg_groups/overrides.py:1038, :982
  _MAMBA_EXTRA_BUFFER_ARCHS); speculative decoding keeps the overlap schedule (0.5.14
  arg_groups/speculative_hook.py:69 spec v2 always; :276 only warns on
  --disable-overlap-schedule), so ``_calculate_mamba_ratio`` is 3 + 2 = 5 (0.5.14 mixin :274,
  constants :55 – :58; 0.5.15 :293, :74 – :77).
* ``_resolve_max_num_reqs`` (0.5.14 :981, 0.5.15 :1225): ``min(max(min(int(tokens / context ×
  512), 4096), 2048), tokens // 2, slots // 5)``; --max-running-requests 48 with speculative
  decoding (0.5.14 speculative_hook.py:271).
"""

from __future__ import annotations

from typing import Any

import pytest
from sglang_hybrid_cases import CELL, NEMOTRON_H, PER_REQ, QWEN3_NEXT, SPEC, GiB, plan_with

from mmcli.errors import InputError
from mmcli.kv.figures import EngineFigures
from mmcli.kv.sglang import sglang_rules

RELEASES = ["0.5.14", "0.5.15"]
#: Qwen3-Next's max_position_embeddings (tests/kv/configs/Qwen--Qwen3-Next-80B-A3B-Thinking.json).
CONTEXT = 262144
D = 4  # SPEC: three steps, top-k 1 (0.5.14 speculative_hook.py:390: steps + 1)


def plan(release: str, **options: Any) -> EngineFigures:
    return plan_with(release, QWEN3_NEXT, **options)


@pytest.mark.parametrize("release", RELEASES)
def test_slots_take_the_ratio_and_requests_slots_over_five(release: str) -> None:
    slots = int(40 * 0.9 / (1 + 0.9) * (1 << 30) // PER_REQ)
    tokens = int((40 - slots * PER_REQ / (1 << 30)) * (1 << 30)) // CELL
    estimate = max(min(int(tokens / CONTEXT * 512), 4096), 2048)
    result = plan(release, memory_bytes=40 * GiB)
    assert result.value("state_slots") == slots
    assert result.value("pool_tokens") == tokens
    assert result.value("max_running_requests") == min(estimate, tokens // 2, slots // 5)
    # 0.5.13's no_buffer caps them at slots // 3 (server_args.py:2664 _handle_mamba_radix_cache).
    assert plan("0.5.13", memory_bytes=40 * GiB).value("max_running_requests") == slots // 3


@pytest.mark.parametrize("release", RELEASES)
def test_speculative_slots_are_solved_with_the_intermediate_states(release: str) -> None:
    share = 40 * 0.9 / (1 + 0.9) * (1 << 30)
    slots = int(share // (PER_REQ * (1 + D / 5)))
    reserve = PER_REQ * min(48, slots // 5) * D
    tokens = int((40 - reserve / (1 << 30) - slots * PER_REQ / (1 << 30)) * (1 << 30)) // CELL
    result = plan(release, memory_bytes=40 * GiB, **SPEC)
    assert result.value("state_slots") == slots
    assert result.value("pool_tokens") == tokens  # no draft headroom
    assert result.value("max_running_requests") == min(48, tokens // 2, slots // 5)
    assert any("radix cache stays on" in n for n in result.notes)
    nemo = plan_with(release, NEMOTRON_H, memory_bytes=60 * GiB, **SPEC)
    assert nemo.value("max_running_requests") <= nemo.value("state_slots") // 5


#: ``python tests/kv/sglang_hybrid_reference.py --configurator SRC_0.5.14 SRC_0.5.15
#: SRC_0.5.15.post1`` (each wheel's ModelRunnerKVCacheMixin.handle_max_mamba_cache and
#: _calculate_mamba_ratio, unchanged, on a stubbed self): Qwen3-Next, tp 1, 40 GiB →
#: (slots, max_total_num_tokens) without speculative decoding, with D 4 and 48 requests, with
#: D 4 and 8 requests; the three wheels printed the same figures, as 0.5.16's configurator does.
WHEEL = ((263, 920754), (146, 923898), (146, 1187994))


@pytest.mark.parametrize("release", RELEASES)
def test_the_wheels_own_solve_gives_the_same_figures(release: str) -> None:
    runs = (
        plan(release, memory_bytes=40 * GiB),
        plan(release, memory_bytes=40 * GiB, **SPEC),
        plan(release, memory_bytes=40 * GiB, max_running_requests=8, **SPEC),
    )
    assert tuple((r.value("state_slots"), r.value("pool_tokens")) for r in runs) == WHEEL


@pytest.mark.parametrize("release", RELEASES)
def test_extra_buffer_keeps_the_page_size_and_no_padding_slot_is_budgeted(release: str) -> None:
    # extra_buffer has no page_size = 1 (0.5.14 server_args.py:4364 – :4378; no_buffer's
    # 0.5.13 :2728 set it): --page-size 16 floors the tokens to the page.
    rules = sglang_rules(release)
    assert not rules.mamba_radix_page_one and not rules.mamba_pad_slot_budgeted
    paged = plan(release, memory_bytes=40 * GiB, page_size=16)
    assert paged.value("pool_tokens") == WHEEL[0][1] // 16 * 16


@pytest.mark.parametrize("release", RELEASES)
def test_more_draft_tokens_than_the_track_interval_are_refused(release: str) -> None:
    # extra_buffer asserts mamba_track_interval (256, 0.5.14 server_args.py:1741) >= the draft
    # tokens (0.5.14 :4375; 0.5.15 :4273).
    with pytest.raises(InputError, match="257 draft tokens exceed --mamba-track-interval 256"):
        plan(release, memory_bytes=400 * GiB, speculative_num_steps=256, speculative_eagle_topk=1)


@pytest.mark.parametrize("release", ["0.5.14", "0.5.15", "0.5.16", "0.5.23"])
def test_a_page_size_that_does_not_divide_the_track_interval_stops_the_start(release: str) -> None:
    # extra_buffer asserts mamba_track_interval % page_size == 0 (0.5.14 server_args.py:4377,
    # 0.5.23 arg_groups/mamba_hook.py:135); the interval defaults to 256 (0.5.14 :1741).
    with pytest.raises(InputError, match="--page-size 48 does not divide --mamba-track-interval"):
        plan_with(release, QWEN3_NEXT, memory_bytes=40 * GiB, page_size=48, page_size_given=True)
    result = plan_with(
        release, QWEN3_NEXT, memory_bytes=40 * GiB, page_size=64, page_size_given=True
    )
    assert result.value("pool_tokens") % 64 == 0


def test_no_buffer_releases_set_the_page_to_one_instead() -> None:
    # 0.5.11 – 0.5.13 keep no_buffer, which replaces a given page size by 1 (0.5.11
    # server_args.py:2425): no assert against the interval there.
    result = plan_with(
        "0.5.13", QWEN3_NEXT, memory_bytes=40 * GiB, page_size=48, page_size_given=True
    )
    assert result.value("block_tokens") == 1
