"""The defaults that are rows of the release table: the block size (16; 64 from vLLM 0.34,
``CacheConfig.DEFAULT_BLOCK_SIZE`` in vllm/config/cache.py of 0.33.0 and 0.34.0) and the
``--gpu-memory-utilization`` of the ``--gpu`` estimate (tests/cli/test_kv_budget.py)."""

from __future__ import annotations

from typing import Any

import pytest

from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.inputs.layer_config import parse_mmcli_config
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import plan_kv_cache
from mmcli.kv.releases import CHANGES, first_release, rules_for
from mmcli.kv.result import KVPlan

GiB = 2**30
LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "hidden_size": 1024,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 8192,
}
DEEPSEEK = {
    "model_type": "deepseek_v3",
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "hidden_size": 1024,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 8192,
}


def plan(doc: dict[str, Any], **options: Any) -> KVPlan:
    model = parse_hf_config(doc, default_name="m", where="m")
    return plan_kv_cache(model, PlanOptions(memory_bytes=GiB, **options))


@pytest.mark.parametrize(("release", "block"), [("0.10", 16), ("0.33", 16), ("0.34", 64)])
def test_the_default_block_is_the_releases(release: str, block: int) -> None:
    got = plan(LLAMA, vllm_version=release)
    assert got.block_size == block
    assert got.page_size_bytes == block * 2 * 2 * 128 * 2  # tokens × K,V × heads × dim × bf16


def test_a_given_block_is_kept() -> None:
    assert plan(LLAMA, vllm_version="0.34", block_size=16).block_size == 16
    layers = {"name": "x", "defaults": {"num_kv_heads": 2, "head_size": 64, "dtype": "bfloat16"}}
    own = {**layers, "layers": [{"name": "l0", "block_size": 32}, {"name": "l1"}]}
    config = parse_mmcli_config(own, default_name="x", where="x")
    assert config.block_size_given
    got = plan_kv_cache(config, PlanOptions(memory_bytes=GiB))
    assert {g.spec.block_size for g in got.groups} <= {16, 32}  # the config's, not 64
    plain = parse_mmcli_config({**layers, "layers": [{"name": "l0"}]}, default_name="x", where="x")
    assert plan_kv_cache(plain, PlanOptions(memory_bytes=GiB)).block_size == 64


def test_the_mla_note_names_the_release_default() -> None:
    (old,) = list(plan(DEEPSEEK, vllm_version="0.33").findings)
    assert old.code == "backend-block-size" and "this plan uses 16" in old.message
    (new,) = list(plan(DEEPSEEK).findings)
    assert "CUTLASS MLA 128, others 64); this plan uses 64" in new.message
    assert new.hint == "pass --block-size 128 to plan a CUTLASS MLA run"


def test_the_defaults_are_release_rows() -> None:
    assert [rules_for(r).default_gpu_memory_utilization for r in ("0.19", "0.20", "0.34")] == [
        0.9,
        0.92,
        1.0,
    ]
    assert first_release("default_block_size", 64) == CHANGES[-1][0]
    assert first_release("extensible_kv_cache", True) == first_release("default_block_size", 64)
