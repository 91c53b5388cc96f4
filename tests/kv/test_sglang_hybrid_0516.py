"""SGLang 0.5.16 – 0.5.23: a hybrid GDN / Mamba-2 model's state pool, derived by hand from the
wheels (mem_cache/kv_cache_configurator.py, KVCacheConfigurator):

* ``_handle_max_mamba_cache`` (0.5.16 :1703): without speculative decoding and without
  max_mamba_cache_size, ``int(rest × 0.9 / 1.9 × 2^30 // mamba_cache_per_req)`` slots
  (:1761 – :1785), their bytes taken off the budget (:1808); ``mamba_full_memory_ratio`` 0.9
  (0.5.16 server_args.py:2114). The pre-capture reserve (:1539) is only applied under
  SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, False (0.5.16 environ.py:337, 0.5.23 :640).
* ``_mamba_radix_cache_resolution`` (0.5.16 arg_groups/overrides.py:1159, 0.5.23 the same
  branch :478): strategy "auto" becomes extra_buffer when the overlap schedule is on and the
  architecture is in _MAMBA_EXTRA_BUFFER_ARCHS (Qwen3NextForCausalLM, FalconH1ForCausalLM,
  NemotronHForCausalLM; 0.5.16 :1133) on the triton linear-attention backend (the default,
  0.5.16 server_args.py:2157).
* ``_calculate_mamba_ratio`` (0.5.16 :1572): 3 + 2 with extra_buffer and overlap (constants
  :101 – :103); 0.5.23 :3062 the same 3 + ``get_mamba_tracking_slots`` 2
  (mem_cache/allocation_sizing.py:11), SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK False (environ.py:1637).
* ``resolve_max_num_reqs`` (0.5.16 :1622): ``min(max(min(int(tokens / context × 512), 4096),
  2048), tokens // 2, slots // 5)``.
* 0.5.9 (model_runner_kv_cache_mixin.py:362, server_args.py:874 – :877 "auto" → no_buffer):
  slots // 3.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sglang_hybrid_cases import CELL, NEMOTRON_H, PER_REQ, QWEN3_NEXT, GiB, plan_with

from mmcli.kv.figures import EngineFigures

RELEASES = [f"0.5.{n}" for n in range(16, 24)]
#: Qwen3-Next's max_position_embeddings (tests/kv/configs/Qwen--Qwen3-Next-80B-A3B-Thinking.json).
CONTEXT = 262144


def plan(release: str, path: Path, **options: Any) -> EngineFigures:
    return plan_with(release, path, **options)


def _expected(budget_gib: float, per_slot: int, pad: int = 0) -> tuple[int, int, int]:
    # pad 1: 0.5.17 on budget MambaPool's padding slot (kv_cache_configurator.py :1952 / :1977
    # in 0.5.17, :3381 / :3405 in 0.5.23): int((share − per_req) // per_req), slots + 1 off.
    slots = int((budget_gib * 0.9 / (1 + 0.9) * (1 << 30) - pad * PER_REQ) // PER_REQ)
    tokens = int((budget_gib - (slots + pad) * PER_REQ / (1 << 30)) * (1 << 30)) // CELL
    estimate = max(min(int(tokens / CONTEXT * 512), 4096), 2048)
    return slots, tokens, min(estimate, tokens // 2, slots // per_slot)


@pytest.mark.parametrize("release", RELEASES)
def test_qwen3_next_slots_take_the_ratio_and_requests_slots_over_five(release: str) -> None:
    slots, tokens, requests = _expected(40, 5, pad=int(release != "0.5.16"))
    result = plan(release, QWEN3_NEXT, memory_bytes=40 * GiB)
    assert result.value("state_slots") == slots
    assert result.value("pool_tokens") == tokens
    assert result.value("max_running_requests") == requests


def test_0_5_9_caps_requests_at_slots_over_three() -> None:
    # The default no_buffer strategy of 0.5.9 against extra_buffer from 0.5.16.
    slots, tokens, requests = _expected(40, 3)
    old = plan("0.5.9", QWEN3_NEXT, memory_bytes=40 * GiB)
    assert (old.value("state_slots"), old.value("pool_tokens")) == (slots, tokens)
    assert old.value("max_running_requests") == requests
    assert (
        plan("0.5.23", QWEN3_NEXT, memory_bytes=40 * GiB).value("max_running_requests") < requests
    )


@pytest.mark.parametrize("release", ["0.5.16", "0.5.23"])
def test_nemotron_h_keeps_the_radix_cache_and_the_ratio(release: str) -> None:
    new = plan(release, NEMOTRON_H, memory_bytes=60 * GiB)
    old = plan("0.5.9", NEMOTRON_H, memory_bytes=60 * GiB)
    # The same slot solve as 0.5.9 (both keep the radix cache for Nemotron-H), slots // 5;
    # 0.5.17 on take the padding slot off the share first: int((x − p) // p) = int(x // p) − 1.
    pad = int(release != "0.5.16")
    assert new.value("state_slots") == old.value("state_slots") - pad
    assert new.value("max_running_requests") <= new.value("state_slots") // 5
