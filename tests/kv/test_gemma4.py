"""Gemma 4 configs read as transformers builds them, which is all vLLM reads.

Sources (released files):

* transformers 5.5.0, 5.15.0 and 5.25.0 models/gemma4/configuration_gemma4.py,
  ``Gemma4TextConfig.__post_init__``: missing ``layer_types`` become 5 sliding : 1 full
  (``sliding_window_pattern = 6`` hard-coded, the config key is not read); a last layer
  that is not ``full_attention`` is forced to ``full_attention`` (with a logged warning);
  ``global_head_dim`` defaults to 512 (5.5: a field default; 5.15 and 5.25:
  ``kwargs.pop("global_head_dim", 512)`` into ``per_layer_config`` ``head_dim`` of every
  full layer, with ``num_key_value_heads = num_global_key_value_heads`` only when
  ``attention_k_eq_v``).
* vLLM 0.22.0 vllm/model_executor/models/gemma4.py ``Gemma4DecoderLayer``: a full layer's
  head_dim is ``global_head_dim``; with ``attention_k_eq_v`` its KV heads are
  ``num_global_key_value_heads``; ``Gemma4Attention`` builds one ``Attention`` with
  ``num_kv_heads`` and ``head_dim`` either way (k_eq_v layers "load K weights into both K
  and V slots"), so the cache keeps K and V: 2 × heads × head_dim × dtype bytes per token.
  vLLM 0.28.0 vllm/transformers_utils/configs/gemma4.py ``gemma4_layer_config`` reads the
  same values from ``per_layer_config`` (transformers >= 5.15) or the flat keys.
* vLLM 0.22.0 and 0.34.0 gemma4.py ``Gemma4Attention``: each of the last
  ``num_kv_shared_layers`` layers shares the cache of the last non-shared layer of its own
  ``config.layer_types`` entry (after transformers' forcing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.inputs.layer_config import load_config
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import plan_kv_cache
from mmcli.kv.spec import FullAttentionSpec, SlidingWindowSpec

S, F = "sliding_attention", "full_attention"
GiB = 2**30


def name(i: int) -> str:
    return f"model.layers.{i}.self_attn.attn"


def text(**extra: Any) -> dict[str, Any]:
    """A small Gemma 4 text config: 2 KV heads, head_dim 256, no global_head_dim (so 512)."""
    return {
        "model_type": "gemma4_text",
        "torch_dtype": "bfloat16",
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "sliding_window": 512,
        "max_position_embeddings": 4096,
        **extra,
    }


def parse(doc: dict[str, Any]) -> ModelConfig:
    return parse_hf_config(doc, default_name="x", where="config.json")


def kinds(config: ModelConfig) -> list[str]:
    return [layer.attention for layer in config.layers]


def test_last_sliding_layer_is_forced_full_with_a_note() -> None:
    types = [S, S, S, S, S, F, S]
    config = parse(text(num_hidden_layers=7, layer_types=types))
    assert kinds(config) == ["sliding"] * 5 + ["full", "full"]
    assert config.layers[6].spec == FullAttentionSpec(16, 2, 512, "bfloat16")
    plan = plan_kv_cache(config, PlanOptions(memory_bytes=GiB, vllm_version="0.22"))
    notes = [f for f in plan.findings if f.code == "gemma4-last-layer-full"]
    assert [f.severity for f in notes] == ["info"]
    assert "layer 6" in notes[0].message
    assert plan.with_sharing is not None
    # 5 sliding × (2 × 2 heads × 256 × 2 B) + 2 full × (2 × 2 heads × 512 × 2 B)
    assert plan.with_sharing.bytes_per_token == 5 * 2048 + 2 * 4096 == 18432


def test_last_full_layer_gets_no_note() -> None:
    config = parse(text(num_hidden_layers=6, layer_types=[S, S, S, S, S, F]))
    assert all(f.code != "gemma4-last-layer-full" for f in config.findings)
    assert kinds(config) == ["sliding"] * 5 + ["full"]


def test_missing_layer_types_are_every_sixth_full_and_the_last_forced() -> None:
    config = parse(text(num_hidden_layers=8))
    assert kinds(config) == ["sliding"] * 5 + ["full", "sliding", "full"]
    assert [f.code for f in config.findings if f.code.startswith("gemma4")] == [
        "gemma4-last-layer-full"
    ]
    assert config.layers[0].spec == SlidingWindowSpec(16, 2, 256, "bfloat16", 512)


def test_sliding_window_pattern_is_not_read() -> None:
    config = parse(text(num_hidden_layers=6, sliding_window_pattern=2))
    assert kinds(config) == ["sliding"] * 5 + ["full"]  # not 2: transformers hard-codes 6
    warned = [f for f in config.findings if f.code == "gemma4-pattern-ignored"]
    assert [f.severity for f in warned] == ["warning"]


def test_global_head_dim_default_and_given() -> None:
    types = [S, F]
    default = parse(text(num_hidden_layers=2, layer_types=types))
    given = parse(text(num_hidden_layers=2, layer_types=types, global_head_dim=128))
    assert default.layers[1].spec == FullAttentionSpec(16, 2, 512, "bfloat16")
    assert given.layers[1].spec == FullAttentionSpec(16, 2, 128, "bfloat16")
    assert default.layers[0].spec == given.layers[0].spec  # sliding layers keep head_dim


def test_k_eq_v_full_layers_keep_k_and_v_slots() -> None:
    doc = text(
        num_hidden_layers=2,
        layer_types=[S, F],
        attention_k_eq_v=True,
        num_global_key_value_heads=1,
    )
    config = parse(doc)
    full = config.layers[1].spec
    assert full == FullAttentionSpec(16, 1, 512, "bfloat16")
    assert full is not None and full.bytes_per_token == 2 * 1 * 512 * 2  # K and V
    # without k_eq_v transformers and vLLM keep num_key_value_heads on full layers
    del doc["attention_k_eq_v"]
    assert parse(doc).layers[1].spec == FullAttentionSpec(16, 2, 512, "bfloat16")


def test_shared_tail_targets_the_last_owner_of_the_forced_type() -> None:
    types = [S, S, F, S, S, F, S, S]  # the last is forced full
    config = parse(text(num_hidden_layers=8, layer_types=types, num_kv_shared_layers=3))
    targets = [layer.kv_sharing_target for layer in config.layers]
    # first shared layer 8 - 3 = 5; owners' last full is 2, last sliding 4
    assert targets == [None] * 5 + [name(2), name(4), name(2)]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"num_hidden_layers": 2, "layer_types": ["chunked_attention", F]},
            "layer_types\\[0\\] is 'chunked_attention'",
        ),
        ({"num_hidden_layers": 6, "sliding_window": 0}, "sliding_window is not set"),
    ],
)
def test_refused(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse(text(**extra))


# --- the published 26B-A4B and 31B text configs (tests/kv/configs/PROVENANCE.md) ----------

CONFIGS = Path(__file__).resolve().parent / "configs"


@pytest.mark.parametrize(
    ("model", "sliding", "full", "per_token"),
    [
        # 30 layers, 5 sliding : 1 full; sliding 8 KV heads × 256, full (k_eq_v)
        # num_global_key_value_heads 2 × global_head_dim 512; bf16 (2 B), K and V.
        ("26B-A4B", (25, 8), (5, 2), 25 * (2 * 8 * 256 * 2) + 5 * (2 * 2 * 512 * 2)),
        # 60 layers; sliding 16 KV heads × 256, full 4 × 512.
        ("31B", (50, 16), (10, 4), 50 * (2 * 16 * 256 * 2) + 10 * (2 * 4 * 512 * 2)),
    ],
)
def test_published_configs(
    model: str, sliding: tuple[int, int], full: tuple[int, int], per_token: int
) -> None:
    config = load_config(CONFIGS / f"google--gemma-4-{model}-it.text_config.json")
    slides = [layer for layer in config.layers if layer.attention == "sliding"]
    fulls = [layer for layer in config.layers if layer.attention == "full"]
    assert len(slides) == sliding[0] and len(fulls) == full[0]
    assert {layer.spec for layer in slides} == {
        SlidingWindowSpec(16, sliding[1], 256, "bfloat16", 1024)
    }
    assert {layer.spec for layer in fulls} == {FullAttentionSpec(16, full[1], 512, "bfloat16")}
    assert all(layer.kv_sharing_target is None for layer in config.layers)
    assert config.attention_k_eq_v
    plan = plan_kv_cache(config, PlanOptions(memory_bytes=20 * GiB, vllm_version="0.22"))
    assert plan.with_sharing is not None
    assert plan.with_sharing.bytes_per_token == per_token
    assert all(not f.code.startswith("gemma4") for f in plan.findings)  # last layer is full


# --- the engine's layer names ------------------------------------------------------------


def wrapped(architecture: str) -> dict[str, Any]:
    types = [S, S, F, S, F]
    inner = text(num_hidden_layers=5, layer_types=types, num_kv_shared_layers=2)
    return {"architectures": [architecture], "model_type": "gemma4", "text_config": inner}


def test_multimodal_wrapper_names_layers_under_language_model() -> None:
    """vLLM 0.19.0 and 0.34.0 gemma4_mm.py: ``Gemma4ForConditionalGeneration`` builds its
    ``Gemma4ForCausalLM`` with ``prefix=maybe_prefix(prefix, "language_model")``; gemma4.py
    puts the decoder under ``model`` and its layers under ``{prefix}.layers``, and a shared
    layer's target is ``{prefix before .layers.}.layers.{index}.self_attn.attn``."""
    config = parse(wrapped("Gemma4ForConditionalGeneration"))
    pre = "language_model.model.layers"
    assert [layer.name for layer in config.layers] == [
        f"{pre}.{i}.self_attn.attn" for i in range(5)
    ]
    # first shared layer 5 - 2 = 3: layer 3 (sliding) reads 1, layer 4 (full) reads 2
    targets = [layer.kv_sharing_target for layer in config.layers]
    assert targets == [None, None, None, f"{pre}.1.self_attn.attn", f"{pre}.2.self_attn.attn"]
    causal = parse(wrapped("Gemma4ForCausalLM"))  # the text model keeps model.layers
    assert [layer.name for layer in causal.layers] == [name(i) for i in range(5)]


def test_emit_map_and_map_use_the_engine_names(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(wrapped("Gemma4ForConditionalGeneration")))
    out = tmp_path / "map.json"
    runner = CliRunner()
    args = ["kv-share", "plan", str(config), "--memory", "1GiB", "--emit-map", str(out)]
    result = runner.invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stdout + result.stderr
    pre = "language_model.model.layers"
    emitted = json.loads(out.read_text())
    assert emitted == {
        f"{pre}.3.self_attn.attn": f"{pre}.1.self_attn.attn",
        f"{pre}.4.self_attn.attn": f"{pre}.2.self_attn.attn",
    }
    result = runner.invoke(
        app,
        ["kv-share", "plan", str(config), "--memory", "1GiB", "--map", str(out)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stdout + result.stderr
