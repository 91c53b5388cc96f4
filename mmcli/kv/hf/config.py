"""Read a Hugging Face ``config.json`` as the engine reads it: layer specs, states, and the
sharing map the model implies.

Layouts (which layer holds what) are in :mod:`mmcli.kv.hf.layouts`, recurrent states in
:mod:`mmcli.kv.hf.states`, the keys read or refused in :mod:`mmcli.kv.hf.keys`.
"""

from __future__ import annotations

from functools import cached_property
from itertools import repeat
from typing import Any

from mmcli.dtypes import kv_dtype
from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.hf.context import assumed_length, context_length
from mmcli.kv.hf.dsa import sparse_attention, with_indexers
from mmcli.kv.hf.keys import refuse_unmodelled
from mmcli.kv.hf.layouts import (
    ATTENTION_FREE,
    HYBRID,
    PARALLEL_HYBRID,
    layer_kinds,
    sliding_window,
)
from mmcli.kv.hf.quant import checkpoint_kv
from mmcli.kv.hf.sharing import engine_names, hf_layer_name, hf_sharing
from mmcli.kv.hf.states import ssm_dtype_rules, state_spec
from mmcli.kv.inputs.values import optional_int, shown, string, type_name
from mmcli.kv.model import (
    CHUNKED_TYPES,
    DEFAULT_BLOCK_SIZE,
    FULL_TYPES,
    NO_KV_TYPES,
    SLIDING_TYPES,
    STATE_TYPES,
    ModelConfig,
    architecture,
)
from mmcli.kv.spec import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    Layer,
    MLAAttentionSpec,
    SlidingWindowSpec,
)
from mmcli.kv.state import MambaSpec

#: More layers than any model has; a larger ``num_hidden_layers`` is a corrupt config.
MAX_LAYERS = 1_000_000


def _hf_dtype(doc: dict[str, Any], text: dict[str, Any], where: str) -> tuple[str, list[Finding]]:
    raw = None
    for source in (text, doc):
        for key in ("torch_dtype", "dtype"):
            if source.get(key) is not None:
                raw = source[key]
                break
        if raw is not None:
            break
    if raw is None:
        note = (
            "the config names no torch_dtype; the engine then treats the model as float32 and "
            "serves it (and its KV cache) in bfloat16"
        )
        return "bfloat16", [
            Finding("dtype", "info", note, hint="pass --kv-dtype to plan another KV dtype")
        ]
    dtype = kv_dtype(string(raw, f"{where}: torch_dtype"), where=f"{where}: torch_dtype")
    if dtype == "float32":
        note = (
            "torch_dtype is float32; the engine's default dtype serves float32 checkpoints in "
            "bfloat16, so the KV cache is planned as bfloat16"
        )
        return "bfloat16", [
            Finding("dtype", "info", note, hint="pass --kv-dtype fp32 to plan a float32 cache")
        ]
    return dtype, []


def _text_config(doc: dict[str, Any], where: str) -> dict[str, Any]:
    text = doc.get("text_config")
    if text is None:
        return doc
    if not isinstance(text, dict):
        raise InputError(
            f"{where}: text_config must be an object, got {type_name(text)}",
            hint="text_config holds the language model's settings",
        )
    return text


def _num_layers(text: dict[str, Any], where: str) -> int:
    num_layers = optional_int(text, "num_hidden_layers", where)
    if num_layers is None:
        raise InputError(f"{where}: num_hidden_layers is missing", hint="it counts the layers")
    if num_layers > MAX_LAYERS:
        # One entry per layer is built below: refuse before allocating what a typo declares.
        raise InputError(
            f"{where}: num_hidden_layers is {num_layers}, more than the {MAX_LAYERS:,} layers "
            "mmcli plans",
            hint="check num_hidden_layers; it counts the decoder layers",
        )
    return num_layers


