"""Read a Hugging Face ``config.json``: layer specs, and the sharing map the model implies."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mmcli.dtypes import kv_dtype
from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.model import (
    DEFAULT_BLOCK_SIZE,
    FULL_TYPES,
    KNOWN_TYPES,
    NO_KV_TYPES,
    SLIDING_TYPES,
    ModelConfig,
)
from mmcli.kv.spec import FullAttentionSpec, KVCacheSpec, Layer, SlidingWindowSpec
from mmcli.kv.values import optional_int, shown, string, type_name
from mmcli.text import index_ranges

#: More layers than any model has; a larger ``num_hidden_layers`` is a corrupt config.
MAX_LAYERS = 1_000_000


def _hf_layer_name(index: int, kind: str) -> str:
    if kind in NO_KV_TYPES:
        return f"model.layers.{index}.{kind}"
    return f"model.layers.{index}.self_attn.attn"


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


def _hf_layer_types(text: dict[str, Any], num_layers: int, where: str) -> list[str]:
    types = text.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise InputError(
                f"{where}: layer_types must be a list of strings",
                hint='e.g. ["sliding_attention", "full_attention", …]',
            )
        if len(types) != num_layers:
            raise InputError(
                f"{where}: layer_types has {len(types)} entries but num_hidden_layers is "
                f"{num_layers}",
                hint="give one layer type per layer",
            )
        for i, t in enumerate(types):
            if t not in FULL_TYPES | SLIDING_TYPES | NO_KV_TYPES:
                raise InputError(
                    f"{where}: layer_types[{i}] is {t!r}, a layer type mmcli does not know",
                    hint=f"known types: {KNOWN_TYPES}",
                )
        return list(types)
    window = text.get("sliding_window")
    if window is None or text.get("use_sliding_window") is False:
        return ["full_attention"] * num_layers
    pattern = optional_int(text, "sliding_window_pattern", where)
    if pattern is not None:
        # Gemma 3's rule: every pattern-th layer attends globally, the others slide.
        return [
            "full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
            for i in range(num_layers)
        ]
    raise InputError(
        f"{where}: sliding_window is {window!r} but the config has no layer_types, so which "
        "layers slide depends on model code mmcli does not mirror",
        hint="add layer_types to the config (one entry per layer), or describe the layers in "
        "an mmcli layer config",
    )


def parse_hf_config(doc: dict[str, Any], *, default_name: str, where: str) -> ModelConfig:
    """Build a :class:`ModelConfig` from a Hugging Face ``config.json`` document."""
    text = doc.get("text_config")
    if text is None:
        text = doc
    elif not isinstance(text, dict):
        raise InputError(
            f"{where}: text_config must be an object, got {type_name(text)}",
            hint="text_config holds the language model's settings",
        )
    if text.get("kv_lora_rank") is not None:
        raise InputError(
            f"{where}: the config uses multi-head latent attention (kv_lora_rank), whose KV "
            "cache mmcli does not plan",
            hint="describe the layers in an mmcli layer config instead",
        )
    if text.get("attention_chunk_size") is not None and text.get("layer_types") is None:
        raise InputError(
            f"{where}: the config uses chunked local attention (attention_chunk_size), whose "
            "layer layout and KV cache mmcli does not plan",
            hint="describe the layers in an mmcli layer config instead",
        )
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
    heads = optional_int(text, "num_attention_heads", where)
    kv_heads = optional_int(text, "num_key_value_heads", where)
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
    dtype, findings = _hf_dtype(doc, text, where)
    types = _hf_layer_types(text, num_layers, where)
    window = None
    if any(t in SLIDING_TYPES for t in types):
        window = optional_int(text, "sliding_window", where)
        if window is None:
            raise InputError(
                f"{where}: layer_types has sliding layers but sliding_window is not set",
                hint="set sliding_window (tokens)",
            )
    full = FullAttentionSpec(DEFAULT_BLOCK_SIZE, kv_heads, head_dim, dtype)
    sliding = (
        SlidingWindowSpec(DEFAULT_BLOCK_SIZE, kv_heads, head_dim, dtype, window)
        if window is not None
        else None
    )
    specs: list[KVCacheSpec | None] = [
        full if t in FULL_TYPES else sliding if t in SLIDING_TYPES else None for t in types
    ]
    model_type = str(text.get("model_type") or doc.get("model_type") or "")
    targets, map_findings = _hf_sharing(text, types, model_type, where)
    layers = [Layer(_hf_layer_name(i, t), specs[i], None, t) for i, t in enumerate(types)]
    layers = [
        replace(layer, kv_sharing_target=layers[t].name) if t is not None else layer
        for layer, t in zip(layers, targets, strict=True)
    ]
    name = doc.get("_name_or_path") or doc.get("model_type") or default_name
    return ModelConfig(
        name=str(name),
        source="hf",
        layers=layers,
        max_model_len=optional_int(text, "max_position_embeddings", where),
        num_attention_heads=heads,
        findings=findings,
        map_findings=map_findings,
    )


def _hf_sharing(
    text: dict[str, Any], types: list[str], model_type: str, where: str
) -> tuple[list[int | None], list[Finding]]:
    """Each layer's target index (None: it owns its cache) as the config implies."""
    n = len(types)
    findings: list[Finding] = []
    targets: list[int | None] = [None] * n
    shared = optional_int(text, "num_kv_shared_layers", where, minimum=0) or 0
    use_cla = text.get("use_cla")
    if use_cla is not None and not isinstance(use_cla, bool):
        raise InputError(
            f"{where}: use_cla must be true or false, got {shown(use_cla)}",
            hint="write true or false without quotes",
        )
    factor = optional_int(text, "cla_share_factor", where)
    if use_cla and shared:
        raise InputError(
            f"{where}: both use_cla and num_kv_shared_layers ({shared}) are set; mmcli cannot "
            "tell which sharing rule the model applies",
            hint="pass the intended map with --map",
        )
    if shared:
        if shared >= n:
            raise InputError(
                f"{where}: num_kv_shared_layers is {shared} but the model has {n} layers, so "
                "no layer would own a cache",
                hint="num_kv_shared_layers must be smaller than num_hidden_layers",
            )
        first = n - shared
        last_of: dict[str, int] = {}
        for j in range(first):
            last_of[types[j]] = j
        disagree: dict[tuple[str, int, int], list[int]] = {}
        gemma3n = model_type.startswith("gemma3n")
        for i in range(first, n):
            kind = types[i]
            if kind in NO_KV_TYPES:
                continue
            if kind not in last_of:
                raise InputError(
                    f"{where}: layer {i} ({kind}) is among the last {shared} shared layers but "
                    f"no non-shared layer is {kind}, so it has nothing to share",
                    hint="the shared layers' target is the last non-shared layer of the same "
                    "type; check layer_types and num_kv_shared_layers",
                )
            targets[i] = last_of[kind]
            if gemma3n:
                engine = first - 2 if kind in SLIDING_TYPES else first - 1
                if engine != last_of[kind]:
                    disagree.setdefault((kind, last_of[kind], engine), []).append(i)
        for (kind, general, engine), layers in disagree.items():
            engine_kind = types[engine] if 0 <= engine < n else "no such layer"
            findings.append(
                Finding(
                    "rule-disagreement",
                    "warning",
                    f"shared {kind} layer{'s' if len(layers) > 1 else ''} "
                    f"{index_ranges(layers, limit=100)}: the general rule "
                    "(last "
                    f"non-shared {kind} layer) gives layer {general}, but vLLM's Gemma 3n "
                    f"model code hard-codes layer {engine} ({engine_kind})",
                    hint="vLLM assumes the last non-shared layer is full and the one before "
                    "it sliding; this plan follows the general rule (pass --map to use the "
                    "other)",
                    layer=_hf_layer_name(layers[0], kind),
                )
            )
    if use_cla:
        if factor is None:
            raise InputError(
                f"{where}: use_cla is true but cla_share_factor is not set",
                hint="cla_share_factor f: layer i owns its cache iff i % f == 0",
            )
        for i in range(n):
            if i % factor:
                targets[i] = i - i % factor
    elif factor is not None and factor > 1:
        findings.append(
            Finding(
                "sharing-disabled",
                "warning",
                f"cla_share_factor is {factor} but use_cla is "
                f"{'false' if use_cla is False else 'not set'}, so no layer shares its cache",
                hint="set use_cla to true if the model shares KV across layers",
            )
        )
    return targets, findings
