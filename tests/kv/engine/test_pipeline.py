"""Pipeline parallelism (``-pp``), against numbers the engine's own planner gives.

Every expected figure below was produced by running the planner code of the vLLM releases
named (``get_pp_indices`` for the split, then ``get_kv_cache_configs`` with per-stage spec
dicts and per-stage memory) on the same specs; the hand arithmetic is in each comment. Setup
as those runs: bf16, block 16, max_model_len 8192, max_num_batched_tokens 2048, one batch in
flight.
"""

from __future__ import annotations

from typing import Any

import hf_configs
import pytest

from mmcli.errors import InputError
from mmcli.kv.engine.pipeline import stage_sizes
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import KVPlan, plan_kv_cache
from mmcli.kv.result import SidePlan
from mmcli.kv.spec import FullAttentionSpec, Layer

GiB = 2**30


def hf(**text: Any) -> ModelConfig:
    return parse_hf_config(text, default_name="m", where="config.json")


LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "hidden_size": 4096,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 8192,
}


def gemma(n: int) -> dict[str, Any]:
    """The shared Gemma-3-like config (page 65,536 B), planned to 8,192 tokens."""
    return hf_configs.gemma(n, max_position_embeddings=8192)


QWEN3_NEXT = {
    "model_type": "qwen3_next",
    "num_hidden_layers": 48,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "hidden_size": 2048,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "full_attention_interval": 4,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}


def plan(config: ModelConfig, pp: int, memory: int, release: str = "0.34", **kw: Any) -> KVPlan:
    # Block 16 as those runs had it (0.34's own default is 64).
    options = PlanOptions(
        block_size=kw.pop("block_size", 16),
        memory_bytes=memory,
        max_model_len=8192,
        max_num_batched_tokens=2048,
        async_scheduling=False,
        pipeline_parallel_size=pp,
        vllm_version=release,
        **kw,
    )
    return plan_kv_cache(config, options)


def engine(p: KVPlan) -> SidePlan:
    side = p.with_sharing if p.engine_side == "with_sharing" else p.without_sharing
    assert side is not None
    return side


# -- the split ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layers", "pp", "sizes"),
    [
        (32, 3, [11, 11, 10]),  # the remainder goes to the stages before the last
        (30, 4, [7, 8, 8, 7]),
        (34, 2, [17, 17]),
        (48, 4, [12, 12, 12, 12]),
        (7, 4, [2, 2, 2, 1]),
    ],
)
def test_stage_sizes_as_get_pp_indices(layers: int, pp: int, sizes: list[int]) -> None:
    assert stage_sizes(layers, pp, None) == sizes


def test_partition_must_cover_every_layer() -> None:
    assert stage_sizes(32, 3, [8, 12, 12]) == [8, 12, 12]
    with pytest.raises(InputError, match="add up to the model's 32 layers"):
        stage_sizes(32, 3, [8, 12, 11])


# -- (a) a uniform model: the fullest stage sets the block count ---------------------------


def test_llama_on_three_stages() -> None:
    # [11, 11, 10] layers × 65,536 B: 720,896 / 720,896 / 655,360 B per block; 10 GiB gives
    # 14,894 / 14,894 / 16,384 blocks; the engine takes 14,894 → 29.09× of 512 blocks.
    side = engine(plan(hf(**LLAMA), 3, 10 * GiB))
    assert [s.bytes_per_block for s in side.stages] == [720_896, 720_896, 655_360]
    assert [s.num_blocks for s in side.stages] == [14_894, 14_894, 16_384]
    assert [(s.first_layer, s.last_layer) for s in side.stages] == [(0, 10), (11, 21), (22, 31)]
    assert (side.num_blocks, side.max_tokens) == (14_894, 238_304)
    assert f"{side.max_concurrency:.2f}" == "29.09"
    assert side.bytes_per_block == 720_896
    one = engine(plan(hf(**LLAMA), 1, 10 * GiB))
    assert (one.num_blocks, one.max_tokens) == (5_120, 81_920)


def test_llama_with_a_layer_partition() -> None:
    # VLLM_PP_LAYER_PARTITION=8,12,12: 524,288 / 786,432 / 786,432 B → 13,653 blocks, 26.67×.
    side = engine(plan(hf(**LLAMA), 3, 10 * GiB, pp_layer_partition=(8, 12, 12)))
    assert [s.num_blocks for s in side.stages] == [20_480, 13_653, 13_653]
    assert (side.num_blocks, side.max_tokens) == (13_653, 218_448)


