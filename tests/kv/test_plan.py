"""The planner's arithmetic against figures computed by hand from the engine's rules: page
size, bytes per token, groups, blocks per request and capacity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.aliasing import check_aliasing
from mmcli.kv.engine.layout import LayerSpecs, group_layers
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import KVPlan, plan_kv_cache
from mmcli.kv.releases import rules_for
from mmcli.kv.spec import FullAttentionSpec, Layer, SlidingWindowSpec
from tests.kv_plan import cli_plan_json

ROOT = Path(__file__).resolve().parents[2]

MiB = 2**20
GiB = 2**30


def name(i: int) -> str:
    return f"model.layers.{i}.self_attn.attn"


def hf(**text: Any) -> ModelConfig:
    return parse_hf_config(text, default_name="test", where="config.json")


def gemma3n_e2b() -> dict[str, Any]:
    types = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(30)]
    return {
        "model_type": "gemma3n",
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "gemma3n_text",
            "hidden_size": 2048,
            "num_hidden_layers": 30,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "sliding_window": 512,
            "max_position_embeddings": 32768,
            "num_kv_shared_layers": 10,
            "layer_types": types,
        },
    }


def cla(**extra: Any) -> dict[str, Any]:
    return {
        "num_hidden_layers": 4,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16",
        **extra,
    }


def codes(plan: KVPlan) -> list[str]:
    return [f.code for f in plan.findings]


# --- uniform model ------------------------------------------------------------------------


def uniform(shared: bool) -> ModelConfig:
    spec = FullAttentionSpec(16, 8, 64, "float16")
    layers = [Layer(name(0), spec), Layer(name(1), spec, name(0) if shared else None)]
    return ModelConfig("toy", "mmcli", layers, max_model_len=1024)


def test_uniform_two_layers_without_sharing() -> None:
    plan = plan_kv_cache(uniform(False), PlanOptions(memory_bytes=4 * MiB, vllm_version="0.15"))
    assert plan.page_size_bytes == 32768
    side = plan.with_sharing
    assert side is not None and side == plan.without_sharing
    assert side.bytes_per_token == 4096  # 2 layers × 2 × 8 × 64 × 2 bytes
    assert side.per_sequence_bytes == 1024 * 4096
    assert side.num_blocks == 4 * MiB // 32768 // 2 == 64
    assert side.max_tokens == 64 * 16
    assert side.blocks_per_request == 64  # cdiv(1024, 16)
    assert side.max_concurrency == 1.0
    assert plan.savings_fraction == 0.0
    assert [g.layer_names for g in plan.groups] == [[name(0), name(1)]]
    assert plan.findings == []


def test_uniform_two_layers_with_sharing() -> None:
    plan = plan_kv_cache(uniform(True), PlanOptions(block_size=16, memory_bytes=4 * MiB))
    w, wo = plan.with_sharing, plan.without_sharing
    assert w is not None and wo is not None
    assert (w.bytes_per_token, wo.bytes_per_token) == (2048, 4096)
    assert (w.per_sequence_bytes, wo.per_sequence_bytes) == (2 * MiB, 4 * MiB)
    assert (w.num_blocks, wo.num_blocks) == (128, 64)
    assert (w.max_tokens, wo.max_tokens) == (2048, 1024)
    assert (w.max_concurrency, wo.max_concurrency) == (2.0, 1.0)
    assert plan.savings_fraction == 0.5
    # The sharing layer joins its target's group after the owners.
    assert [g.layer_names for g in plan.groups] == [[name(0), name(1)]]
    assert plan.group_of == [0, 0]
    report = check_aliasing(plan, "meta")
    assert (report.verified, report.checked, report.tensors) == (True, 1, 1)


def test_llama_70b_bytes_per_token() -> None:
    config = hf(
        num_hidden_layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_key_value_heads=8,
        max_position_embeddings=131072,
        torch_dtype="bfloat16",
    )
    plan = plan_kv_cache(config, PlanOptions())
    assert plan.with_sharing is not None
    assert plan.with_sharing.bytes_per_token == 327_680
    assert plan.with_sharing.num_blocks is None


# --- hybrid full + sliding ----------------------------------------------------------------


def hybrid(shared: bool) -> ModelConfig:
    full = FullAttentionSpec(16, 4, 128, "bfloat16")
    slide = SlidingWindowSpec(16, 4, 128, "bfloat16", 1024)
    layers = [Layer(name(i), full if i % 4 == 3 else slide) for i in range(8)]
    if shared:
        layers[6] = Layer(name(6), slide, name(5))
        layers[7] = Layer(name(7), full, name(3))
    return ModelConfig("hybrid", "mmcli", layers, max_model_len=8192)


# The arithmetic of vLLM 0.15 (one batch of reserve, blocks // groups × block tokens).
OPTS = PlanOptions(memory_bytes=128 * MiB, max_num_batched_tokens=2048, vllm_version="0.15")


def test_hybrid_more_sliding_than_full_without_sharing() -> None:
    plan = plan_kv_cache(hybrid(False), OPTS)
    side = plan.without_sharing
    assert side is not None
    # Buckets: 6 sliding, 2 full → group size 2 (6 ≥ 1.25 × 2); sliding split into 3
    # strided groups.
    assert [g.layer_names for g in plan.groups] == [
        [name(0), name(4)],
        [name(1), name(5)],
        [name(2), name(6)],
        [name(3), name(7)],
    ]
    assert (side.num_groups, side.group_size) == (4, 2)
    assert side.bytes_per_token == 8 * 2048
    assert side.per_sequence_bytes == 2 * 8192 * 2048 + 6 * 1024 * 2048 == 46_137_344
    assert side.num_blocks == 128 * MiB // 32768 // 2 == 2048
    assert side.max_tokens == 2048 // 4 * 16 == 8192
    # sliding: cdiv(min(1023 + 2048, 8192), 16) + 1 = 193 per group, full: 512
    assert side.blocks_per_request == 3 * 193 + 512 == 1091
    assert side.max_concurrency == pytest.approx(2048 / 1091)
    assert "memory-too-small" not in codes(plan)


def test_hybrid_with_sharing() -> None:
    plan = plan_kv_cache(hybrid(True), OPTS)
    w, wo = plan.with_sharing, plan.without_sharing
    assert w is not None and wo is not None
    # Owners: 5 sliding, 1 full → group size 1 → 6 groups.
    assert (w.num_groups, w.group_size) == (6, 1)
    assert [g.layer_names for g in plan.groups] == [
        [name(0)],
        [name(1)],
        [name(2)],
        [name(4)],
        [name(5), name(6)],
        [name(3), name(7)],
    ]
    assert plan.group_of == [0, 1, 2, 5, 3, 4, 4, 5]
    assert w.bytes_per_token == 6 * 2048
    assert w.per_sequence_bytes == 8192 * 2048 + 5 * 1024 * 2048 == 27_262_976
    assert w.num_blocks == 4096
    assert w.max_tokens == 4096 // 6 * 16 == 10912
    assert w.blocks_per_request == 5 * 193 + 512
    assert w.max_concurrency == pytest.approx(4096 / 1477)
    assert plan.savings_fraction == pytest.approx(9 / 22)
    assert wo.per_sequence_bytes == 46_137_344
    assert check_aliasing(plan, "meta").verified


def engine_groups(specs: list[Any], release: str) -> list[list[str]]:
    layout = group_layers(
        LayerSpecs.of([name(i) for i in range(len(specs))], list(specs)), rules_for(release)
    )
    return [g.layer_names for g in layout.groups]


def test_engine_groups_uses_largest_bucket_when_close() -> None:
    full = FullAttentionSpec(16, 4, 128, "bfloat16")
    slide = SlidingWindowSpec(16, 4, 128, "bfloat16", 1024)
    # 5 sliding, 6 full: 6 < 1.25 × 5 → group size 6: one group per bucket.
    groups = engine_groups([slide] * 5 + [full] * 6, "0.15")
    assert [len(g) for g in groups] == [5, 6]
    # 4 sliding, 7 full: 7 ≥ 1.25 × 4 → size 4, full split into 2 strided groups.
    groups = engine_groups([slide] * 4 + [full] * 7, "0.15")
    assert groups[1:] == [
        [name(4), name(6), name(8), name(10)],
        [name(5), name(7), name(9)],
    ]
    # From 0.18 the threshold is 1.5: 7 < 1.5 × 5 → one group per bucket.
    assert [len(g) for g in engine_groups([slide] * 5 + [full] * 7, "0.18")] == [5, 7]
    assert [len(g) for g in engine_groups([slide] * 5 + [full] * 7, "0.17")] == [5, 4, 3]
    # 0.10 and 0.11 had no threshold: always the smallest bucket.
    assert [len(g) for g in engine_groups([slide] * 5 + [full] * 6, "0.11")] == [5, 3, 3]


def test_memory_too_small_is_the_engines_refusal() -> None:
    plan = plan_kv_cache(hybrid(False), PlanOptions(block_size=16, memory_bytes=64 * MiB))
    # Newest rules: every group counts, the window reserve is 2 in-flight batches of 8192, one
    # null block is held back. Block = 2 layers × 32 KiB = 64 KiB; at 8192 tokens a request
    # takes 3 sliding groups × (cdiv(min(1023 + 16384, 8192), 16) + 1 = 513) + 512 = 2051 blocks.
    need = 65536 * 2051
    have = 64 * MiB - 65536
    assert codes(plan) == ["memory-too-small"]
    assert plan.findings[0].severity == "error"
    # 1023 blocks fit: 4 × cdiv(L, 16) + 3 ≤ 1023 → cdiv(L, 16) ≤ 255 → L ≤ 4080.
    assert plan.findings[0].message == (
        f"to serve one request of max_model_len 8,192, {need / GiB:.2f} GiB of KV cache "
        f"({need:,} B) is needed, more than the {have / GiB:.2f} GiB ({have:,} B) available: "
        "the engine would refuse to start; the largest max_model_len that fits is 4,080"
    )
    # vLLM 0.18 counts group 0 only (a sliding group, 513 blocks of 64 KiB): it starts.
    old = plan_kv_cache(hybrid(False), PlanOptions(memory_bytes=64 * MiB, vllm_version="0.18"))
    assert codes(old) == []


# --- Gemma 3n -----------------------------------------------------------------------------


def test_gemma3n_e2b() -> None:
    config = parse_hf_config(gemma3n_e2b(), default_name="x", where="config.json")
    targets = [layer.kv_sharing_target for layer in config.layers]
    assert targets[:20] == [None] * 20
    assert targets[20:] == [name(19) if (i + 1) % 5 == 0 else name(18) for i in range(20, 30)]
    plan = plan_kv_cache(config, PlanOptions(memory_bytes=20 * GiB, vllm_version="0.15"))
    assert plan.findings == []  # vLLM's hard-coded 18 / 19 agree with the general rule here
    w, wo = plan.with_sharing, plan.without_sharing
    assert w is not None and wo is not None
    assert plan.page_size_bytes == 2 * 16 * 2 * 256 * 2 == 32768
    assert (w.owners, wo.owners) == (20, 30)
    assert (w.bytes_per_token, wo.bytes_per_token) == (20 * 2048, 30 * 2048)
    assert w.per_sequence_bytes == 4 * 32768 * 2048 + 16 * 512 * 2048 == 285_212_672
    assert wo.per_sequence_bytes == 6 * 32768 * 2048 + 24 * 512 * 2048 == 427_819_008
    assert plan.savings_fraction == pytest.approx(1 / 3)
    # with: 16 sliding + 4 full → 4 sliding groups + 1 full group of 4
    assert (w.num_groups, w.group_size, wo.num_groups, wo.group_size) == (5, 4, 5, 6)
    assert w.num_blocks == 20 * GiB // 32768 // 4 == 163_840
    assert wo.num_blocks == 20 * GiB // 32768 // 6 == 109_226
    assert (w.max_tokens, wo.max_tokens) == (163_840 // 5 * 16, 109_226 // 5 * 16)
    # sliding: cdiv(min(511 + 8192, 32768), 16) + 1 = 545; full: 2048
    assert w.blocks_per_request == 4 * 545 + 2048 == 4228
    assert w.max_concurrency == pytest.approx(163_840 / 4228)
    assert [len(g.layer_names) for g in plan.groups] == [4, 4, 4, 12, 6]
    assert check_aliasing(plan, "meta").verified


def test_gemma3n_rule_disagreement_warns_with_both_targets() -> None:
    doc = gemma3n_e2b()
    text = doc["text_config"]
    text.update(
        num_hidden_layers=10,
        num_kv_shared_layers=4,
        layer_types=text["layer_types"][:10],
    )
    config = parse_hf_config(doc, default_name="x", where="config.json")
    # Non-shared 0–5: last sliding 5, last full 4; vLLM hard-codes 4 for sliding, 5 for full
    # (gemma3n.py: first shared − 2, − 1), and the plan follows the engine.
    assert [layer.kv_sharing_target for layer in config.layers[6:]] == [
        name(4),
        name(4),
        name(4),
        name(5),
    ]
    plan = plan_kv_cache(config, PlanOptions())
    # The engine shares across kinds here: a warning per layer, then the two disagreements.
    assert codes(plan) == 4 * ["attention-kind-mismatch"] + 2 * ["rule-disagreement"]
    found = [f for f in plan.findings if f.code == "rule-disagreement"]
    assert found[0].severity == "warning"
    assert found[0].message == (
        "shared sliding_attention layers 6–8: the general rule (last non-shared "
        "sliding_attention layer) gives layer 5, but vLLM's Gemma 3n model code hard-codes "
        "layer 4 (full_attention), which this plan follows"
    )
    assert found[1].message.startswith("shared full_attention layer 9: ")
    assert "gives layer 4, but vLLM's Gemma 3n model code hard-codes layer 5" in (found[1].message)
    assert not plan.has_errors


def test_gemma3n_fp8_and_tensor_parallel() -> None:
    config = parse_hf_config(gemma3n_e2b(), default_name="x", where="config.json")
    plan = plan_kv_cache(config, PlanOptions(block_size=16, kv_dtype="fp8", tensor_parallel_size=2))
    assert plan.page_size_bytes == 2 * 16 * 1 * 256 * 1
    assert plan.with_sharing is not None
    assert plan.with_sharing.bytes_per_token == 20 * 2 * 1 * 256 * 1
    assert plan.layers[0].spec is not None and plan.layers[0].spec.num_kv_heads == 1
    # tp 8 > 2 KV heads: each rank holds one (replicated) head.
    plan = plan_kv_cache(config, PlanOptions(tensor_parallel_size=8))
    assert plan.layers[0].spec is not None and plan.layers[0].spec.num_kv_heads == 1


# --- CLA ----------------------------------------------------------------------------------


def test_cla_factor_two() -> None:
    config = hf(**cla(use_cla=True, cla_share_factor=2))
    assert [layer.kv_sharing_target for layer in config.layers] == [None, name(0), None, name(2)]
    plan = plan_kv_cache(config, PlanOptions(block_size=16, memory_bytes=GiB))
    w, wo = plan.with_sharing, plan.without_sharing
    assert w is not None and wo is not None
    assert plan.page_size_bytes == 2 * 16 * 8 * 128 * 2 == 65536  # head 4096 / 32 = 128
    assert (w.bytes_per_token, wo.bytes_per_token) == (8192, 16384)
    assert (w.per_sequence_bytes, wo.per_sequence_bytes) == (4096 * 8192, 4096 * 16384)
    assert (w.num_blocks, wo.num_blocks) == (8192, 4096)
    assert (w.max_tokens, wo.max_tokens) == (131072, 65536)
    assert (w.max_concurrency, wo.max_concurrency) == (32.0, 16.0)
    assert plan.savings_fraction == 0.5
    # vLLM does not share Hunyuan's CLA layers: the map is a what-if, said as a warning.
    assert not config.engine_shares
    assert codes(plan) == ["cla-not-shared-by-engine"]
    assert plan.findings[0].severity == "warning"


def test_cla_disabled_warns_and_shares_nothing() -> None:
    config = hf(**cla(use_cla=False, cla_share_factor=2))
    assert all(layer.kv_sharing_target is None for layer in config.layers)
    plan = plan_kv_cache(config, PlanOptions())
    assert codes(plan) == ["sharing-disabled"]
    assert plan.findings[0].message == (
        "cla_share_factor is 2 but use_cla is false, so no layer shares its cache"
    )
    assert plan.savings_fraction == 0.0


def test_tensor_parallel_split_and_refusals() -> None:
    config = hf(**cla(use_cla=True, cla_share_factor=2))
    plan = plan_kv_cache(config, PlanOptions(tensor_parallel_size=2))
    assert plan.with_sharing is not None and plan.with_sharing.bytes_per_token == 4096
    with pytest.raises(InputError, match="8 KV heads cannot be split evenly across"):
        plan_kv_cache(
            hf(**cla(num_attention_heads=24, head_dim=128)), PlanOptions(tensor_parallel_size=3)
        )
    with pytest.raises(InputError, match="32 attention heads cannot be split"):
        plan_kv_cache(config, PlanOptions(tensor_parallel_size=3))


# --- no-KV layers, maps, sizes ------------------------------------------------------------


def test_linear_attention_layers_hold_a_state_not_kv() -> None:
    types = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 2
    text: dict[str, Any] = {
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "layer_types": types,
        "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16",
    }
    # Without the linear_* dimensions the state size is unknown: refused, not planned as 0.
    with pytest.raises(InputError, match="linear_num_key_heads is not set"):
        hf(**text)
    config = hf(**text, model_type="qwen3_next")  # transformers' Qwen3-Next defaults
    assert [layer.attention for layer in config.layers] == (["mamba"] * 3 + ["full"]) * 2
    assert config.layers[0].name == "model.layers.0.linear_attn"
    full = [layer.spec for layer in config.layers if layer.attention == "full"]
    assert all(spec is not None and spec.bytes_per_token == 2 * 2 * 256 * 2 for spec in full)


def test_one_attention_type_with_different_specs_is_one_group() -> None:
    # vLLM's UniformTypeKVCacheSpecs: full layers of different head counts share one group;
    # a block spans one page of each (32 KiB + 16 KiB).
    layers = [
        Layer(name(0), FullAttentionSpec(16, 8, 64, "float16")),
        Layer(name(1), FullAttentionSpec(16, 4, 64, "float16")),
    ]
    config = ModelConfig("x", "mmcli", layers, max_model_len=1024)
    plan = plan_kv_cache(config, PlanOptions(block_size=16, memory_bytes=48 * 1024 * 10))
    assert [g.layer_names for g in plan.groups] == [[name(0), name(1)]]
    side = plan.with_sharing
    assert side is not None
    assert (side.bytes_per_block, side.num_blocks, side.blocks_per_request) == (49152, 10, 64)


def test_unequal_pages_are_unified_by_block_size() -> None:
    # A sliding layer with half the page of the full layers gets blocks of 32 tokens.
    full = FullAttentionSpec(16, 2, 512, "bfloat16")
    slide = SlidingWindowSpec(16, 2, 256, "bfloat16", 512)
    layers = [Layer(name(i), slide if i % 3 else full) for i in range(6)]
    options = PlanOptions(block_size=16)
    plan = plan_kv_cache(ModelConfig("x", "mmcli", layers, max_model_len=4096), options)
    assert plan.page_size_bytes == 16 * 2 * 2 * 512 * 2
    assert {g.spec.block_size for g in plan.groups} == {16, 32}


def test_float32_checkpoints_plan_a_bfloat16_cache() -> None:
    config = hf(**{**cla(), "torch_dtype": "float32"})
    plan = plan_kv_cache(config, PlanOptions())
    assert plan.layers[0].spec is not None and plan.layers[0].spec.dtype == "bfloat16"
    assert [(f.code, f.severity) for f in plan.findings] == [("dtype", "info")]
    plan = plan_kv_cache(config, PlanOptions(block_size=16, kv_dtype="fp32"))
    assert plan.page_size_bytes == 2 * 16 * 8 * 128 * 4


def test_plan_owns_its_json() -> None:
    plan = plan_kv_cache(uniform(True), PlanOptions())
    doc = plan.to_json(aliasing_verified=None, exit_code=1)
    assert (doc["aliasing_verified"], doc["exit_code"]) == (None, 1)
    assert [layer["group"] for layer in doc["layers"]] == [0, 0]
    assert doc["groups"] == [{"index": 0, "attention": "full", "layer_names": [name(0), name(1)]}]
    assert doc["memory"]["num_blocks"] is None  # no --memory
    assert doc["memory"]["bytes_per_token"]["with_sharing"] == 2 * 8 * 64 * 2


@pytest.mark.parametrize("sample", sorted((ROOT / "samples" / "kv").glob("*.json")), ids=str)
def test_a_plans_json_is_plain_json_and_the_commands(sample: Path) -> None:
    # kv-share plan's JSON, less what the command adds to the plan's own (where the model
    # came from, the aliasing verdict).
    from mmcli.kv.inputs.layer_config import load_config

    plan = plan_kv_cache(load_config(sample), PlanOptions(memory_bytes=20 * 2**30))
    doc = json.loads(json.dumps(plan.to_json()))
    printed = cli_plan_json(str(sample), "--memory", "20GiB", code=doc["exit_code"])
    for key in ("model_source", "aliasing_verified"):
        printed.pop(key, None)
        doc.pop(key, None)
    assert doc == printed
