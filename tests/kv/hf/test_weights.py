"""The weights ESTIMATE from a config, held against published checkpoints' index totals.

``metadata.total_size`` of each repo's ``model.safetensors.index.json`` on the Hugging Face
Hub: meta-llama/Llama-3.1-70B 141,107,412,992 (Llama-3.3-70B has the same geometry),
mistralai/Mistral-7B-v0.1 14,483,464,192, Qwen/Qwen3-8B 16,381,470,720. The configs' keys are
the published ``config.json`` values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.hf.weights import estimate_weights

ROOT = Path(__file__).resolve().parents[3]
LLAMA70 = ROOT / "tests/kv/realworld/configs/meta-llama--Llama-3.3-70B-Instruct_config.json"

MISTRAL_7B = {
    "model_type": "mistral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
QWEN3_8B = {
    "model_type": "qwen3",
    "hidden_size": 4096,
    "head_dim": 128,
    "intermediate_size": 12288,
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(
    ("config", "total"),
    [
        (json.loads(LLAMA70.read_text()), 141_107_412_992),
        (MISTRAL_7B, 14_483_464_192),
        (QWEN3_8B, 16_381_470_720),
    ],
    ids=["llama-70b", "mistral-7b", "qwen3-8b"],
)
def test_the_estimate_is_the_published_total(config: dict[str, Any], total: int) -> None:
    est = estimate_weights(config)
    assert est.total_bytes == total
    assert est.parameters == total // 2
    assert "ESTIMATE" in est.describe()
    assert sum(est.to_json()["terms"].values()) == est.parameters


def test_tied_embeddings_count_once() -> None:
    untied = estimate_weights(QWEN3_8B)
    tied = estimate_weights({**QWEN3_8B, "tie_word_embeddings": True})
    assert untied.parameters - tied.parameters == 151936 * 4096


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            {"model_type": "gemma3_text"},
            "model_type gemma3_text is not one it counts (llama, mistral",
        ),
        ({"quantization_config": {"quant_method": "fp8"}}, "quantized"),
        ({"torch_dtype": "float8_e4m3fn"}, "dtype"),
        ({"vocab_size": None}, "vocab_size"),
        ({"num_hidden_layers": True}, "num_hidden_layers"),
    ],
)
def test_what_it_does_not_count_is_refused(change: dict[str, Any], why: str) -> None:
    with pytest.raises(InputError, match="cannot estimate the weights") as info:
        estimate_weights({**QWEN3_8B, **change})
    assert why in info.value.message
    assert "--weights" in (info.value.hint or "")