@pytest.mark.parametrize(
    ("release", "need", "fits"),
    [
        # Each stage checks its own 11 layers: 11 × 512 × 65,536 B; 74 blocks fit → 1184.
        ("0.11", 369_098_752, 1184),
        ("0.19", 369_098_752, 1184),
        ("0.26", 369_098_752, 1184),
        # 0.14–0.16: the whole model (32 layers, 1 GiB) against one stage's memory → 400.
        ("0.15", 1_073_741_824, 400),
        # 0.29+: less the stage's own null block: (53,687,091 − 720,896) // 720,896 = 73.
        ("0.34", 369_098_752, 1168),
    ],
)
def test_llama_start_up_check_by_release(release: str, need: int, fits: int) -> None:
    p = plan(hf(**LLAMA), 3, 53_687_091, release)  # 0.05 GiB per stage
    side = engine(p)
    assert (side.engine_request_bytes, side.largest_fitting_max_model_len) == (need, fits)
    assert "memory-too-small" in [f.code for f in p.findings]


# -- (b), (d) sliding + full: groups over the whole model, projected per stage -------------


def test_gemma_34_layers_on_two_stages() -> None:
    # 7 groups of 5 (6 sliding, 1 full); each stage holds at most 3 layers of one group:
    # 196,608 B per block → 109,226 blocks; 6 × 193 + 512 = 1,670 blocks a request.
    side = engine(plan(hf(**gemma(34)), 2, 20 * GiB))
    assert [s.bytes_per_block for s in side.stages] == [196_608, 196_608]
    assert (side.num_blocks, side.blocks_per_request, side.max_tokens) == (109_226, 1_670, 535_796)
    assert f"{side.max_concurrency:.2f}" == "65.40"
    assert side.engine_request_bytes == 328_335_360
    # Before 0.20.1 the token count was blocks // groups × block size.
    assert engine(plan(hf(**gemma(34)), 2, 20 * GiB, "0.19")).max_tokens == 249_648


def test_gemma_30_layers_on_four_uneven_stages() -> None:
    # [7, 8, 8, 7]: every stage holds 2 layers of some group → 131,072 B, 163,840 blocks.
    side = engine(plan(hf(**gemma(30)), 4, 20 * GiB))
    assert [s.bytes_per_block for s in side.stages] == [131_072] * 4
    assert (side.num_blocks, side.blocks_per_request, side.max_tokens) == (163_840, 1_477, 908_718)
    assert side.engine_request_bytes == 193_593_344


# -- (c) a hybrid with recurrent states ----------------------------------------------------


@pytest.mark.parametrize(
    ("pp", "caching", "blocks", "concurrency", "tokens", "need"),
    [
        (2, False, 3_212, "169.05", 1_384_879, 127_008_768),
        (4, False, 6_425, "338.16", 2_770_189, 63_504_384),
        (2, True, 3_212, "146.00", 1_196_032, 147_062_784),  # two states a request
    ],
)
def test_qwen3_next_on_stages(
    pp: int, caching: bool, blocks: int, concurrency: str, tokens: int, need: int
) -> None:
    # Block 544, page 1,114,112 B; 4 groups of 12 (3 state, 1 full); 48 / pp layers a stage.
    side = engine(
        plan(
            hf(**QWEN3_NEXT),
            pp,
            20 * GiB,
            enable_prefix_caching=caching,
            mamba_ssm_cache_dtype="bfloat16",
        )
    )
    assert (side.num_blocks, side.max_tokens, side.engine_request_bytes) == (blocks, tokens, need)
    assert f"{side.max_concurrency:.2f}" == concurrency


# -- (f) unequal pages of one type: a release difference -------------------------------------


def uniform_type() -> ModelConfig:
    """16 full layers: even ones 8 KV heads × 128, odd ones 4 (pages 65,536 / 32,768 B)."""
    layers = [
        Layer(
            f"model.layers.{i}.self_attn.attn",
            FullAttentionSpec(16, 8 if i % 2 == 0 else 4, 128, "bfloat16"),
        )
        for i in range(16)
    ]
    return ModelConfig(name="mixed", source="mmcli", layers=layers, max_model_len=8192)


