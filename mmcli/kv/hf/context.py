"""The length facts of an HF config: the keys vLLM derives ``max_model_len`` from.

The engine's rules on them (which RoPE types scale the length, by release) are applied in
:mod:`mmcli.kv.engine.max_len`; this module only reads what the config says.
"""

from __future__ import annotations

from typing import Any

from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.inputs.values import MAX_VALUE, optional_int, shown, type_name
from mmcli.kv.model import ContextLength, RopeScaling

#: The keys vLLM reads for a model's longest sequence, the smallest winning (vLLM's
#: ``derive_max_model_len_and_key``, unchanged from 0.10 to 0.34); ``model_max_length``, when
#: set, replaces the result.
LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)

#: How the engine renames RoPE types before it reads them (``patch_rope_scaling_dict``).
_RENAMED = {"su": "longrope", "mrope": "default"}

#: transformers' Gemma3TextConfig default, which the published Gemma 3 27B config omits.
_GEMMA3_POSITIONS = 131072


def context_length(text: dict[str, Any], model_type: str, where: str) -> ContextLength:
    """The length keys of the text config ``text``, and its RoPE scaling."""
    positions, key = None, None
    for name in LENGTH_KEYS:
        value = optional_int(text, name, where)
        if value is not None and (positions is None or value < positions):
            positions, key = value, name
    model_max_length = optional_int(text, "model_max_length", where)
    if model_max_length is not None:
        positions, key = model_max_length, "model_max_length"
    gemma3 = "gemma3" in model_type
    if positions is None and model_type in ("gemma3", "gemma3_text"):
        positions, key = _GEMMA3_POSITIONS, "max_position_embeddings (Gemma3TextConfig default)"
    return ContextLength(
        positions=positions,
        key=key,
        model_max_length=model_max_length,
        rope=_rope(text, where),
        original_max_position_embeddings=optional_int(
            text, "original_max_position_embeddings", where
        ),
        prescaled=gemma3,
    )


def _rope(text: dict[str, Any], where: str) -> tuple[RopeScaling, ...]:
    """Each RoPE parameter set: ``rope_parameters`` (transformers 5), else ``rope_scaling``;
    per layer type when nested (``{"full_attention": {...}, "sliding_attention": {...}}``)."""
    for key in ("rope_parameters", "rope_scaling"):
        value = text.get(key)
        if value is None or value == {}:
            continue
        if not isinstance(value, dict):
            raise InputError(
                f"{where}: {key} must be an object, got {type_name(value)}",
                hint=f'e.g. "{key}": {{"rope_type": "yarn", "factor": 4.0}}',
            )
        nested = all(isinstance(v, dict) for v in value.values())
        entries = list(value.items()) if nested else [(key, value)]
        return tuple(_entry(entry, f"{where}: {name}") for name, entry in entries if entry)
    return ()


def _entry(entry: dict[str, Any], where: str) -> RopeScaling:
    raw = entry.get("rope_type", entry.get("type"))
    if raw is None:
        rope_type = "default"
    elif isinstance(raw, str):
        rope_type = _RENAMED.get(raw, raw)
    else:
        raise InputError(
            f"{where}: rope_type must be a string, got {shown(raw)}",
            hint='e.g. "rope_type": "yarn"',
        )
    factor = entry.get("factor")
    if factor is not None and (
        isinstance(factor, bool)
        or not isinstance(factor, int | float)
        or not 0 < factor <= MAX_VALUE
    ):
        raise InputError(
            f"{where}: factor must be a positive number, got {shown(factor)}",
            hint='e.g. "factor": 4.0',
        )
    return RopeScaling(
        rope_type=rope_type,
        factor=None if factor is None else float(factor),
        original_max_position_embeddings=optional_int(
            entry, "original_max_position_embeddings", where
        ),
    )


def assumed_length(context: ContextLength) -> list[Finding]:
    """The engine's note when a config names no length: it assumes 2048 tokens."""
    if context.positions is not None:
        return []
    return [
        Finding(
            "no-max-model-len",
            "info",
            "the config has none of the length keys vLLM reads (max_position_embeddings, "
            "n_positions, max_seq_len, seq_length, …), so vLLM assumes a maximum of 2048 tokens "
            "unless --max-model-len is given",
            hint="pass --max-model-len (or set max_position_embeddings in the config)",
        )
    ]