def _geometry(text: dict[str, Any], model_type: str, where: str) -> tuple[int | None, int, int]:
    """(attention heads, KV heads, head size) of the attention layers."""
    heads = optional_int(text, "num_attention_heads", where)
    kv_heads = optional_int(text, "num_key_value_heads", where)
    if model_type == "falcon":
        kv_heads = _falcon_kv_heads(text, heads, where)
    if kv_heads is None:
        if heads is None:
            raise InputError(
                f"{where}: neither num_key_value_heads nor num_attention_heads is set",
                hint="the KV head count comes from num_key_value_heads",
            )
        kv_heads = heads
    head_dim = optional_int(text, "head_dim", where)
    if head_dim is None:
        head_dim = optional_int(text, "attention_head_dim", where)
    if head_dim is None:
        hidden = optional_int(text, "hidden_size", where)
        if hidden is None or heads is None:
            raise InputError(
                f"{where}: no head_dim, and hidden_size / num_attention_heads is not available",
                hint="set head_dim in the config",
            )
        if hidden % heads:
            raise InputError(
                f"{where}: no head_dim, and hidden_size {hidden} is not divisible by "
                f"num_attention_heads {heads}",
                hint="set head_dim in the config",
            )
        head_dim = hidden // heads
    return heads, kv_heads, head_dim


def _falcon_kv_heads(text: dict[str, Any], heads: int | None, where: str) -> int | None:
    """Falcon's KV heads as vLLM's model code takes them: ``num_kv_heads`` under the new
    decoder architecture (40B/180B; default: every head), else 1 with ``multi_query``
    (7B; FalconConfig's default is true), else every head."""
    if text.get("new_decoder_architecture") is True:
        return optional_int(text, "num_kv_heads", where) or heads
    if text.get("multi_query", True) is True:
        return 1
    return heads


class _Specs:
    """Builds (and reuses) each layer kind's spec for one config."""

    def __init__(
        self, doc: dict[str, Any], text: dict[str, Any], model_type: str, where: str
    ) -> None:
        self.text, self.model_type, self.where = text, model_type, where
        if model_type in ATTENTION_FREE:  # no attention layer: no attention geometry
            self.heads, self.kv_heads, self.head_dim = None, 0, 0
        else:
            self.heads, self.kv_heads, self.head_dim = _geometry(text, model_type, where)
        self.dtype, self.findings = _hf_dtype(doc, text, where)
        self.ssm_dtype, self.ssm_rules = ssm_dtype_rules(text, model_type, self.dtype, where)
        self.used_state = False
        self._cache: dict[str, KVCacheSpec | MambaSpec] = {}

    @cached_property
    def full(self) -> KVCacheSpec:
        text, where = self.text, self.where
        rank = optional_int(text, "kv_lora_rank", where)
        if rank is not None:
            rope = optional_int(text, "qk_rope_head_dim", where)
            if rope is None:
                raise InputError(
                    f"{where}: kv_lora_rank is set (multi-head latent attention) but "
                    "qk_rope_head_dim is not",
                    hint="an MLA layer caches kv_lora_rank + qk_rope_head_dim per token",
                )
            return MLAAttentionSpec(DEFAULT_BLOCK_SIZE, 1, rank + rope, self.dtype)
        if self.model_type.startswith("gemma4"):
            # transformers' Gemma 4 config: full layers use global_head_dim (default 512) and,
            # with attention_k_eq_v, num_global_key_value_heads.
            head = optional_int(text, "global_head_dim", where) or 512
            heads = self.kv_heads
            if text.get("attention_k_eq_v") is True:
                heads = optional_int(text, "num_global_key_value_heads", where) or heads
            return FullAttentionSpec(DEFAULT_BLOCK_SIZE, heads, head, self.dtype)
        return FullAttentionSpec(DEFAULT_BLOCK_SIZE, self.kv_heads, self.head_dim, self.dtype)

    def attention(self, kind: str) -> KVCacheSpec:
        if kind in FULL_TYPES:
            return self.full
        made = self._cache.get(kind)
        if isinstance(made, KVCacheSpec):
            return made
        text, where = self.text, self.where
        spec: KVCacheSpec
        if kind in SLIDING_TYPES:
            window = sliding_window(text, self.model_type, where)
            if window is None:
                raise InputError(
                    f"{where}: the config has sliding layers but sliding_window is not set",
                    hint="set sliding_window (tokens)",
                )
            spec = SlidingWindowSpec(
                DEFAULT_BLOCK_SIZE, self.kv_heads, self.head_dim, self.dtype, window
            )
        elif kind in CHUNKED_TYPES:
            chunk = optional_int(text, "attention_chunk_size", where)
            if chunk is None:
                raise InputError(
                    f"{where}: the config has chunked layers but attention_chunk_size is not set",
                    hint="set attention_chunk_size (tokens)",
                )
            spec = ChunkedLocalAttentionSpec(
                DEFAULT_BLOCK_SIZE, self.kv_heads, self.head_dim, self.dtype, chunk
            )
        else:  # a Zamba2 hybrid block: its own attention geometry, no GQA
            heads = self.heads or self.kv_heads
            head = optional_int(text, "attention_head_dim", where)
            if head is None:
                hidden = optional_int(text, "attention_hidden_size", where)
                if hidden is None:
                    hidden = 2 * (optional_int(text, "hidden_size", where) or 0)
                head = hidden // heads
            spec = FullAttentionSpec(DEFAULT_BLOCK_SIZE, heads, head, self.dtype)
        self._cache[kind] = spec
        return spec

    def state(self, kind: str) -> MambaSpec:
        made = self._cache.get("state:" + kind)
        if isinstance(made, MambaSpec):
            return made
        spec = state_spec(kind, self.text, self.model_type, self.dtype, self.ssm_dtype, self.where)
        self.used_state = True
        self._cache["state:" + kind] = spec
        return spec


