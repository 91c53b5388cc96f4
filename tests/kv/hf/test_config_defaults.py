"""Config defaults that live in transformers' config classes, and KV heads that live in vLLM's
model code, held against transformers itself (a test dependency) where it decides.

* ``MistralConfig.sliding_window`` and ``Olmo3Config.sliding_window`` default to 4096;
  ``Olmo3Config`` without ``layer_types`` makes every 4th layer full, the rest sliding.
* vLLM's Falcon model (``vllm/model_executor/models/falcon.py``): ``num_kv_heads`` under
  ``new_decoder_architecture`` (Falcon-40B: 8 of 128 heads), else one KV head with
  ``multi_query`` (Falcon-7B: 1 of 71; ``FalconConfig.multi_query`` defaults to true), else
  every head. The real engine (vLLM 0.32 CPU build, dummy weights) reported 1 and 8.
"""

from __future__ import annotations

from typing import Any

import pytest

from mmcli.kv.hf.config import parse_hf_config

transformers = pytest.importorskip("transformers")

FALCON_7B = {  # tiiuae/falcon-7b config.json, the keys that matter here
    "model_type": "falcon",
    "hidden_size": 4544,
    "num_attention_heads": 71,
    "num_hidden_layers": 32,
    "multi_query": True,
    "new_decoder_architecture": False,
    "parallel_attn": True,
    "torch_dtype": "bfloat16",
    "vocab_size": 65024,
}
FALCON_40B = {  # tiiuae/falcon-40b
    **FALCON_7B,
    "hidden_size": 8192,
    "num_attention_heads": 128,
    "num_hidden_layers": 60,
    "num_kv_heads": 8,
    "new_decoder_architecture": True,
}
MISTRAL = {
    "model_type": "mistral",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_hidden_layers": 4,
    "num_key_value_heads": 8,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}
OLMO3 = {
    "model_type": "olmo3",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_hidden_layers": 8,
    "num_key_value_heads": 32,
    "max_position_embeddings": 65536,
    "torch_dtype": "bfloat16",
}


def layers(doc: dict[str, Any]) -> list[tuple[str, int, int | None]]:
    model = parse_hf_config(doc, default_name="m", where="config.json")
    out = []
    for layer in model.layers:
        spec = layer.spec
        window = getattr(spec, "sliding_window", None)
        out.append((spec.attention, spec.num_kv_heads, window))
    return out


@pytest.mark.parametrize(
    ("doc", "kv_heads"),
    [
        (FALCON_7B, 1),
        ({k: v for k, v in FALCON_7B.items() if k != "multi_query"}, 1),
        ({**FALCON_7B, "multi_query": False}, 71),
        (FALCON_40B, 8),
        ({k: v for k, v in FALCON_40B.items() if k != "num_kv_heads"}, 128),
    ],
    ids=["7b", "7b-default-multi-query", "no-multi-query", "40b", "40b-no-num-kv-heads"],
)
def test_falcon_kv_heads_as_the_model_code_takes_them(doc: dict[str, Any], kv_heads: int) -> None:
    assert {heads for _, heads, _ in layers(doc)} == {kv_heads}


def test_mistral_without_the_key_slides_as_transformers_says() -> None:
    assert transformers.MistralConfig(**MISTRAL).sliding_window == 4096
    assert layers(MISTRAL) == [("sliding", 8, 4096)] * 4
    assert layers({**MISTRAL, "sliding_window": None}) == [("full", 8, None)] * 4


def test_olmo3_without_layer_types_follows_its_config_class() -> None:
    expected = transformers.Olmo3Config(**OLMO3).layer_types
    assert [kind for kind, _, _ in layers(OLMO3)] == [
        "sliding" if t == "sliding_attention" else "full" for t in expected
    ]
    assert expected[:4] == ["sliding_attention"] * 3 + ["full_attention"]
    assert {w for kind, _, w in layers(OLMO3) if kind == "sliding"} == {4096}
