"""vLLM's own unit-test numbers for grouping, block counts and concurrency, mirrored.

The inputs and expected outputs below are the numbers of vLLM's
``tests/v1/core/test_kv_cache_utils.py`` (``test_estimate_max_model_len``,
``test_get_max_concurrency_for_kv_cache_config``, ``test_get_kv_cache_config``); they hold
for the releases mirrored here (0.10 through 0.34: these functions did not change for such
inputs). Only the facts (specs, memory, expected numbers) are taken, not the test code.
"""

from __future__ import annotations

import pytest

from mmcli.kv.engine.layout import (
    LayerSpecs,
    Layout,
    group_layers,
    largest_max_model_len,
    num_blocks,
)
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import plan_kv_cache
from mmcli.kv.releases import rules_for
from mmcli.kv.spec import FullAttentionSpec, KVCacheSpec, Layer, SlidingWindowSpec

GiB = 2**30


def layout(specs: list[KVCacheSpec], release: str = "0.20") -> Layout:
    return group_layers(
        LayerSpecs.of([f"layer.{i}" for i in range(len(specs))], list(specs)), rules_for(release)
    )


def groups(specs: list[KVCacheSpec]) -> list[list[int]]:
    return [[int(n.split(".")[1]) for n in g.layer_names] for g in layout(specs).groups]


@pytest.mark.parametrize(("max_model_len", "expected"), [(16385, 16384), (16383, 16383)])
def test_estimate_max_model_len(max_model_len: int, expected: int) -> None:
    # 32 full layers, 32 KV heads × 128, fp16, block 16: 256 KiB per token over the model;
    # 8 GiB holds exactly 32,768 blocks of 16 tokens... per layer: 16,384 tokens.
    spec = FullAttentionSpec(16, 32, 128, "float16")
    pool, rules = layout([spec] * 32), rules_for("0.20")
    got = largest_max_model_len(
        lambda length: pool.request_bytes(length, 32768, rules), 8 * GiB, max_model_len
    )
    assert got == expected


def test_max_concurrency_full_sliding_and_hybrid() -> None:
    full = FullAttentionSpec(16, 32, 128, "float16")
    sliding = SlidingWindowSpec(16, 32, 128, "float16", 1024)
    reserve = 1024  # max_num_batched_tokens 1024, one batch in flight
    uniform = layout([full] * 32)
    assert uniform.blocks_per_request(16384, reserve) == 1024
    assert 1536 / uniform.blocks_per_request(16384, reserve) == 1.5
    window = layout([sliding] * 32)
    # cdiv(min(1023 + 1024, 16384), 16) + 1 = 129 blocks a request.
    assert window.blocks_per_request(16384, reserve) == 129
    assert 129 * 3 / window.blocks_per_request(16384, reserve) == 3.0
    hybrid = layout([full] * 32 + [sliding] * 32)
    assert [len(g.layer_names) for g in hybrid.groups] == [32, 32]
    assert (1024 + 129) * 3 / hybrid.blocks_per_request(16384, reserve) == 3.0


# test_get_kv_cache_config: block 16, 2 KV heads × 64, float32 → a 16 KiB page per layer.
FULL = FullAttentionSpec(16, 2, 64, "float32")
SLIDING = SlidingWindowSpec(16, 2, 64, "float32", 1)
PAGE = 16 * 2 * 2 * 64 * 4


def test_one_type_is_one_group() -> None:
    for spec in (FULL, SLIDING):
        two = layout([spec, spec])
        assert (len(two.groups), num_blocks(two, PAGE * 2 * 32)) == (1, 32)


def test_full_and_sliding_one_layer_each() -> None:
    mixed = layout([FULL, SLIDING])
    assert [g.layer_names for g in mixed.groups] == [["layer.0"], ["layer.1"]]
    # Group size 1: one tensor of 64 pages serves both layers.
    assert num_blocks(mixed, PAGE * 2 * 32) == 64


def test_two_full_four_sliding_strided() -> None:
    got = layout([FULL, FULL, SLIDING, SLIDING, SLIDING, SLIDING])
    assert groups([FULL, FULL, SLIDING, SLIDING, SLIDING, SLIDING]) == [[0, 1], [2, 4], [3, 5]]
    assert (got.group_size, num_blocks(got, PAGE * 2 * 32)) == (2, 32)


def test_three_full_seven_sliding_padded() -> None:
    got = layout([FULL] * 3 + [SLIDING] * 7)
    # 7 ≥ 1.5 × 3: group size 3; sliding split into cdiv(7, 3) = 3 groups (3, 2, 2 layers).
    assert [len(g.layer_names) for g in got.groups] == [3, 3, 2, 2]
    assert num_blocks(got, PAGE * 3 * 32) == 32


def test_different_head_sizes_of_one_type_share_one_group() -> None:
    big = FullAttentionSpec(16, 2, 128, "float32")
    got = layout([big, FULL])
    assert (got.kind, len(got.groups)) == ("uniform-type", 1)
    memory = PAGE * 2 * 32
    assert num_blocks(got, memory) == memory // (2 * PAGE + PAGE)


def test_hybrid_manager_disabled_is_one_full_group() -> None:
    config = ModelConfig(
        "x", "mmcli", [Layer("layer.0", FULL), Layer("layer.1", SLIDING)], max_model_len=64
    )
    options = PlanOptions(
        memory_bytes=PAGE * 2 * 32, disable_hybrid_kv_cache_manager=True, vllm_version="0.20"
    )
    plan = plan_kv_cache(config, options)
    side = plan.with_sharing
    assert side is not None
    assert ([g.layer_names for g in plan.groups], side.num_blocks) == (
        [["layer.0", "layer.1"]],
        32,
    )