def _build_layers(kinds: list[str], specs: _Specs) -> tuple[list[Layer], list[int | None]]:
    """The layers, and for each HF layer index the position of its attention layer."""
    if HYBRID not in kinds and PARALLEL_HYBRID not in kinds:
        return _one_per_index(kinds, specs)
    layers: list[Layer] = []
    attention_at: list[int | None] = []
    for i, kind in enumerate(kinds):
        if kind in (HYBRID, PARALLEL_HYBRID):
            mamba = Layer(f"model.layers.{i}.mamba", specs.state("mamba"), None, "mamba")
            attn = specs.attention(HYBRID) if kind == HYBRID else specs.full
            attention = Layer(hf_layer_name(i, kind), attn, None, "attention")
            pair = [attention, mamba] if kind == PARALLEL_HYBRID else [mamba, attention]
            attention_at.append(len(layers) + pair.index(attention))
            layers.extend(pair)
            continue
        spec: KVCacheSpec | MambaSpec | None
        if kind in STATE_TYPES:
            spec = specs.state(kind)
        elif kind in NO_KV_TYPES:
            spec = None
        else:
            spec = specs.attention(kind)
        attention_at.append(len(layers) if isinstance(spec, KVCacheSpec) else None)
        layers.append(Layer(hf_layer_name(i, kind), spec, None, kind))
    return layers, attention_at


def _one_per_index(kinds: list[str], specs: _Specs) -> tuple[list[Layer], list[int | None]]:
    """One layer per HF index, built per layer type (a million layers have a handful)."""
    spec_of: dict[str, KVCacheSpec | MambaSpec | None] = {}
    suffix_of: dict[str, str] = {}
    for kind in dict.fromkeys(kinds):
        if kind in STATE_TYPES:
            spec_of[kind] = specs.state(kind)
        elif kind in NO_KV_TYPES:
            spec_of[kind] = None
        else:
            spec_of[kind] = specs.attention(kind)
        suffix_of[kind] = hf_layer_name(0, kind).removeprefix("model.layers.0")
    names = [f"model.layers.{i}{suffix_of[kind]}" for i, kind in enumerate(kinds)]
    per_layer = list(map(spec_of.__getitem__, kinds))
    layers = list(map(Layer, names, per_layer, repeat(None), kinds))
    attention = {kind: isinstance(spec, KVCacheSpec) for kind, spec in spec_of.items()}
    return layers, [i if attention[kind] else None for i, kind in enumerate(kinds)]


def _mtp_layers(
    text: dict[str, Any], n: int, specs: _Specs, where: str
) -> tuple[list[Layer], int | None]:
    """The multi-token-prediction layers vLLM's MTP drafter builds, each a full-attention
    layer of the model's geometry, and the count its speculative config reads (None: unset).

    Qwen3.5/3.6 read ``mtp_num_hidden_layers``, others ``num_nextn_predict_layers``; the
    Qwen3-Next and Qwen3.5 MTP models build one layer when the key is missing
    (``qwen3_next_mtp.py``, ``qwen3_5_mtp.py``, ``SpeculativeConfig``; vLLM 0.32)."""
    qwen = specs.model_type.startswith(("qwen3_next", "qwen3_5"))
    key = "num_nextn_predict_layers"
    if specs.model_type.startswith("qwen3_5"):
        key = "mtp_num_hidden_layers"
    named = optional_int(text, key, where, minimum=0)
    count = named if named is not None else (1 if qwen else 0)
    if count > n:
        raise InputError(
            f"{where}: {key} is {count}, more than the model's {n} layers: a drafter of that "
            "many layers is not a model mmcli plans",
            hint=f"check {key} (published models have 1 to 3)",
        )
    layers = [
        Layer(f"model.layers.{n + k}.self_attn.attn", specs.full, None, "mtp") for k in range(count)
    ]
    return layers, named


