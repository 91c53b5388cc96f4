"""SGLang 0.5.8: a hybrid GDN / Mamba-2 model's pools, with and without EAGLE / NEXTN
speculative decoding, derived by hand from the 0.5.8 wheel:

* model_executor/model_runner_kv_cache_mixin.py:146 ``handle_max_mamba_cache``: with speculative
  decoding, ``mamba_cache_per_req × max_running_requests × D`` leaves the budget first (:151 –
  :166, now before the radix-cache branch; 0.5.7 had it inside); with the radix cache on,
  ``int(rest × 0.9 / 1.9 × 2^30 // mamba_cache_per_req)`` slots (:181 – :194).
* :266 – :280: the extra slots per request (``MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP`` 2,
  ``_NO_OVERLAP`` 1, :37 – :39) are added only with ``enable_mamba_extra_buffer()``; the default
  ``mamba_scheduler_strategy`` "auto" becomes "no_buffer" (server_args.py:499, :842 – :845), so
  ``max_num_reqs = min(max_num_reqs, slots // 3)``.
* server_args.py:1438 – :1442: speculative decoding turns the radix cache off for
  NemotronHForCausalLM (refused here: those fixed slots are not mirrored).
* mem_cache/memory_pool.py:227 / :234 the states of slots + 1 rows, :244 / :259 the
  intermediate caches of ``max_num_reqs + 1`` rows, :276 the ``Mamba Cache is allocated`` line;
  model_runner.py:558 ``max_running_requests = min(tokens // 2 or the given one, max_num_reqs)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sglang_hybrid_cases import CELL, NEMOTRON_H, PER_REQ, QWEN3_NEXT, SPEC, GiB, plan_with

from mmcli.errors import InputError
from mmcli.kv.figures import EngineFigures


def plan(path: Path, **options: Any) -> EngineFigures:
    return plan_with("0.5.8", path, **options)


def test_per_request_state_and_cell() -> None:
    assert PER_REQ == 77_266_944  # the 0.5.7 test's figure, the same config classes
    result = plan(QWEN3_NEXT, memory_bytes=40 * GiB)
    assert f"{PER_REQ:,} B per request" in result.notes[0]
    assert f"({CELL:,} B per token)" in result.notes[1]


@pytest.mark.parametrize("budget", [40, 60])
@pytest.mark.parametrize("release", ["0.5.8", "0.5.9"])
def test_qwen3_next_without_speculative_caps_requests_at_slots_over_3(
    budget: int, release: str
) -> None:
    # 0.5.9 without speculative decoding: the same ratio solve (mixin :186 – :202) and cap
    # (:362 – :368).
    slots = int(budget * 0.9 / (1 + 0.9) * GiB // PER_REQ)
    tokens = int((budget - slots * PER_REQ / GiB) * GiB // CELL)
    result = plan(QWEN3_NEXT, release=release, memory_bytes=budget * GiB)
    assert result.value("state_slots") == slots
    assert result.value("pool_tokens") == tokens
    # Request pool min(max(tokens / 262,144 × 512, 2048), 4096) = 2048, then slots // 3.
    assert result.value("max_running_requests") == slots // 3
    assert result.refusal is None
    assert "requests capped at slots // 3" in result.notes[0]


def test_qwen3_next_with_speculative_reserves_the_states_first() -> None:
    # D = steps + 1 = 4 (top-k 1); --max-running-requests defaults to 48 here.
    rest = 40 - PER_REQ * 48 * 4 / GiB
    slots = int(rest * 0.9 / (1 + 0.9) * GiB // PER_REQ)
    tokens = int((rest - slots * PER_REQ / GiB) * GiB // CELL)
    result = plan(QWEN3_NEXT, memory_bytes=40 * GiB, **SPEC)
    assert result.value("state_slots") == slots
    assert result.value("pool_tokens") == tokens  # no draft headroom
    requests = min(48, slots // 3)
    assert result.value("max_running_requests") == requests
    conv, ssm = 36 * 8192 * 3 * 2, 36 * 32 * 128 * 128 * 4
    assert result.log_lines[0] == (
        f"Mamba Cache is allocated. max_mamba_cache_size: {slots}, "
        f"conv_state size: {conv * (slots + 1) / GiB:.2f}GB, "
        f"ssm_state size: {ssm * (slots + 1) / GiB:.2f}GB "
        f"intermediate_ssm_state_cache size: {ssm * (requests + 1) * 4 / GiB:.2f}GB "
        f"intermediate_conv_window_cache size: {conv * (requests + 1) * 4 / GiB:.2f}GB"
    )


def test_nemotron_h_keeps_the_ratio_and_caps_at_slots_over_3() -> None:
    old = plan(NEMOTRON_H, release="0.5.7", memory_bytes=60 * GiB)
    new = plan(NEMOTRON_H, memory_bytes=60 * GiB)
    assert new.value("state_slots") == old.value("state_slots")
    assert new.value("pool_tokens") == old.value("pool_tokens")
    assert new.value("max_running_requests") == new.value("state_slots") // 3
    assert old.value("max_running_requests") == old.value("state_slots") // 5


def test_nemotron_h_with_speculative_decoding_is_refused() -> None:
    with pytest.raises(InputError, match="turns the radix cache off for NemotronHForCausalLM"):
        plan(NEMOTRON_H, memory_bytes=60 * GiB, **SPEC)
    # 0.5.7 keeps the radix cache on under speculative decoding: planned.
    assert plan(NEMOTRON_H, release="0.5.7", memory_bytes=60 * GiB, **SPEC).refusal is None
