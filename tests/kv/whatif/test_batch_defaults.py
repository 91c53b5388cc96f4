"""vLLM's batch defaults by release, entry point and GPU (``get_batch_defaults``,
engine/arg_utils.py), which the ``--gpu`` estimate's activation peak takes."""

from __future__ import annotations

import pytest

from mmcli.errors import InputError
from mmcli.kv import PlanRequest
from mmcli.kv.releases import first_release, rules_for
from mmcli.kv.whatif.gpus import (
    batch_tier,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    resolve_gpu,
)


def test_the_largest_tier_comes_with_its_release_row() -> None:
    """vLLM 0.28.0 engine/arg_utils.py ``get_batch_defaults``: ``device_memory >= 160 *
    GiB_bytes`` takes 16384 batched tokens for LLM_CLASS and OPENAI_API_SERVER, 1024 seqs;
    0.27.0 has no such branch (≥ 70 GiB, not an A100: 16384 / 8192)."""
    b200 = resolve_gpu("B200")
    since = first_release("largest_batch_tier")
    assert since == "0.28"
    assert default_max_num_batched_tokens(b200, rules=rules_for("0.27")) == 8192
    assert default_max_num_batched_tokens(b200, rules=rules_for(since)) == 16384
    assert default_max_num_batched_tokens(b200, entry="llm", rules=rules_for("0.27")) == 16384
    assert default_max_num_seqs(b200, rules=rules_for(since)) == 1024
    # an H200 (139.80 GiB) stays on the large tier
    assert batch_tier(resolve_gpu("H200"), rules_for(since)) == "large"


def test_gb10_keeps_the_small_tier_from_its_release_row() -> None:
    """vLLM 0.33.0 engine/arg_utils.py: ``is_gb10 = current_platform.is_device_capability((12,
    1))`` and the 70 GiB branch requires ``not is_gb10``; 0.32.0 has no such check."""
    gb10 = resolve_gpu("GB10")
    since = first_release("gb10_small_tier")
    assert since == "0.33"
    assert default_max_num_batched_tokens(gb10, rules=rules_for("0.32")) == 8192
    assert default_max_num_batched_tokens(gb10, rules=rules_for(since)) == 2048
    assert default_max_num_batched_tokens(gb10, entry="llm", rules=rules_for(since)) == 8192
    assert default_max_num_seqs(gb10, rules=rules_for(since)) == 256


def test_the_entry_point_is_a_request_field_and_a_checked_one() -> None:
    """``entry`` picks the UsageContext row: OPENAI_API_SERVER (serve) or LLM_CLASS (llm)."""
    assert PlanRequest("tests/kv/configs/Qwen--Qwen1.5-7B.json").entry == "serve"
    with pytest.raises(InputError, match="--entry"):
        PlanRequest("tests/kv/configs/Qwen--Qwen1.5-7B.json", entry="offline")  # type: ignore[arg-type]


def test_the_llm_entry_point_changes_the_estimate() -> None:
    """On an H100 (vLLM 0.20.0 arg_utils.py: LLM_CLASS 16384, OPENAI_API_SERVER 8192) the LLM
    class profiles twice the tokens, so the activation peak is larger."""
    from mmcli.kv import plan_run

    def peak(entry: str) -> int:
        run = plan_run(
            PlanRequest(
                "tests/kv/configs/Qwen--Qwen1.5-7B.json",
                gpu="H100",
                weights="16GiB",
                vllm_version="0.20",
                entry=entry,  # type: ignore[arg-type]
            )
        )
        assert run.estimate is not None
        part = run.estimate.components[0]
        return int(part.inputs["max_num_batched_tokens"])

    assert peak("serve") == 8192
    assert peak("llm") == 16384