def test_uniform_type_stages_divide_by_their_own_pages_from_0_17() -> None:
    # A stage's pages: 4 × 65,536 + 4 × 32,768 = 393,216 B... of 8 layers each.
    new = engine(plan(uniform_type(), 2, 10 * GiB, "0.19"))
    assert new.num_blocks == 10 * GiB // 393_216
    # 0.11–0.16 divide by the whole model's pages (786,432 B): the blocks of one GPU.
    old = engine(plan(uniform_type(), 2, 10 * GiB, "0.15"))
    assert (
        old.num_blocks
        == 10 * GiB // 786_432
        == engine(plan(uniform_type(), 1, 10 * GiB)).num_blocks
    )


# -- what is refused ------------------------------------------------------------------------


def test_before_0_11_stages_group_their_own_layers_and_are_refused() -> None:
    with pytest.raises(InputError, match="before 0.11 each stage groups its own layers"):
        plan(hf(**LLAMA), 2, 10 * GiB, "0.10")


def test_sharing_across_stages_is_refused() -> None:
    config = hf(
        model_type="gemma3n_text",
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=256,
        hidden_size=2048,
        sliding_window=512,
        num_kv_shared_layers=4,
        max_position_embeddings=8192,
        layer_types=["sliding_attention", "full_attention"] * 4,
    )
    # Layers 4–7 share layers 2–3's caches: on two stages, 4–7 sit on stage 1, 2–3 on 0.
    with pytest.raises(
        InputError, match=r"\(pipeline stage 1\) shares the KV cache of .* \(stage 0\)"
    ):
        plan(config, 2, GiB)
    # A partition that keeps them together is planned.
    assert engine(plan(config, 2, GiB, pp_layer_partition=(1, 7))).num_blocks


def test_a_stage_without_a_cache_is_refused() -> None:
    config = hf(**{**gemma(6), "layer_types": ["sliding_attention"] * 3 + ["mlp"] * 3})
    with pytest.raises(InputError, match="stage 1 \\(decoder layers 3–5\\) holds no layer"):
        plan(config, 2, GiB)


def test_more_stages_than_layers_is_refused() -> None:
    with pytest.raises(InputError, match="only 32 decoder layers"):
        plan(hf(**LLAMA), 33, GiB)


# -- layers the config does not list: on the last stage --------------------------------------


def test_drafter_layers_live_on_the_last_stage() -> None:
    side = engine(plan(hf(**LLAMA), 2, 10 * GiB, num_draft_layers=1))
    assert [s.owners for s in side.stages] == [16, 17]
    assert side.stages[1].bytes_per_block == 17 * 65_536


def test_one_stage_plans_as_before() -> None:
    p = plan(hf(**LLAMA), 1, 10 * GiB)
    assert engine(p).stages == ()
    assert p.to_json(aliasing_verified=True, exit_code=0)["pipeline"] is None
    doc = plan(hf(**LLAMA), 2, 10 * GiB).to_json(aliasing_verified=True, exit_code=0)
    stages = doc["pipeline"]["stages"]["with_sharing"]
    assert [s["num_blocks"] for s in stages] == [10 * GiB // (16 * 65_536)] * 2


# -- the release table's single-GPU rows that moved ------------------------------------------


def test_group_threshold_from_0_12_and_first_group_check_from_0_14() -> None:
    # 6 sliding + 5 full: largest bucket 6 < 1.25 × 5, so from 0.12 the group size is 6.
    types = ["sliding_attention"] * 6 + ["full_attention"] * 5
    cfg = hf(**{**gemma(11), "layer_types": types})
    assert engine(plan(cfg, 1, GiB, "0.11")).group_size == 5
    assert engine(plan(cfg, 1, GiB, "0.12")).group_size == 6
    # The per-layer check (0.13) against the first group's (0.14).
    per_layer = engine(plan(cfg, 1, GiB, "0.13")).engine_request_bytes
    first_group = engine(plan(cfg, 1, GiB, "0.14")).engine_request_bytes
    assert per_layer == (6 * 193 + 5 * 512) * 65_536
    assert first_group == 6 * 65_536 * 193
