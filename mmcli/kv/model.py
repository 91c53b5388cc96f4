"""The planner's view of a model config: its layers, sharing map, and the layer types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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
