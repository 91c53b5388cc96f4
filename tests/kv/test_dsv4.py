"""DeepSeek-V4 (``deepseek_v4``): refused, naming the caches vLLM would build for it.

Facts from the vLLM wheels' source (0.20.0 unless said):

* ``model_executor/models/registry.py``: ``DeepseekV4ForCausalLM`` first appears in 0.20.0
  (absent from 0.19.0), still there in 0.34.0.
* ``model_executor/models/deepseek_v4.py`` (``DeepseekV4Attention``): each decoder layer reads
  ``compress_ratio = max(1, config.compress_ratios[layer_id])`` and
  ``window_size = config.sliding_window``; only ``compress_ratio == 4`` builds an indexer.
* ``model_executor/layers/deepseek_v4_attention.py``: every layer registers
  ``{prefix}.swa_cache`` (``DeepseekV4SWACache``); ``DeepseekV4MLAAttention.get_kv_cache_spec``
  returns None for ``compress_ratio <= 1`` (the sliding cache is the layer's only cache) and an
  ``MLAAttentionSpec`` with ``compress_ratio`` otherwise, beside a ``DeepseekCompressor``.
* ``v1/core/kv_cache_utils.py``: ``_get_kv_cache_config_deepseek_v4`` lays the groups out.
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
from mmcli.kv.hf.dsv4 import layer_ratios
from mmcli.kv.releases import FIRST_SERVED

#: ``compress_ratios`` of a 4-layer model: two sliding-only layers (0 reads as 1), one C4A
#: layer (indexer) and one C128A layer, the kinds ``sparse_swa._layer_type_for`` accepts.
RATIOS = [0, 0, 4, 128]


def tiny(**overrides: Any) -> dict[str, Any]:
    """A DeepSeek-V4-shaped config of 4 layers, with the keys the engine's model reads."""
    doc: dict[str, Any] = {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "num_hidden_layers": 4,
        "num_attention_heads": 64,
        "hidden_size": 4096,
        "head_dim": 512,
        "qk_rope_head_dim": 64,
        "q_lora_rank": 1024,
        "o_lora_rank": 1024,
        "o_groups": 8,
        "sliding_window": 128,
        "compress_ratios": RATIOS,
        "index_topk": 512,
        "index_head_dim": 128,
        "index_n_heads": 64,
        "max_position_embeddings": 65536,
        "torch_dtype": "bfloat16",
    }
    doc.update(overrides)
    return {k: v for k, v in doc.items() if v is not None}


def refused(tmp_path: Path, doc: dict[str, Any], *args: str) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = CliRunner().invoke(
        app, ["kv-share", "plan", str(path), "--max-model-len", "4096", *args],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout == ""
    return result.stderr


def test_the_first_release_that_serves_it_is_0_20() -> None:
    # registry.py: DeepseekV4ForCausalLM in 0.20.0, not in 0.19.0.
    assert FIRST_SERVED["DeepseekV4ForCausalLM"] == "0.20"


def test_layer_ratios_read_as_the_engine_reads_them() -> None:
    # deepseek_v4.py: max(1, config.compress_ratios[layer_id]) for layer_id < num_hidden_layers.
    assert layer_ratios(tiny()) == [1, 1, 4, 128]
    assert layer_ratios(tiny(compress_ratios=[4, 4, 4, 4, 1])) == [4, 4, 4, 4]
    assert layer_ratios(tiny(compress_ratios=[4, 4])) is None
    assert layer_ratios(tiny(compress_ratios="4")) is None


@pytest.mark.parametrize("release", ["0.19", "0.20", "0.21", "0.34"])
def test_refused_naming_its_caches_and_the_first_release(tmp_path: Path, release: str) -> None:
    err = refused(tmp_path, tiny(), "--vllm-version", release)
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert "config.json: DeepSeek-V4 (deepseek_v4): vLLM serves it from 0.20.0" in lines[0]
    # 4 layers: a sliding cache each; ratios 4 and 128 compressed; ratio 4 alone indexed.
    assert "4 sliding caches (attn.swa_cache), 2 compressed MLA caches" in lines[0]
    assert "and 1 indexers (compress_ratio 4)" in lines[0]
    assert "_get_kv_cache_config_deepseek_v4" in lines[0] and "not planned yet" in lines[0]


def test_counts_follow_compress_ratios(tmp_path: Path) -> None:
    err = refused(tmp_path, tiny(compress_ratios=[128, 4, 4, 4]))
    assert "4 sliding caches (attn.swa_cache), 4 compressed MLA caches" in err
    assert "and 3 indexers" in err


def test_unreadable_compress_ratios_are_named(tmp_path: Path) -> None:
    err = refused(tmp_path, tiny(compress_ratios=None))
    assert "compress_ratios (not a list of one integer per layer here)" in err


@pytest.mark.parametrize("engine", ["trtllm"])  # SGLang: tests/kv/test_sglang_dsv4.py
def test_other_engines_keep_refusing_it(tmp_path: Path, engine: str) -> None:
    err = refused(tmp_path, tiny(), "--engine", engine)
    assert "config.json: DeepSeek-V4 (deepseek_v4)" in err


def test_known_by_architecture_alone() -> None:
    with pytest.raises(InputError, match=r"DeepSeek-V4 \(DeepseekV4ForCausalLM\)"):
        parse_hf_config(tiny(model_type=None), default_name="m", where="c")
