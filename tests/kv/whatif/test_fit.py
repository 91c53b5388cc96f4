"""``--max-model-len auto``: the largest length whose request passes the start-up check."""

from __future__ import annotations

import pytest

from mmcli.errors import InputError
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import PlanOptions
from mmcli.kv.whatif.fit import auto_max_model_len, fit_max_model_len

GIB = 2**30


def qwen3_14b_like() -> ModelConfig:
    # 40 layers × 8 KV heads × head 128, bf16: a 16-token page is 2 × 16 × 8 × 128 × 2 = 65,536 B
    # per layer, so one pool block (all 40 layers) is 2,621,440 B.
    doc = {
        "model_type": "qwen3",
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": 5120,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 40960,
    }
    return parse_hf_config(doc, default_name="qwen3-14b-like", where="test")


def test_reduced_as_the_engine_reduces_it_newest_rules() -> None:
    # 0.34: blocks of 64 tokens (CacheConfig.DEFAULT_BLOCK_SIZE), 10,485,760 B each; one null
    # block held back: ⌊(1 GiB − 10,485,760) / 10,485,760⌋ = 101 blocks → 101 × 64 = 6,464.
    fit = fit_max_model_len(qwen3_14b_like(), PlanOptions(memory_bytes=GIB))
    assert (fit.upper, fit.fitted, fit.reduced) == (40960, 6464, True)
    assert fit.message() == "Auto-fit max_model_len: reduced from 40,960 to 6,464"
    assert auto_max_model_len(qwen3_14b_like(), PlanOptions(memory_bytes=GIB)) == 6464


def test_reduced_under_029_to_033_rules() -> None:
    # 0.29-0.33: one null block, blocks of 16. 1 GiB − 2,621,440 B = 1,071,120,384 B for the
    # check; ⌊1,071,120,384 / 2,621,440⌋ = 408 blocks → 408 × 16 = 6,528 tokens.
    options = PlanOptions(memory_bytes=GIB, vllm_version="0.33")
    assert auto_max_model_len(qwen3_14b_like(), options) == 6528


def test_reduced_under_old_rules_without_null_block() -> None:
    # 0.10: no null block; ⌊1 GiB / 2,621,440⌋ = 409 blocks → 6,544 tokens.
    options = PlanOptions(memory_bytes=GIB, vllm_version="0.10")
    assert auto_max_model_len(qwen3_14b_like(), options) == 6544


def test_the_asked_length_is_the_upper_bound_and_kept_when_it_fits() -> None:
    fit = fit_max_model_len(qwen3_14b_like(), PlanOptions(memory_bytes=20 * GIB))
    assert (fit.fitted, fit.reduced) == (40960, False)
    assert fit.message() == "Auto-fit max_model_len: 40,960 fits as it is"
    options = PlanOptions(memory_bytes=GIB, max_model_len=4096)
    assert auto_max_model_len(qwen3_14b_like(), options) == 4096


def test_auto_needs_memory_and_room_for_one_token() -> None:
    with pytest.raises(InputError, match="needs the KV memory"):
        auto_max_model_len(qwen3_14b_like(), PlanOptions())
    with pytest.raises(InputError, match="not even a 1-token request fits"):
        auto_max_model_len(qwen3_14b_like(), PlanOptions(memory_bytes=2**20))