def parse_hf_config(doc: dict[str, Any], *, default_name: str, where: str) -> ModelConfig:
    """Build a :class:`ModelConfig` from a Hugging Face ``config.json`` document."""
    text = _text_config(doc, where)
    refuse_unmodelled(doc, text, where)
    num_layers = _num_layers(text, where)
    model_type = str(text.get("model_type") or doc.get("model_type") or "")
    kinds, notes = layer_kinds(text, model_type, num_layers, where)
    specs = _Specs(doc, text, model_type, where)
    layers, attention_at = _build_layers(kinds, specs)
    # Hybrid blocks are two layers under one decoder index (model.layers.{i}.…).
    decoder_index = None
    if len(layers) != len(kinds):
        decoder_index = [int(layer.name.split(".")[2]) for layer in layers]
    targets, map_findings, engine_shares = hf_sharing(text, kinds, model_type, where)
    for i, target in enumerate(targets):
        if target is None:
            continue
        pos, tpos = attention_at[i], attention_at[target]
        if pos is not None and tpos is not None:
            owner = layers[pos]  # built directly: replace() costs 4x (a million layers)
            layers[pos] = Layer(owner.name, owner.spec, layers[tpos].name, owner.kind)
    name = doc.get("_name_or_path") or doc.get("model_type") or default_name
    k_eq_v = text.get("attention_k_eq_v")
    if k_eq_v is not None and not isinstance(k_eq_v, bool):
        raise InputError(
            f"{where}: attention_k_eq_v must be true or false, got {shown(k_eq_v)}",
            hint="write true or false without quotes",
        )
    context = context_length(text, model_type, where)
    mtp_layers, mtp_n_predict = _mtp_layers(text, num_layers, specs, where)
    dsa = sparse_attention(doc, text, where)
    if dsa is not None:  # an indexer cache before each MLA layer (mmcli.kv.hf.dsa)
        layers, decoder_index = with_indexers(layers, dsa[1])
        mtp_layers = with_indexers(mtp_layers, dsa[1])[0]
    chunk = optional_int(text, "mamba_chunk_size", where) or optional_int(text, "chunk_size", where)
    return ModelConfig(
        name=str(name),
        source="hf",
        layers=engine_names(layers, architecture(doc), model_type),
        max_model_len=context.positions,
        num_attention_heads=specs.heads,
        model_type=model_type,
        findings=specs.findings + notes + assumed_length(context),
        map_findings=map_findings,
        engine_shares=engine_shares,
        mtp_layers=mtp_layers,
        mtp_n_predict=mtp_n_predict,
        ssm_dtype_by_release=specs.ssm_rules if specs.used_state else (),
        mamba_chunk_size=chunk if specs.used_state else None,
        attention_k_eq_v=bool(k_eq_v),
        decoder_index=decoder_index,
        context=context,
        checkpoint_kv=checkpoint_kv(doc, text, where),
        mm_item_tokens=_mm_item_tokens(doc, text, model_type),
        architecture=architecture(doc),
        sparse_attention=None if dsa is None else dsa[0],
    )


#: Gemma 4's largest multimodal item: a video of 32 sampled frames, each at most 70 soft
#: tokens plus begin/end and ~6 timestamp tokens (vLLM's gemma4_mm.py ``_VIDEO_MAX_FRAMES``,
#: ``_VIDEO_MAX_SOFT_TOKENS``; an image takes at most 280, audio fewer).
GEMMA4_VIDEO_TOKENS = 32 * (70 + 2 + 6)


def _mm_item_tokens(doc: dict[str, Any], text: dict[str, Any], model_type: str) -> int | None:
    """The tokens of the largest multimodal item of a multimodal prefix-LM model, which
    vLLM fits into one batch; None for any other model."""
    multimodal = text is not doc and isinstance(doc.get("vision_config"), dict)
    vision_prefix = text.get("use_bidirectional_attention") == "vision"
    if multimodal and vision_prefix and model_type.startswith("gemma4"):
        return GEMMA4_VIDEO_TOKENS
    return None
