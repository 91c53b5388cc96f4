"""The planner's view of a model config: its layers, sharing map, and the layer types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from mmcli.findings import Finding
from mmcli.kv.spec import Layer

DEFAULT_BLOCK_SIZE = 16

#: Layer types (HF ``layer_types`` values, mmcli ``attention`` values) and what they mean.
FULL_TYPES = frozenset({"full", "full_attention", "attention", "global", "global_attention"})
SLIDING_TYPES = frozenset({"sliding", "sliding_attention", "sliding_window", "local"})
CHUNKED_TYPES = frozenset({"chunked", "chunked_attention", "chunked_local_attention"})
MLA_TYPES = frozenset({"mla"})
#: Types of a layer that keeps a recurrent state (Mamba, Gated DeltaNet, linear attention).
STATE_TYPES = frozenset(
    {"mamba", "mamba1", "mamba2", "linear_attention", "gdn", "linear", "conv", "short_conv"}
)
#: Types of a layer that keeps nothing (an MLP or MoE block in a layer pattern).
NO_KV_TYPES = frozenset({"none", "mlp", "moe"})
KNOWN_TYPES = (
    "full_attention, sliding_attention, chunked_attention, mla, a state type ("
    + ", ".join(sorted(STATE_TYPES))
    + "), or a type without cache ("
    + ", ".join(sorted(NO_KV_TYPES))
    + ")"
)


@dataclass(frozen=True)
class RopeScaling:
    """One RoPE scaling entry of a config (``rope_scaling`` / ``rope_parameters``)."""

    #: The type as the engine normalises it (``type`` read as ``rope_type``, ``su`` as
    #: ``longrope``, ``mrope`` as ``default``).
    rope_type: str
    factor: float | None
    original_max_position_embeddings: int | None


@dataclass(frozen=True)
class ContextLength:
    """What an HF config says of the longest sequence, before the engine's rules apply."""

    #: The smallest of the length keys vLLM reads (``model_max_length`` wins when set), or
    #: None when the config has none of them.
    positions: int | None
    #: The key that value came from (named in a refusal).
    key: str | None
    #: ``model_max_length``: a longer ``--max-model-len`` up to it is accepted.
    model_max_length: int | None = None
    rope: tuple[RopeScaling, ...] = ()
    #: The text config's own ``original_max_position_embeddings`` (LongRoPE's default).
    original_max_position_embeddings: int | None = None
    #: Gemma 3: the length is already scaled by RoPE, so no factor is applied.
    prescaled: bool = False


@dataclass(frozen=True)
class CheckpointKV:
    """A KV-cache quantization declared by the checkpoint (:mod:`mmcli.kv.hf.quant`)."""

    #: "modelopt" (``kv_cache_quant_algo`` / a ModelOpt ``kv_cache_scheme``) or "scheme" (an
    #: llm-compressor ``kv_cache_scheme``).
    kind: Literal["modelopt", "scheme"]
    #: The cache dtype it stands for (``fp8``), or None for a value vLLM does not map (it
    #: then falls back to ``auto``).
    dtype: str | None
    #: Where it was read, for messages: ``modelopt kv_cache_quant_algo 'FP8'``.
    source: str


@dataclass(frozen=True)
class SparseAttention:
    """A DeepSeek sparse-attention (DSA) model: an indexer cache beside every MLA cache."""

    #: The class vLLM serves it with (``DeepseekV32ForCausalLM``, ``GlmMoeDsaForCausalLM``).
    architecture: str
    #: The model family, for messages (``DeepSeek V3.2``, ``GLM-5``).
    name: str


@dataclass
class ModelConfig:
    """A model's layers with the sharing map its config implies, and what reading it found."""

    name: str
    source: Literal["mmcli", "hf"]
    layers: list[Layer]
    max_model_len: int | None = None
    num_attention_heads: int | None = None
    #: The HF ``model_type`` (of the text config), or "" for an mmcli layer config.
    model_type: str = ""
    #: Notes about reading the config (dtype choices); kept when ``--map`` overrides.
    findings: list[Finding] = field(default_factory=list)
    #: Notes about the map the config implies (disabled CLA, rule disagreements).
    map_findings: list[Finding] = field(default_factory=list)
    #: False when the engine does not apply the config's sharing map (Hunyuan CLA): the map
    #: is then a what-if, and the engine's own figures are those without sharing.
    engine_shares: bool = True
    #: Layers the model adds only when asked (DeepSeek multi-token-prediction layers, which
    #: vLLM builds only for ``--speculative-config`` method ``deepseek_mtp``/``mtp``); each
    #: has the target's spec. Not part of ``layers``.
    mtp_layers: list[Layer] = field(default_factory=list)
    #: The MTP layer count vLLM's speculative config reads from the config (its default for
    #: ``num_speculative_tokens``); None: the config names none, so that must be given.
    mtp_n_predict: int | None = None
    #: How the engine picks the SSM / recurrent state dtype for this model type when
    #: ``--mamba-ssm-cache-dtype`` is ``auto``: ``(first release, dtype)`` pairs, oldest
    #: first. A release older than the first pair uses the state's conv dtype (the model
    #: dtype). The state specs in ``layers`` carry the newest pair's dtype. Empty: the specs'
    #: ``ssm_dtype`` holds for every release (the config names it, or no rule exists).
    ssm_dtype_by_release: tuple[tuple[str, str], ...] = ()
    #: The Mamba ``chunk_size`` of the config (vLLM aligns the attention block size to it in
    #: its prefix-caching "all" mode), or None.
    mamba_chunk_size: int | None = None
    #: Gemma 4 ``attention_k_eq_v``: full layers compute V as K. The engine still allocates
    #: both K and V slots, so the spec is unchanged; recorded for the report.
    attention_k_eq_v: bool = False
    #: Each layer's decoder-layer index, what pipeline stages split (None: its position in
    #: ``layers``; a hybrid block of two layers has one index).
    decoder_index: list[int] | None = None
    #: An HF config's length facts, from which the engine derives its maximum and default
    #: ``max_model_len`` (:mod:`mmcli.kv.engine.max_len`); None for an mmcli layer config,
    #: whose ``max_model_len`` is taken as written.
    context: ContextLength | None = None
    #: The checkpoint's declared KV-cache quantization, if any.
    checkpoint_kv: CheckpointKV | None = None
    #: Multimodal prefix-LM models (Gemma 4 with ``use_bidirectional_attention: "vision"``):
    #: the most tokens one multimodal item takes, which one batch must hold.
    mm_item_tokens: int | None = None
    #: The config's first ``architectures`` entry (the model class vLLM looks up), or "".
    architecture: str = ""
    #: An mmcli layer config that sets ``block_size`` (on a layer or in its defaults): its
    #: blocks are kept; else a plan takes the release's default block size.
    block_size_given: bool = False
    #: DeepSeek sparse attention: ``layers`` (and ``mtp_layers``) hold an indexer cache before
    #: each MLA layer (None: no indexer).
    sparse_attention: SparseAttention | None = None


def architecture(doc: dict[str, Any]) -> str:
    """The config's first ``architectures`` entry (the model class an engine looks up), or ""."""
    archs = doc.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return ""
