"""An ESTIMATE of a checkpoint's bytes from its ``config.json``, for ``--gpu`` without weights.

Only the decoder families whose parameter layout is plain (embeddings, attention q/k/v/o, a
gated MLP or gated experts, RMS norms) are counted; anything else is refused by name, so an
estimate is never a guess. Each term is kept for display. Checked against the published
indexes' ``metadata.total_size``: Llama-3.1-70B (141,107,412,992 bytes), Mistral-7B-v0.1
(14,483,464,192) and Qwen3-8B (16,381,470,720) come out to the byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from mmcli.errors import InputError
from mmcli.text import printable

#: Families counted, with transformers' ``tie_word_embeddings`` default for each.
FAMILIES: Final = {
    "llama": False,
    "mistral": False,
    "qwen2": False,
    "qwen3": False,
    "mixtral": False,
    "qwen3_moe": False,
}
#: Bytes per parameter of the checkpoint dtypes the estimate takes.
_DTYPE_BYTES: Final = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class WeightsEstimate:
    """Parameters by term and the bytes they take in the checkpoint's dtype."""

    model_type: str
    dtype: str
    #: (term, parameters), in the order shown.
    terms: tuple[tuple[str, int], ...]

    @property
    def parameters(self) -> int:
        return sum(n for _, n in self.terms)

    @property
    def total_bytes(self) -> int:
        return self.parameters * _DTYPE_BYTES[self.dtype]

    def describe(self) -> str:
        """``ESTIMATE from config.json: 70.55 B parameters (llama, bfloat16)``."""
        return (
            f"ESTIMATE from config.json: {self.parameters / 1e9:.2f} B parameters "
            f"({self.model_type}, {self.dtype})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "model_type": self.model_type,
            "dtype": self.dtype,
            "parameters": self.parameters,
            "bytes": self.total_bytes,
            "terms": dict(self.terms),
        }


def estimate_weights(config: dict[str, Any]) -> WeightsEstimate:
    """The checkpoint's parameters from a Hugging Face config (refused outside :data:`FAMILIES`)."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        counted = ", ".join(FAMILIES)
        raise _refuse(f"model_type {printable(str(model_type))} is not one it counts ({counted})")
    if config.get("quantization_config") is not None:
        raise _refuse("the checkpoint is quantized (quantization_config)")
    dtype = config.get("torch_dtype", config.get("dtype", "bfloat16"))
    if dtype not in _DTYPE_BYTES:
        raise _refuse(f"dtype {printable(str(dtype))} is not one it counts")
    g = _Geometry(config)
    per_layer_attention = g.hidden * g.head_dim * (2 * g.heads + 2 * g.kv_heads)
    if model_type == "qwen2":  # Qwen2 attention always has q/k/v biases
        per_layer_attention += g.head_dim * (g.heads + 2 * g.kv_heads)
    elif config.get("attention_bias") is True:
        per_layer_attention += g.head_dim * (g.heads + 2 * g.kv_heads) + g.hidden
    if model_type == "qwen3" or model_type == "qwen3_moe":  # q_norm and k_norm
        per_layer_attention += 2 * g.head_dim
    terms = [("embeddings", g.vocab * g.hidden)]
    tied = config.get("tie_word_embeddings", FAMILIES[model_type])
    if not tied:
        terms.append(("lm_head", g.vocab * g.hidden))
    terms.append((f"attention × {g.layers}", per_layer_attention * g.layers))
    terms.append((f"MLP × {g.layers}", _mlp(config, model_type, g) * g.layers))
    terms.append((f"norms (2 × {g.layers} + 1)", g.hidden * (2 * g.layers + 1)))
    return WeightsEstimate(model_type, str(dtype), tuple(terms))


class _Geometry:
    def __init__(self, config: dict[str, Any]) -> None:
        self.hidden = _int(config, "hidden_size")
        self.layers = _int(config, "num_hidden_layers")
        self.heads = _int(config, "num_attention_heads")
        self.vocab = _int(config, "vocab_size")
        kv = config.get("num_key_value_heads")
        self.kv_heads = self.heads if kv is None else _int(config, "num_key_value_heads")
        head_dim = config.get("head_dim")
        self.head_dim = self.hidden // self.heads if head_dim is None else _int(config, "head_dim")


def _mlp(config: dict[str, Any], model_type: str, g: _Geometry) -> int:
    """Parameters of one layer's MLP (gate, up, down), or its experts and router."""
    if model_type == "mixtral":
        experts = _int(config, "num_local_experts")
        return experts * 3 * g.hidden * _int(config, "intermediate_size") + g.hidden * experts
    if model_type == "qwen3_moe":
        if config.get("mlp_only_layers") or config.get("decoder_sparse_step", 1) != 1:
            raise _refuse("mlp_only_layers / decoder_sparse_step mix dense and expert layers")
        experts = _int(config, "num_experts")
        return experts * 3 * g.hidden * _int(config, "moe_intermediate_size") + g.hidden * experts
    return 3 * g.hidden * _int(config, "intermediate_size")


def _int(config: dict[str, Any], key: str) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _refuse(f"{key} is {printable(repr(value))}, not a positive integer")
    return value


def _refuse(why: str) -> InputError:
    return InputError(
        f"--gpu: cannot estimate the weights from the config: {why}",
        hint="give the weights with --weights (a size such as 140GB, a checkpoint file or "
        "folder, or a Hub repo id)",
    )
