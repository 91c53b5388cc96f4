"""Hybrid (state + attention) rules that changed between vLLM releases, end to end.

* The attention block of a hybrid model: vLLM's ``_align_hybrid_block_size``
  (``vllm/platforms/interface.py``, from 0.20; before, ``HybridAttentionMambaModelConfig`` in
  ``vllm/model_executor/models/config.py``) takes ``B × cdiv(state page, B × attention bytes
  per token)``, with B the kernel alignment (16; for MLA 64, and from 0.27 at least 128) and,
  from 0.20.0, ``B = max(kernel alignment, block_size)`` (0.19.1 does not have it).
* A Mamba-2 state under prefix caching ("align" mode) holds 2 blocks per request, and from
  0.32.0 one more: ``MambaMixer2.get_kv_cache_spec``
  (``vllm/model_executor/layers/mamba/mamba_mixer2.py``) sets
  ``num_prefill_checkpoint_blocks=1``, which ``MambaSpec.max_memory_usage_bytes``
  (``vllm/v1/kv_cache_interface.py``) adds in align mode only. GDN and Mamba-1 keep 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kv_plan import plan_json
from typer.testing import CliRunner

from mmcli.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
JAMBA = ROOT / "tests" / "kv" / "configs" / "ai21labs--AI21-Jamba-1.5-Mini.json"
GiB = 2**30


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


run = plan_json


def refused(*args: str) -> str:
    result = CliRunner().invoke(app, ["kv-share", "plan", *args], catch_exceptions=False)
    assert result.exit_code == 2, result.stdout + result.stderr
    return result.stderr


def engine(doc: dict[str, Any], key: str) -> Any:
    return doc["memory"][key][doc["engine_side"]]


#: A Granite-4.0-H-like config (GraniteMoeHybrid's keys): 36 Mamba-2 layers and 4 attention
#: layers of 8 KV heads × 128 (hidden 2048 / 16 heads).
GRANITE: dict[str, Any] = {
    "model_type": "granitemoehybrid",
    "torch_dtype": "bfloat16",
    "hidden_size": 2048,
    "num_hidden_layers": 40,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "mamba_n_heads": 64,
    "mamba_d_head": 64,
    "mamba_n_groups": 1,
    "mamba_d_state": 128,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "max_position_embeddings": 131072,
    "layer_types": ["attention" if i % 10 == 5 else "mamba" for i in range(40)],
}
#: Its Mamba-2 state: conv (2·2048 + 2·1·128, 4 − 1) + ssm (64, 64, 128), bf16.
STATE = (4096 + 256) * 3 * 2 + 64 * 64 * 128 * 2  # 1,074,688 B
#: One token of one attention layer: K and V, 8 heads × 128, bf16.
PER_TOKEN = 2 * 8 * 128 * 2  # 4,096 B


def hybrid_block(align: int) -> int:
    return align * cdiv(STATE, align * PER_TOKEN)


@pytest.fixture
def granite(tmp_path: Path) -> str:
    path = tmp_path / "granite-4.0-h-like.json"
    path.write_text(json.dumps(GRANITE))
    return str(path)


def plan(config: str, *extra: str) -> dict[str, Any]:
    return run(config, "--memory", "20GiB", "--max-model-len", "8192", *extra)


@pytest.mark.parametrize(
    ("block", "release", "want"),
    [
        ("16", "0.34", hybrid_block(16)),  # 16 × 17 = 272
        ("128", "0.34", hybrid_block(128)),  # 128 × 3 = 384
        ("128", "0.20.0", hybrid_block(128)),
        ("32", "0.20", hybrid_block(32)),  # 32 × 9 = 288
        ("128", "0.19", max(128, hybrid_block(16))),  # the kernel alignment only: 272
        ("32", "0.19.1", max(32, hybrid_block(16))),
        ("512", "0.19", 512),  # a larger block is kept in every release
        ("512", "0.34", 512),
    ],
)
def test_hybrid_block_aligns_to_the_block_size_from_0_20(
    granite: str, block: str, release: str, want: int
) -> None:
    assert (hybrid_block(16), hybrid_block(128)) == (272, 384)
    doc = plan(granite, "--block-size", block, "--vllm-version", release)
    assert doc["memory"]["block_size"] == want
    # The state is padded to the attention page: one page per layer of a group of 4.
    assert engine(doc, "bytes_per_block") == 4 * want * PER_TOKEN


def test_hybrid_block_size_off_the_kernel_block_is_refused_from_0_20(granite: str) -> None:
    err = refused(granite, "--block-size", "24")
    assert "--block-size 24 is not a multiple of the attention kernels' 16-token block" in err
    assert "use a multiple of 16, e.g. 32" in err
    # Before 0.20 the block is a multiple of 16 whatever --block-size says.
    assert plan(granite, "--block-size", "24", "--vllm-version", "0.19")["memory"]["block_size"]
    assert plan(granite, "--block-size", "8")["memory"]["block_size"] == hybrid_block(16)


def mla_hybrid(tmp_path: Path) -> str:
    state = {"kind": "mamba2", "intermediate": 4096, "state_size": 128, "conv_kernel": 4}
    state |= {"num_heads": 64, "head_dim": 64, "n_groups": 1}
    layers = [
        {"name": f"model.layers.{i}.mixer", "attention": "mamba", "state": state} for i in (0, 1, 2)
    ]
    layers.append({"name": "model.layers.3.self_attn.attn", "attention": "mla", "head_size": 576})
    doc = {"name": "mla-hybrid", "max_model_len": 8192, "defaults": {"dtype": "bfloat16"}}
    path = tmp_path / "mla-hybrid.json"
    path.write_text(json.dumps({**doc, "layers": layers}))
    return str(path)


@pytest.mark.parametrize(
    ("release", "block", "align"),
    [("0.19", "16", 64), ("0.26", "16", 64), ("0.27", "16", 128), ("0.34", "16", 128)]
    + [("0.26", "256", 256), ("0.34", "256", 256), ("0.19", "256", 64)],
)
def test_mla_hybrid_alignment(tmp_path: Path, release: str, block: str, align: int) -> None:
    # One MLA token: a 576-wide latent, bf16 = 1,152 B; the same 1,074,688 B Mamba-2 state.
    want = max(int(block), align * cdiv(STATE, align * 1152))  # 64: 960; 128: 1,024
    doc = run(mla_hybrid(tmp_path), "--block-size", block, "--vllm-version", release)
    assert doc["memory"]["block_size"] == want


def test_mamba2_keeps_a_prefill_checkpoint_block_from_0_32(granite: str) -> None:
    # 1 attention group + 9 Mamba-2 groups of 4; prefix caching on (the default from 0.26).
    attention = cdiv(8192, 272)  # 31
    assert engine(plan(granite, "--vllm-version", "0.33"), "blocks_per_request") == attention + 27
    # 0.34: the default block is 64, so the attention block is a multiple of 64 (320).
    wide = cdiv(8192, hybrid_block(64))  # 26
    assert engine(plan(granite), "blocks_per_request") == wide + 9 * 3
    assert engine(plan(granite, "--vllm-version", "0.32.0"), "blocks_per_request") == 31 + 27
    assert engine(plan(granite, "--vllm-version", "0.31"), "blocks_per_request") == 31 + 9 * 2
    # Without prefix caching the checkpoint is not counted: one state per request.
    off = plan(granite, "--no-enable-prefix-caching", "--vllm-version", "0.33")
    assert engine(off, "blocks_per_request") == 31 + 9


def test_mamba2_checkpoint_in_the_state_pool_check(granite: str) -> None:
    blocks = engine(plan(granite), "num_blocks")
    doc = plan(granite, "--max-num-seqs", str(blocks // 3 + 1))
    found = [f for f in doc["findings"] if f["code"] == "state-pool-too-small"]
    assert found and f"a request keeps 3 of them: at most {blocks // 3:,}" in found[0]["message"]
    fits = plan(granite, "--max-num-seqs", str(blocks // 3))
    assert "state-pool-too-small" not in {f["code"] for f in fits["findings"]}


def test_mamba1_keeps_two_states_per_request() -> None:
    # Jamba's Mamba-1 mixer sets no prefill checkpoint: 2 blocks per state group in align mode.
    args = [str(JAMBA), "--memory", "20GiB", "--max-model-len", "8192"]
    new, old = run(*args, "--vllm-version", "0.33"), run(*args, "--vllm-version", "0.31")
    assert engine(new, "blocks_per_request") == engine(old, "blocks_per_request")
    groups = new["groups"]
    states = sum(1 for g in groups if g["attention"] == "mamba")
    attention = [g for g in groups if g["attention"] != "mamba"]
    per_attention = cdiv(8192, new["memory"]["block_size"])
    assert states and engine(new, "blocks_per_request") == states * 2 + per_attention * len(
        attention
    )


# --- 0.10.0 and 0.10.1: models with recurrent states on V0 unless VLLM_USE_V1=1 ------------

NEMOTRON = ROOT / "tests" / "kv" / "configs" / "nvidia--Nemotron-H-8B-Base-8K.json"


@pytest.mark.parametrize("release", ["0.10.0", "0.10.1"])
def test_a_hybrid_before_0_10_2_needs_v1_without_prefix_caching(release: str) -> None:
    """vLLM 0.10.0 / 0.10.1 engine/arg_utils.py ``_is_v1_supported_oracle``: a model with
    ``has_inner_state`` falls back to V0 ("V1 mamba models are unoptimized") unless
    VLLM_USE_V1=1; ``_set_default_args_v1`` then turns prefix caching on for a generative
    model, and v1/worker/gpu_model_runner.py raises "Prefix caching is not supported for
    Mamba yet." for Mamba layers. 0.10.2 drops the fallback."""
    stderr = refused(str(NEMOTRON), "--memory", "20GiB", "--vllm-version", release)
    assert "V0 engine" in stderr and "--no-enable-prefix-caching" in stderr
    doc = run(str(NEMOTRON), "--memory", "20GiB", "--vllm-version", release,
              "--no-enable-prefix-caching")  # fmt: skip
    assert [f["code"] for f in doc["findings"]] == ["state-model-v1"]
    newer = run(str(NEMOTRON), "--memory", "20GiB", "--vllm-version", "0.10.2",
                "--no-enable-prefix-caching")  # fmt: skip
    assert "state-model-v1" not in [f["code"] for f in newer["findings"]]
    assert engine(doc, "num_blocks") == engine(newer, "num_blocks")


def test_jamba_is_v0_only_in_0_10_0() -> None:
    """vLLM 0.10.0 model_executor/models/jamba.py: ``JambaForCausalLM(..., SupportsV0Only)``;
    0.10.1's drops SupportsV0Only."""
    stderr = refused(str(JAMBA), "--memory", "20GiB", "--vllm-version", "0.10.0",
                     "--no-enable-prefix-caching")  # fmt: skip
    assert "V0 engine alone" in stderr and "0.10.1" in stderr
    doc = run(str(JAMBA), "--memory", "20GiB", "--vllm-version", "0.10.1",
              "--no-enable-prefix-caching")  # fmt: skip
    assert engine(doc, "num_blocks") > 0
