"""The planner's view of a model config, and the strict value checks its readers share."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.spec import Layer

DEFAULT_BLOCK_SIZE = 16

#: Layer types (HF ``layer_types`` values, mmcli ``attention`` values) and what they mean.
FULL_TYPES = frozenset({"full", "full_attention", "attention", "global", "global_attention"})
SLIDING_TYPES = frozenset({"sliding", "sliding_attention", "sliding_window", "local"})
NO_KV_TYPES = frozenset(
    {"none", "linear_attention", "mamba", "mamba2", "ssm", "state_space", "conv", "recurrent"}
)
KNOWN_TYPES = (
    "full_attention, sliding_attention, or a type without KV cache ("
    + ", ".join(sorted(NO_KV_TYPES))
    + ")"
)


@dataclass
class ModelConfig:
    """A model's layers with the sharing map its config implies, and what reading it found."""

    name: str
    source: Literal["mmcli", "hf"]
    layers: list[Layer]
    max_model_len: int | None = None
    num_attention_heads: int | None = None
    #: Notes about reading the config (dtype choices); kept when ``--map`` overrides.
    findings: list[Finding] = field(default_factory=list)
    #: Notes about the map the config implies (disabled CLA, rule disagreements).
    map_findings: list[Finding] = field(default_factory=list)


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def shown(value: Any) -> str:
    """``str '8'``, ``bool true``, ``null``: a value as the user wrote it, with its type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"bool {json.dumps(value)}"
    text = json.dumps(value) if isinstance(value, str) else repr(value)
    return f"{type(value).__name__} {text}"


def positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(
            f"{where} must be a positive integer, got {shown(value)}",
            hint="write a whole number greater than 0, without quotes",
        )
    if value <= 0:
        raise InputError(
            f"{where} must be a positive integer, got {value}",
            hint="sizes and counts must be greater than 0",
        )
    return value


def string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(
            f"{where} must be a non-empty string, got {shown(value)}",
            hint="write it as a quoted string",
        )
    return value


def optional_int(text: dict[str, Any], key: str, where: str, *, minimum: int = 1) -> int | None:
    value = text.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(
            f"{where}: {key} must be an integer, got {shown(value)}",
            hint="write a whole number without quotes",
        )
    if value < minimum:
        raise InputError(
            f"{where}: {key} must be at least {minimum}, got {value}",
            hint="sizes and counts cannot be zero or negative",
        )
    return value
