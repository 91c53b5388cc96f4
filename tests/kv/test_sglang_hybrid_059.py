"""SGLang 0.5.9: a hybrid GDN / Mamba-2 model's pools, derived by hand from the 0.5.9 wheel:

* model_executor/model_runner_kv_cache_mixin.py:151 ``handle_max_mamba_cache``: with speculative
  decoding, ``mamba_cache_per_req × max_running_requests × D`` leaves the budget first (:156 –
  :171); a given max_mamba_cache_size is taken first (:173), then with the radix cache off and
  --max-running-requests set the slots are max_running_requests (:178 – :185), else
  ``int(rest × 0.9 / 1.9 × 2^30 // mamba_cache_per_req)`` (:186 – :202).
* server_args.py:1760 – :1764 (``_handle_mamba_radix_cache``, called for Qwen3-Next :1600,
  Nemotron-H :1548 and Falcon-H1 :1634): speculative decoding turns the radix cache off; it sets
  --max-running-requests to 48 when not given (:2362 – :2363).
* mixin :362 – :368: ``max_num_reqs = min(max_num_reqs, slots // ratio)``, ratio 1 with the
  radix cache off, 3 with it on (no_buffer, server_args.py:874 – :877).
* model_runner.py:1580: Qwen3.5 / 3.6 are served with ``hybrid_gdn_config``
  (tests/kv/test_sglang_qwen3_5.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sglang_hybrid_cases import CELL, NEMOTRON_H, PER_REQ, QWEN3_NEXT, SPEC, GiB, plan_with

from mmcli.errors import InputError
from mmcli.kv.figures import EngineFigures


def plan(path: Path, **options: Any) -> EngineFigures:
    return plan_with("0.5.9", path, **options)


def test_qwen3_next_with_speculative_turns_the_radix_cache_off() -> None:
    # D = steps + 1 = 4 (top-k 1); 48 requests: their states reserved, then 48 slots.
    rest = 40 - PER_REQ * 48 * 4 / GiB
    tokens = int((rest - 48 * PER_REQ / GiB) * GiB // CELL)
    result = plan(QWEN3_NEXT, memory_bytes=40 * GiB, **SPEC)
    assert result.value("state_slots") == 48
    assert result.value("pool_tokens") == tokens
    assert result.value("max_running_requests") == 48
    old = plan(QWEN3_NEXT, release="0.5.8", memory_bytes=40 * GiB, **SPEC)
    assert old.value("state_slots") > 48  # 0.5.8 keeps the ratio


def test_a_given_max_running_requests_sizes_the_speculative_slots() -> None:
    rest = 40 - PER_REQ * 20 * 4 / GiB
    tokens = int((rest - 20 * PER_REQ / GiB) * GiB // CELL)
    result = plan(QWEN3_NEXT, memory_bytes=40 * GiB, max_running_requests=20, **SPEC)
    assert result.value("state_slots") == 20
    assert result.value("pool_tokens") == tokens
    assert result.value("max_running_requests") == 20


def test_nemotron_h_with_speculative_decoding_is_planned() -> None:
    result = plan(NEMOTRON_H, memory_bytes=60 * GiB, **SPEC)
    assert result.value("state_slots") == 48
    assert result.value("max_running_requests") == 48
    with pytest.raises(InputError, match="turns the radix cache off for NemotronHForCausalLM"):
        plan(NEMOTRON_H, release="0.5.8", memory_bytes=60 * GiB, **SPEC)


@pytest.mark.parametrize(("dtype", "ssm_bytes"), [("bfloat16", 2), ("float16", 2), ("float32", 4)])
def test_the_configs_mamba_ssm_dtype_sizes_the_state_from_0_5_9(
    dtype: str, ssm_bytes: int, tmp_path: Path
) -> None:
    """0.5.9 server_args.py:522 leaves --mamba-ssm-dtype None, so configs/mamba_utils.py
    ``mamba2_state_dtype`` takes the config's mamba_ssm_dtype (float32, bfloat16 or float16);
    0.5.8 server_args.py:497 defaults the flag to float32 and sets it for the state (:2391)."""
    doc = json.loads(QWEN3_NEXT.read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**doc, "mamba_ssm_dtype": dtype}), encoding="utf-8")
    per_req = 36 * (8192 * 3 * 2 + 32 * 128 * 128 * ssm_bytes)
    slots = int(40 * 0.9 / (1 + 0.9) * GiB // per_req)
    assert plan(path, memory_bytes=40 * GiB).value("state_slots") == slots
    old = int(40 * 0.9 / (1 + 0.9) * GiB // PER_REQ)
    assert plan(path, release="0.5.8", memory_bytes=40 * GiB).value("state_slots") == old
