"""mmcli's layer-config format (JSON or TOML), and :func:`load_config`, which also reads a
Hugging Face ``config.json`` (see :mod:`mmcli.kv.hf_config`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmcli.dtypes import kv_dtype
from mmcli.errors import InputError
from mmcli.kv.hf_config import parse_hf_config
from mmcli.kv.model import (
    DEFAULT_BLOCK_SIZE,
    FULL_TYPES,
    KNOWN_TYPES,
    NO_KV_TYPES,
    SLIDING_TYPES,
    ModelConfig,
)
from mmcli.kv.readers import read_json_or_toml
from mmcli.kv.spec import FullAttentionSpec, KVCacheSpec, Layer, SlidingWindowSpec
from mmcli.kv.values import positive_int, string, type_name

_LAYER_KEYS = frozenset(
    {
        "name",
        "attention",
        "num_kv_heads",
        "head_size",
        "dtype",
        "block_size",
        "sliding_window",
        "kv_sharing_target",
    }
)
_DEFAULT_KEYS = _LAYER_KEYS - {"name", "kv_sharing_target"}
_TOP_KEYS = frozenset({"name", "defaults", "layers", "max_model_len"})


def read_document(path: Path) -> dict[str, Any]:
    """Parse a JSON or TOML config file (by suffix) into a dict, with clear errors."""
    doc = read_json_or_toml(path)
    if not isinstance(doc, dict):
        raise InputError(
            f"{path}: expected an object at the top level, got {type_name(doc)}",
            hint="a layer config is an object with 'layers'; an HF config has 'num_hidden_layers'",
        )
    return doc


def load_config(path: Path) -> ModelConfig:
    """Read an mmcli layer config or a Hugging Face ``config.json``."""
    doc = read_document(path)
    if "layers" in doc:
        return parse_mmcli_config(doc, default_name=path.stem, where=str(path))
    if "num_hidden_layers" in doc or isinstance(doc.get("text_config"), dict):
        return parse_hf_config(doc, default_name=path.stem, where=str(path))
    raise InputError(
        f"{path}: neither an mmcli layer config (no 'layers' list) nor a Hugging Face config "
        "(no 'num_hidden_layers')",
        hint="see `mmcli kv-share plan --help` for the layer config format",
    )


# --- mmcli layer config -------------------------------------------------------------------


def _make_spec(
    attention: str, values: dict[str, Any], where: str
) -> tuple[KVCacheSpec | None, str]:
    """The KV spec of one layer from its merged settings; the attention kind it resolved to."""
    kind = attention.strip().lower()
    if kind in NO_KV_TYPES:
        return None, "none"
    for key in ("num_kv_heads", "head_size"):
        if values.get(key) is None:
            raise InputError(
                f"{where}: {key} is missing",
                hint=f"set {key} on the layer or in 'defaults'",
            )
    heads = positive_int(values["num_kv_heads"], f"{where}.num_kv_heads")
    head = positive_int(values["head_size"], f"{where}.head_size")
    raw_block = values.get("block_size")
    block = positive_int(
        DEFAULT_BLOCK_SIZE if raw_block is None else raw_block, f"{where}.block_size"
    )
    if values.get("dtype") is None:
        raise InputError(f"{where}: dtype is missing", hint='set dtype, e.g. "bfloat16"')
    dtype = kv_dtype(string(values["dtype"], f"{where}.dtype"), where=f"{where}.dtype")
    if kind in FULL_TYPES:
        return FullAttentionSpec(block, heads, head, dtype), "full"
    if kind in SLIDING_TYPES:
        window = values.get("sliding_window")
        if window is None:
            raise InputError(
                f"{where}: a sliding layer needs sliding_window",
                hint="set sliding_window (tokens) on the layer or in 'defaults'",
            )
        window = positive_int(window, f"{where}.sliding_window")
        return SlidingWindowSpec(block, heads, head, dtype, window), "sliding"
    raise InputError(
        f"{where}: unknown attention type {attention!r}",
        hint=f"use one of: {KNOWN_TYPES}",
    )


def _check_keys(obj: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise InputError(
            f"{where}: unknown key {extra[0]!r}",
            hint=f"allowed keys: {', '.join(sorted(allowed))}",
        )


def parse_mmcli_config(doc: dict[str, Any], *, default_name: str, where: str) -> ModelConfig:
    """Build a :class:`ModelConfig` from an mmcli layer config document."""
    _check_keys(doc, _TOP_KEYS, where)
    name = string(doc.get("name", default_name), f"{where}: name")
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        raise InputError(
            f"{where}: defaults must be an object, got {type_name(defaults)}",
            hint='e.g. "defaults": {"num_kv_heads": 8, "head_size": 64, "dtype": "float16"}',
        )
    _check_keys(defaults, _DEFAULT_KEYS, f"{where}: defaults")
    raw_layers = doc["layers"]
    if not isinstance(raw_layers, list) or not raw_layers:
        raise InputError(
            f"{where}: layers must be a non-empty list, got {type_name(raw_layers)}",
            hint='each entry is an object with at least a "name"',
        )
    max_len = doc.get("max_model_len")
    if max_len is not None:
        max_len = positive_int(max_len, f"{where}: max_model_len")
    layers: list[Layer] = []
    cache: dict[Any, tuple[KVCacheSpec | None, str]] = {}
    for i, raw in enumerate(raw_layers):
        loc = f"{where}: layers[{i}]"
        if not isinstance(raw, dict):
            raise InputError(
                f"{loc} must be an object, got {type_name(raw)}",
                hint='e.g. {"name": "model.layers.0.self_attn.attn"}',
            )
        _check_keys(raw, _LAYER_KEYS, loc)
        layer_name = string(raw.get("name"), f"{loc}.name")
        attention = string(raw.get("attention", defaults.get("attention", "full")), loc)
        if "sliding_window" in raw and raw["sliding_window"] is not None:
            if attention.strip().lower() not in SLIDING_TYPES:
                raise InputError(
                    f"{loc} ({layer_name}) sets sliding_window but its attention is {attention}",
                    hint='add "attention": "sliding", or remove sliding_window',
                )
        # Most layers repeat the defaults: build each distinct spec once (100,000-layer
        # configs stay fast). The defaults are fixed, so a layer's own settings are the key
        # (with their types: 1 and true must not share an entry).
        try:
            key: Any = (attention, *((k, type(v), v) for k, v in raw.items() if k in _DEFAULT_KEYS))
            made = cache.get(key)
        except TypeError:  # an unhashable value (a list, an object): no caching
            key, made = None, None
        if made is None:
            values = {k: raw.get(k, defaults.get(k)) for k in _DEFAULT_KEYS}
            made = _make_spec(attention, values, f"{loc} ({layer_name})")
            if key is not None:
                cache[key] = made
        spec, kind = made
        target = raw.get("kv_sharing_target")
        if target is not None:
            target = string(target, f"{loc}.kv_sharing_target")
        layers.append(Layer(layer_name, spec, target, attention if kind == "none" else kind))
    return ModelConfig(name=name, source="mmcli", layers=layers, max_model_len=max_len)
