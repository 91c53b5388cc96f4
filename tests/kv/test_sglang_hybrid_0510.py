"""SGLang 0.5.10 – 0.5.13: a hybrid GDN / Mamba-2 model's pools, from the released wheels.

* model_executor/model_runner_kv_cache_mixin.py ``handle_max_mamba_cache`` (0.5.10 :179, 0.5.11
  :72, 0.5.12 :78) is 0.5.9's, unchanged; 0.5.13 (:82) changes only the speculative path (a
  joint solve) and adds a RuntimeError when no slot is left (:167). Without speculative
  decoding the slots are ``int(rest × 0.9 / 1.9 × 2^30 // mamba_cache_per_req)``.
* 0.5.10 mixin :840 ``_resolve_max_num_reqs``: ``min(estimate, capacity // 2)``, then
  ``slots // ratio`` (:854, ratio 3: MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, :64, with the
  default no_buffer strategy, server_args.py:964 – :967).
* server_args.py ``_handle_mamba_radix_cache``: speculative decoding with the radix cache on
  raises ValueError (0.5.10 :2207, 0.5.11 :2454, 0.5.12 :2569, 0.5.13 :2755), where 0.5.9 turned
  the radix cache off; 0.5.11 on set page_size 1 for the no_buffer radix cache (0.5.11 :2425).
* The reference figures: ``python tests/kv/sglang_hybrid_reference.py newer 0.5.10=SRC …``
  (SGLang's own handle_max_mamba_cache and config classes on these config.json files):
  Qwen3-Next tp 1, 40 GiB: 263 slots, 920,754 tokens; 60 GiB: 394, 1,382,704; Nemotron-H-8B
  tp 1, 60 GiB: 298, 2,074,428; 70 GiB: 348, 2,418,088 (each of 0.5.10 – 0.5.13; 0.5.9 the
  same).
"""

from __future__ import annotations

import pytest
from sglang_hybrid_cases import CELL, NEMOTRON_H, PER_REQ, QWEN3_NEXT, SPEC, GiB, plan_with

from mmcli.errors import InputError

RELEASES = ["0.5.10", "0.5.11", "0.5.12", "0.5.13"]
#: (config, budget GiB, slots, pool tokens) from the reference script (module docstring).
REFERENCE = [
    (QWEN3_NEXT, 40, 263, 920_754),
    (QWEN3_NEXT, 60, 394, 1_382_704),
    (NEMOTRON_H, 60, 298, 2_074_428),
    (NEMOTRON_H, 70, 348, 2_418_088),
]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(("config", "budget", "slots", "tokens"), REFERENCE)
def test_state_pool_matches_sglangs_own_sizing(
    release: str, config: object, budget: int, slots: int, tokens: int
) -> None:
    result = plan_with(release, config, memory_bytes=budget * GiB)  # type: ignore[arg-type]
    assert result.value("state_slots") == slots
    assert result.value("pool_tokens") == tokens
    # The request pool (2048 at these capacities / context lengths) capped at slots // 3.
    assert result.value("max_running_requests") == slots // 3
    assert result.refusal is None


def test_qwen3_next_by_hand() -> None:
    slots = int(40 * 0.9 / (1 + 0.9) * GiB // PER_REQ)
    tokens = int((40 - slots * PER_REQ / GiB) * GiB // CELL)
    result = plan_with("0.5.12", QWEN3_NEXT, memory_bytes=40 * GiB)
    assert (result.value("state_slots"), result.value("pool_tokens")) == (slots, tokens)
    assert result.log_lines[0].startswith(
        f"Mamba Cache is allocated. max_mamba_cache_size: {slots}"
    )


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("config", [QWEN3_NEXT, NEMOTRON_H])
def test_speculative_decoding_with_the_radix_cache_stops_the_start(
    release: str, config: object
) -> None:
    with pytest.raises(InputError, match="not compatible with radix cache") as info:
        plan_with(release, config, memory_bytes=60 * GiB, **SPEC)  # type: ignore[arg-type]
    # The newest release that plans it: 0.5.16 on solve the slots and the draft states jointly
    # with the radix cache on (mem_cache/kv_cache_configurator.py:1756 in 0.5.16).
    assert "--sglang-version 0.5.23" in str(info.value.hint)


def test_a_given_page_size_is_set_to_1_from_0_5_11() -> None:
    # 0.5.10 keeps --page-size 16 (tokens floored to it); 0.5.11 sets page_size 1.
    old = plan_with("0.5.10", QWEN3_NEXT, memory_bytes=40 * GiB, page_size=16)
    new = plan_with("0.5.11", QWEN3_NEXT, memory_bytes=40 * GiB, page_size=16)
    assert old.value("pool_tokens") == 920_754 // 16 * 16
    assert new.value("pool_tokens") == 920_754
    assert new.value("block_tokens") == 1


def test_no_state_slot_stops_0_5_13_with_its_own_error() -> None:
    # A budget below one request's state (77,266,944 B): max_mamba_cache_size 0.
    small = PER_REQ // 2
    new = plan_with("0.5.13", QWEN3_NEXT, memory_bytes=small)
    assert new.refusal is not None and "Not enough GPU memory for hybrid" in new.refusal
    old = plan_with("0.5.12", QWEN3_NEXT, memory_bytes=small)
    assert old.refusal is not None and "Not enough GPU memory for hybrid" not in old.refusal
