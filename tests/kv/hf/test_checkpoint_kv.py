"""What a checkpoint declares beyond its geometry, applied as each vLLM release applies it.

Sources (the released wheels): ``resolve_kv_cache_dtype_string`` in
``vllm/utils/torch_utils.py`` (first in 0.14.0; maps ModelOpt ``kv_cache_quant_algo``
``"fp8"`` to ``fp8_e4m3``, ``nvfp4`` from 0.20); the attention layer's ``kv_cache_scheme``
override (``model_executor/layers/attention/attention.py``: 0.16.0-0.21.0 unconditional
``kv_cache_dtype = "fp8"``, from 0.22.0 only when ``kv_cache_dtype == "auto"``);
``Gemma4ModelArchConfigConvertor.is_mm_prefix_lm`` (``use_bidirectional_attention ==
"vision"``) and ``EngineArgs._get_min_mm_batched_tokens`` (from 0.22.0: an unset
``max_num_batched_tokens`` is raised to the largest multimodal item; Gemma 4's video is 32
frames × (70 + 2 + 6) tokens, ``gemma4_mm.py``); ``mamba_ssm_dtype`` of Qwen3.5 from 0.17.0
(``model_executor/models/config.py``).
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
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import plan_kv_cache

REALWORLD = Path(__file__).resolve().parents[1] / "realworld" / "configs"
BASE: dict[str, Any] = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "hidden_size": 1024,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
MODELOPT_FP8 = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}
COMPRESSED = {
    "quant_method": "compressed-tensors",
    "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False},
}
BF16_TOKEN = 4 * 2 * 2 * 128 * 2  # layers × K,V × heads × dim × 2 bytes


def per_token(quant: dict[str, Any], *args: str, path: Path | None = None) -> int:
    if path is None:
        raise AssertionError
    path.write_text(json.dumps({**BASE, "quantization_config": quant}))
    result = CliRunner().invoke(
        app,
        ["kv-share", "plan", str(path), "--format", "json", "--memory", "1GiB", *args],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    token: int = doc["memory"]["bytes_per_token"][doc["engine_side"]]
    return token


def test_a_modelopt_fp8_cache_is_used_from_0_14(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    assert per_token(MODELOPT_FP8, "--vllm-version", "0.13", path=path) == BF16_TOKEN
    assert per_token(MODELOPT_FP8, "--vllm-version", "0.14", path=path) == BF16_TOKEN // 2
    assert per_token(MODELOPT_FP8, path=path) == BF16_TOKEN // 2
    # an explicit dtype wins
    assert per_token(MODELOPT_FP8, "--kv-cache-dtype", "bfloat16", path=path) == BF16_TOKEN
    nested = {"quant_method": "modelopt", "quantization": {"kv_cache_quant_algo": "fp8"}}
    assert per_token(nested, path=path) == BF16_TOKEN // 2
    unknown = {"quant_method": "modelopt", "kv_cache_quant_algo": "int8"}
    assert per_token(unknown, path=path) == BF16_TOKEN  # vLLM falls back to auto


def test_an_nvfp4_cache_is_refused() -> None:
    doc = {
        **BASE,
        "quantization_config": {"quant_method": "modelopt", "kv_cache_quant_algo": "NVFP4"},
    }
    with pytest.raises(InputError, match="NVFP4 KV cache"):
        parse_hf_config(doc, default_name="m", where="config.json")


def test_an_llm_compressor_scheme_by_release(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    fp8 = BF16_TOKEN // 2
    assert per_token(COMPRESSED, path=path) == fp8
    assert (
        per_token(COMPRESSED, "--vllm-version", "0.22", "--kv-cache-dtype", "bf16", path=path)
        == BF16_TOKEN
    )
    # 0.16-0.21 set fp8 whatever the flag says
    assert (
        per_token(COMPRESSED, "--vllm-version", "0.18", "--kv-cache-dtype", "bf16", path=path)
        == fp8
    )
    # before 0.16 an explicit dtype is planned; auto is not mirrored
    assert (
        per_token(COMPRESSED, "--vllm-version", "0.15", "--kv-cache-dtype", "fp8", path=path) == fp8
    )
    path.write_text(json.dumps({**BASE, "quantization_config": COMPRESSED}))
    result = CliRunner().invoke(app, ["kv-share", "plan", str(path), "--vllm-version", "0.15"])
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and "kv_cache_scheme" in lines[0] and lines[1].startswith("hint: ")


def gemma4(bidirectional: str | None, *, vision: bool = True) -> dict[str, Any]:
    doc = json.loads((REALWORLD / "google--gemma-4-E4B-it.text_config.json").read_text())
    if bidirectional is not None:
        doc["text_config"]["use_bidirectional_attention"] = bidirectional
    if vision:
        doc["vision_config"] = {"model_type": "gemma4_vision"}
    return doc


def test_gemma4_vision_prefix_attention_is_an_ordinary_cache() -> None:
    plain = parse_hf_config(gemma4(None), default_name="g", where="c")
    vision = parse_hf_config(gemma4("vision"), default_name="g", where="c")
    assert [lay.spec for lay in plain.layers] == [lay.spec for lay in vision.layers]
    with pytest.raises(InputError, match="use_bidirectional_attention is set"):
        parse_hf_config(gemma4("all"), default_name="g", where="c")


def test_gemma4_raises_an_unset_batch_to_one_video_from_0_22() -> None:
    config = parse_hf_config(gemma4("vision"), default_name="g", where="c")
    assert config.mm_item_tokens == 32 * 78 == 2496

    def plan(release: str, tokens: int, default: bool) -> Any:
        options = PlanOptions(
            memory="10GiB",
            vllm_version=release,
            max_num_batched_tokens=tokens,
            max_num_batched_tokens_default=default,
        )
        plan = plan_kv_cache(config, options)
        return plan.to_json(aliasing_verified=None, exit_code=0)["memory"]

    raised = plan("0.25", 2048, True)
    assert raised == plan("0.25", 2496, False)
    assert raised != plan("0.25", 2048, False)
    assert plan("0.21", 2048, True) == plan("0.21", 2048, False)
    note = plan_kv_cache(
        config,
        PlanOptions(
            memory="10GiB", max_num_batched_tokens=2048, max_num_batched_tokens_default=True
        ),
    ).findings
    assert "max-num-batched-tokens" in [f.code for f in note]
    text_only = parse_hf_config(gemma4("vision", vision=False), default_name="g", where="c")
    assert text_only.mm_item_tokens is None
