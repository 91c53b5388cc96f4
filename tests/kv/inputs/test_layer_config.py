"""The mmcli layer-config format: every layer kind written by hand, and its errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, parse_mmcli_config
from mmcli.kv.model import ModelConfig
from mmcli.kv.spec import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)
from mmcli.kv.state import MambaSpec

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "kv"
DEFAULTS = {"num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16"}


def parse(*layers: dict[str, Any], **defaults: Any) -> ModelConfig:
    doc = {"defaults": {**DEFAULTS, **defaults}, "layers": list(layers)}
    return parse_mmcli_config(doc, default_name="x", where="c.json")


def one(**layer: Any) -> Any:
    return parse({"name": "a", **layer}).layers[0].spec


def error(*layers: dict[str, Any], **defaults: Any) -> str:
    with pytest.raises(InputError) as info:
        parse(*layers, **defaults)
    return str(info.value)


def test_every_kind_sample() -> None:
    config = load_config(SAMPLES / "every-kind.toml")
    specs = [layer.spec for layer in config.layers]
    assert specs[:3] == [
        FullAttentionSpec(16, 8, 128, "bfloat16"),
        SlidingWindowSpec(16, 8, 128, "bfloat16", 4096),
        FullAttentionSpec(16, 2, 512, "bfloat16"),  # per-layer geometry
    ]
    mamba2, mamba1 = specs[3], specs[4]
    assert isinstance(mamba2, MambaSpec) and isinstance(mamba1, MambaSpec)
    assert (mamba2.kind, mamba2.dtype, mamba2.ssm_dtype) == ("mamba2", "bfloat16", "float32")
    assert mamba2.state_bytes == 10240 * 3 * 2 + 128 * 64 * 128 * 4
    assert (mamba1.kind, mamba1.ssm_dtype, mamba1.state_bytes) == ("mamba1", "bfloat16", 311_296)
    assert specs[5] is None
    assert [layer.attention for layer in config.layers] == [
        "full",
        "sliding",
        "full",
        "mamba",
        "mamba",
        "none",
    ]


def test_chunked_local_sample() -> None:
    config = load_config(SAMPLES / "chunked-local.toml")
    specs = [layer.spec for layer in config.layers]
    assert specs == [ChunkedLocalAttentionSpec(16, 8, 128, "bfloat16", 8192)] * 3 + [
        FullAttentionSpec(16, 8, 128, "bfloat16")
    ]


def test_qwen3_next_like_sample_matches_the_hf_reading() -> None:
    config = load_config(SAMPLES / "qwen3-next-like.json")
    state = config.layers[0].spec
    assert isinstance(state, MambaSpec) and state.state_bytes == 1_097_728
    assert [layer.attention for layer in config.layers] == (["mamba"] * 3 + ["full"]) * 2


def test_mla_sample_has_one_latent_head() -> None:
    config = load_config(SAMPLES / "deepseek-mla-like.json")
    spec = config.layers[0].spec
    assert spec == MLAAttentionSpec(16, 1, 576, "bfloat16")
    assert spec is not None and spec.bytes_per_token == 1152


def test_ds_mla() -> None:
    spec = one(attention="mla", head_size=576, ds_mla=True)
    assert isinstance(spec, MLAAttentionSpec) and spec.bytes_per_token == 656
    assert "ds_mla must be true or false, got str" in error(
        {"name": "a", "attention": "mla", "ds_mla": "yes"}
    )


def test_linear_state_takes_one_dtype() -> None:
    spec = one(attention="mamba", state={"kind": "linear", "num_heads": 64, "head_dim": 128})
    assert isinstance(spec, MambaSpec) and spec.shapes() == ((64, 128, 128),)


@pytest.mark.parametrize(
    ("layer", "message"),
    [
        (
            {"attention": "mamba"},
            "c.json: layers[0] (a): a mamba layer needs a state object, got null",
        ),
        (
            {"attention": "mamba", "state": {"kind": "mamba3"}},
            "c.json: layers[0] (a).state: unknown state kind 'mamba3'",
        ),
        (
            {"attention": "mamba", "state": {"kind": "mamba1", "intermediate": 8, "state_size": 4}},
            "c.json: layers[0] (a).state: conv_kernel is missing",
        ),
        (
            {
                "attention": "mamba",
                "state": {"kind": "linear", "num_heads": 2, "head_dim": 8, "n_groups": 1},
            },
            "c.json: layers[0] (a).state: n_groups is not a dimension of a linear state",
        ),
        (
            {"attention": "mamba", "state": {"kind": "linear", "num_heads": 0, "head_dim": 8}},
            "c.json: layers[0] (a).state.num_heads must be a positive integer, got 0",
        ),
        (
            {"attention": "mamba", "state": {"kind": "linear", "nums": 2}},
            "c.json: layers[0] (a).state: unknown key 'nums'",
        ),
        (
            {"attention": "chunked"},
            "c.json: layers[0] (a): a chunked layer needs attention_chunk_size",
        ),
        (
            {"attention": "full", "attention_chunk_size": 8192},
            "c.json: layers[0] (a) sets attention_chunk_size but its attention is full",
        ),
        (
            {"attention": "full", "state": {"kind": "linear"}},
            "c.json: layers[0] (a) sets state but its attention is full",
        ),
        (
            {"attention": "sliding"},
            "c.json: layers[0] (a): a sliding layer needs sliding_window",
        ),
        (
            {"attention": "diagonal"},
            "c.json: layers[0] (a): unknown attention type 'diagonal'",
        ),
    ],
)
def test_layer_errors(layer: dict[str, Any], message: str) -> None:
    assert error({"name": "a", **layer}) == message


def test_state_in_defaults_is_shared_and_none_keeps_nothing() -> None:
    state = {"kind": "gdn", "key_heads": 2, "key_dim": 8, "value_heads": 4, "value_dim": 8}
    config = parse(
        {"name": "a"},
        {"name": "b", "attention": "full"},
        {"name": "c", "attention": "none"},
        attention="mamba",
        state={**state, "conv_kernel": 4},
    )
    assert [layer.attention for layer in config.layers] == ["mamba", "full", "none"]
