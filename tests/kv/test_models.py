"""Real model configs planned with the newest mirrored rules, against numbers derived by hand.

Configs: ``tests/kv/configs`` (provenance in its PROVENANCE.md). Every plan: 20 GiB of KV memory
per GPU, bf16, tp 1, block 16 asked for, ``max_num_batched_tokens`` 2048, async scheduling
(two batches in flight), prefix caching on (vLLM's default from 0.26, so hybrids keep two
states per request: "align" mode). Each derivation below follows vLLM 0.34's source:
``v1/core/kv_cache_utils.py`` (grouping, num_blocks, concurrency), the hybrid block-size
alignment (``platforms/interface.py``), ``MambaStateShapeCalculator`` for state shapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app

CONFIGS = Path(__file__).resolve().parent / "configs"
GiB = 2**30
MEMORY = 20 * GiB


def plan(config: str, max_model_len: int, *extra: str) -> dict[str, Any]:
    args = [
        "kv-share",
        "plan",
        str(CONFIGS / config),
        "--memory",
        "20GiB",
        "--max-model-len",
        str(max_model_len),
        "--max-num-batched-tokens",
        "2048",
        "--block-size",  # 0.34's default is 64; the derivations below take 16
        "16",
        "--format",
        "json",
        *extra,
    ]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stdout + result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def figures(doc: dict[str, Any]) -> dict[str, Any]:
    side = doc["engine_side"]
    m = doc["memory"]
    return {
        "block": m["block_size"],
        "bytes_per_token": m["bytes_per_token"][side],
        "bytes_per_block": m["bytes_per_block"][side],
        "num_blocks": m["num_blocks"][side],
        "blocks_per_request": m["blocks_per_request"][side],
        "tokens": m["max_tokens"][side],
        "concurrency": round(m["max_concurrency"][side], 2),
        "groups": [len(g["layer_names"]) for g in doc["groups"]],
    }


def kinds(doc: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for layer in doc["layers"]:
        out[layer["attention"]] = out.get(layer["attention"], 0) + 1
    return out


def test_qwen3_next_80b() -> None:
    doc = plan("Qwen--Qwen3-Next-80B-A3B-Thinking.json", 32768)
    # full_attention_interval 4: layers 3, 7, …, 47 attend (2 KV heads × 256); 36 GDN layers.
    assert kinds(doc) == {"full": 12, "mamba": 36}
    # GDN state per layer: conv (2·16·128 + 32·128 = 8192, 4 − 1) bf16 = 49,152 B; recurrent
    # (32, 128, 128) bf16 = 1,048,576 B → 1,097,728 B. One attention token: 2·2·256·2 = 2,048 B.
    # Block = 16 × cdiv(1,097,728, 16 × 2,048) = 16 × 34 = 544; page = 544 × 2,048 = 1,114,112.
    # Buckets 12 full / 36 GDN: 36 ≥ 1.5 × 12 → group size 12: 1 full + 3 GDN groups.
    page = 544 * 2048
    blocks = MEMORY // (12 * page)  # 1,606
    per_request = -(-32768 // 544) + 3 * 2  # 61 + 3 groups × 2 states = 67
    assert figures(doc) == {
        "block": 544,
        "bytes_per_token": 12 * 2048,  # 24,576: only the 12 attention layers grow
        "bytes_per_block": 12 * page,
        "num_blocks": blocks,
        "blocks_per_request": per_request,
        "tokens": int(blocks / per_request * 32768),  # 785,453
        "concurrency": 23.97,
        "groups": [12, 12, 12, 12],
    }
    assert blocks == 1606


def test_jamba_1_5_mini() -> None:
    doc = plan("ai21labs--AI21-Jamba-1.5-Mini.json", 32768)
    # attn_layer_period 8, offset 4: attention at 4, 12, 20, 28 (8 KV heads × 128); 28 Mamba1.
    assert kinds(doc) == {"full": 4, "mamba": 28}
    # Mamba1: intermediate 2 × 4096 = 8192; conv (8192, 3) + ssm (8192, 16), bf16 = 311,296 B.
    # One attention token 2·8·128·2 = 4,096 B → block 16 × cdiv(311,296, 65,536) = 80.
    page = 80 * 4096  # 327,680
    blocks = MEMORY // (4 * page)  # group size 4: 1 attention + 7 Mamba groups → 16,384
    per_request = -(-32768 // 80) + 7 * 2  # 410 + 14 = 424
    assert figures(doc) == {
        "block": 80,
        "bytes_per_token": 4 * 4096,
        "bytes_per_block": 4 * page,
        "num_blocks": blocks,
        "blocks_per_request": per_request,
        "tokens": int(blocks / per_request * 32768),  # 1,266,204
        "concurrency": 38.64,
        "groups": [4] * 8,
    }


def test_nemotron_h_8b() -> None:
    doc = plan("nvidia--Nemotron-H-8B-Base-8K.json", 8192)
    # hybrid_override_pattern: 4 '*' attention (8 KV heads × 128), 24 'M' Mamba2, 24 '-' MLP.
    assert kinds(doc) == {"full": 4, "mamba": 24, "none": 24}
    # Mamba2: intermediate 128 heads × 64 = 8192; conv (8192 + 2·8·128 = 10,240, 3) bf16
    # = 61,440 B; ssm (128, 64, 128) in float32 (vLLM ≥ 0.20 defaults Nemotron-H's SSM state to
    # float32) = 4,194,304 B → 4,255,744 B. Block 16 × cdiv(4,255,744, 65,536) = 1,040.
    page = 1040 * 4096  # 4,259,840
    blocks = MEMORY // (4 * page)  # 1 attention + 6 Mamba groups of 4 → 1,260
    # Prefix caching ("align" mode): a Mamba-2 state holds 2 blocks + its prefill checkpoint
    # (vLLM 0.32+: MambaMixer2.get_kv_cache_spec sets num_prefill_checkpoint_blocks=1, which
    # MambaSpec.max_memory_usage_bytes adds in align mode) = 3 per group.
    per_request = -(-8192 // 1040) + 6 * 3  # 8 + 18 = 26
    assert figures(doc) == {
        "block": 1040,
        "bytes_per_token": 4 * 4096,
        "bytes_per_block": 4 * page,
        "num_blocks": blocks,
        "blocks_per_request": per_request,
        "tokens": int(blocks / per_request * 8192),  # 396,996
        "concurrency": 48.46,
        "groups": [4] * 7,
    }


def test_nemotron_h_before_0_32_keeps_two_states_per_request() -> None:
    doc = plan("nvidia--Nemotron-H-8B-Base-8K.json", 8192, "--vllm-version", "0.31")
    # 0.29–0.31: align mode holds 2 blocks per Mamba-2 state (no prefill checkpoint yet).
    assert figures(doc)["blocks_per_request"] == 8 + 6 * 2
    off = plan("nvidia--Nemotron-H-8B-Base-8K.json", 8192, "--no-enable-prefix-caching")
    # Without prefix caching the checkpoint is not counted (mode "none": 1 + speculative).
    assert figures(off)["blocks_per_request"] == 8 + 6 * 1


def test_nemotron_h_before_0_20_keeps_a_float16_state() -> None:
    doc = plan("nvidia--Nemotron-H-8B-Base-8K.json", 8192, "--vllm-version", "0.19")
    # ssm (128, 64, 128) float16 = 2,097,152 B + conv 61,440 → block 16 × cdiv(2,158,592,
    # 65,536) = 528; 0.19 leaves prefix caching off for hybrids: one state per request.
    assert figures(doc)["block"] == 528
    assert figures(doc)["blocks_per_request"] == 16 + 6


def test_deepseek_v3() -> None:
    doc = plan("deepseek-ai--DeepSeek-R1.as-DeepSeek-V3.json", 32768)
    # 61 MLA layers: one latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576, bf16:
    # 1,152 B per token per layer, stored once (no separate K and V). The MTP layer exists
    # only with speculative decoding.
    assert kinds(doc) == {"mla": 61}
    blocks = MEMORY // (61 * 16 * 1152)  # one uniform group → 19,099
    assert figures(doc) == {
        "block": 16,
        "bytes_per_token": 61 * 1152,  # 70,272
        "bytes_per_block": 61 * 16 * 1152,
        "num_blocks": blocks,
        "blocks_per_request": 2048,
        "tokens": int(blocks / 2048 * 32768),  # 305,584
        "concurrency": 9.33,
        "groups": [61],
    }


def test_llama_4_scout() -> None:
    doc = plan("meta-llama--Llama-4-Scout-17B-16E-Instruct.subset.json", 32768)
    # no_rope_layers [1, 1, 1, 0] × 12: 36 chunked local layers (8192) + 12 full (8 × 128).
    assert kinds(doc) == {"chunked": 36, "full": 12}
    # From 0.14 VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1 (vllm/envs.py):
    # the hybrid manager stays on; buckets 36 chunked / 12 full → group size 12, 3 chunked + 1
    # full group, one block spans 12 pages of 16 × 4096 B.
    blocks = MEMORY // (12 * 65536)  # 27,306
    # Chunked: cdiv(min(8192 + 2 × 2048 in flight, 32768), 16) = 768 per group; full 2048.
    per_request = 3 * 768 + 2048
    assert figures(doc) == {
        "block": 16,
        "bytes_per_token": 48 * 4096,
        "bytes_per_block": 12 * 65536,
        "num_blocks": blocks,
        "blocks_per_request": per_request,
        "tokens": int(blocks / per_request * 32768),  # 205,598
        "concurrency": 6.27,
        "groups": [12, 12, 12, 12],
    }


def test_llama_4_scout_with_the_chunked_hybrid_variable_off() -> None:
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0 (the default of 0.10.1–0.13): vLLM
    # turns the hybrid manager off for chunked local attention, every layer is full.
    blocks = MEMORY // (48 * 65536)  # 6,826
    want = {
        "block": 16,
        "bytes_per_token": 48 * 4096,
        "bytes_per_block": 48 * 65536,
        "num_blocks": blocks,
        "blocks_per_request": 2048,
        "tokens": int(blocks / 2048 * 32768),  # 109,216
        "concurrency": 3.33,
        "groups": [48],
    }
    scout = "meta-llama--Llama-4-Scout-17B-16E-Instruct.subset.json"
    off = plan(scout, 32768, "--no-chunked-local-attn-hybrid")
    assert figures(off) == want
    assert "chunked-as-full" in {f["code"] for f in off["findings"]}
    assert figures(plan(scout, 32768, "--vllm-version", "0.13")) == want
    # An EAGLE drafter turns the manager off whatever the variable says (49 full layers).
    eagle = plan(scout, 32768, "--chunked-local-attn-hybrid", "--num-draft-layers", "1")
    assert figures(eagle)["groups"] == [49]


def test_gemma_2_9b() -> None:
    doc = plan("google--gemma-2-9b.subset.json", 8192)
    # No layer_types: Gemma 2 alternates, sliding (4096) at even indices, full at odd ones.
    assert kinds(doc) == {"sliding": 21, "full": 21}
    page = 16 * 2 * 8 * 256 * 2  # 131,072
    blocks = MEMORY // (21 * page)  # two buckets of 21 → group size 21, 2 groups → 7,801
    # Sliding: cdiv(min(4096 − 1 + 2 × 2048, 8192), 16) + 1 = 513; full cdiv(8192, 16) = 512.
    per_request = 513 + 512
    assert figures(doc) == {
        "block": 16,
        "bytes_per_token": 42 * 8192,
        "bytes_per_block": 21 * page,
        "num_blocks": blocks,
        "blocks_per_request": per_request,
        "tokens": int(blocks / per_request * 8192),  # 62,347
        "concurrency": 7.61,
        "groups": [21, 21],
    }


@pytest.mark.parametrize(
    ("release", "reserve_blocks", "tokens"),
    [
        # 0.25: one batch of reserve; tokens printed as int(concurrency × max_model_len).
        ("0.25", -(-min(4095 + 2048, 8192) // 16) + 1, None),
        # 0.20.0: tokens printed as num_blocks // groups × block size.
        ("0.20.0", -(-min(4095 + 2048, 8192) // 16) + 1, 7801 // 2 * 16),
    ],
)
def test_gemma_2_9b_under_older_rules(
    release: str, reserve_blocks: int, tokens: int | None
) -> None:
    doc = plan("google--gemma-2-9b.subset.json", 8192, "--vllm-version", release)
    got = figures(doc)
    assert got["blocks_per_request"] == 512 + reserve_blocks
    if tokens is not None:
        assert got["tokens"] == tokens
