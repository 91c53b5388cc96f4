"""mmcli's layer-config format (JSON or TOML), and :func:`load_config`, which also reads a
Hugging Face ``config.json`` (see :mod:`mmcli.kv.hf.config`).

Each layer (or ``defaults``) names its ``attention``: ``full``, ``sliding`` (with
``sliding_window``), ``chunked`` (with ``attention_chunk_size``), ``mla`` (``head_size`` =
kv_lora_rank + qk_rope_head_dim, one latent head; ``ds_mla`` for vLLM's ``fp8_ds_mla``),
``mamba`` (with a ``state`` object: ``kind`` mamba1 / mamba2 / gdn / linear, its dimensions,
``dtype`` and ``ssm_dtype``), or ``none`` (no cache). docs/kv-configs.md has the full format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmcli.dtypes import kv_dtype
from mmcli.errors import InputError
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.inputs.readers import read_json_or_toml
from mmcli.kv.inputs.values import positive_int, shown, string, type_name
from mmcli.kv.model import (
    CHUNKED_TYPES,
    DEFAULT_BLOCK_SIZE,
    FULL_TYPES,
    KNOWN_TYPES,
    MLA_TYPES,
    NO_KV_TYPES,
    SLIDING_TYPES,
    STATE_TYPES,
    ModelConfig,
)
from mmcli.kv.spec import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    Layer,
    MLAAttentionSpec,
    SlidingWindowSpec,
)
from mmcli.kv.state import STATE_KINDS, MambaSpec

_LAYER_KEYS = frozenset(
    {
        "name",
        "attention",
        "num_kv_heads",
        "head_size",
        "dtype",
        "block_size",
        "sliding_window",
        "attention_chunk_size",
        "ds_mla",
        "state",
        "kv_sharing_target",
    }
)
_STATE_KEYS = frozenset(
    {"kind", "dtype", "ssm_dtype"} | {k for v in STATE_KINDS.values() for k in v}
)
_DEFAULT_KEYS = _LAYER_KEYS - {"name", "kv_sharing_target"}
_TOP_KEYS = frozenset({"name", "defaults", "layers", "max_model_len"})
#: Layer keys that only one attention kind takes.
_KIND_KEYS = (
    ("sliding_window", SLIDING_TYPES, "sliding"),
    ("attention_chunk_size", CHUNKED_TYPES, "chunked"),
    ("ds_mla", MLA_TYPES, "mla"),
    ("state", STATE_TYPES, "mamba"),
)


def read_document(path: Path) -> dict[str, Any]:
    """Parse a JSON or TOML config file (by suffix) into a dict, with clear errors."""
    doc = read_json_or_toml(path)
    if not isinstance(doc, dict):
        raise InputError(
            f"{path}: expected an object at the top level, got {type_name(doc)}",
            hint="a layer config is an object with 'layers'; an HF config has 'num_hidden_layers'",
        )
    if isinstance(doc.get("llm_config"), dict) and "text_config" not in doc:
        # vLLM remaps a remote-code config's llm_config (InternVL, NVLM-D, ...) to text_config
        # (transformers_utils/config.py _CONFIG_ATTRS_MAPPING, every release from 0.10.0).
        doc["text_config"] = doc["llm_config"]
    return doc


def load_config(path: Path) -> ModelConfig:
    """Read an mmcli layer config or a Hugging Face ``config.json``."""
    return load_document(path)[0]


def load_document(path: Path) -> tuple[ModelConfig, dict[str, Any]]:
    """The config at ``path`` and, for a Hugging Face config, its document (else {}): read
    once for every engine planned."""
    doc = read_document(path)
    config = _parse(path, doc)
    return config, doc if config.source == "hf" else {}


def _parse(path: Path, doc: dict[str, Any]) -> ModelConfig:
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


def _state_spec(values: dict[str, Any], where: str) -> MambaSpec:
    """A ``mamba`` layer's state from its ``state`` object."""
    raw = values.get("state")
    if not isinstance(raw, dict):
        raise InputError(
            f"{where}: a mamba layer needs a state object, got {type_name(raw)}",
            hint='e.g. "state": {"kind": "mamba2", "intermediate": 8192, "state_size": 128, '
            '"conv_kernel": 4, "num_heads": 128, "head_dim": 64, "n_groups": 8}; '
            'use "attention": "none" for a layer that keeps nothing',
        )
    _check_keys(raw, _STATE_KEYS, f"{where}.state")
    kind = string(raw.get("kind"), f"{where}.state.kind")
    needed = STATE_KINDS.get(kind)
    if needed is None:
        raise InputError(
            f"{where}.state: unknown state kind {kind!r}",
            hint=f"use one of: {', '.join(STATE_KINDS)}",
        )
    unused = sorted(set(raw) - {"kind", "dtype", "ssm_dtype", *needed})
    if unused:
        raise InputError(
            f"{where}.state: {unused[0]} is not a dimension of a {kind} state",
            hint=f"a {kind} state takes {', '.join(needed)}",
        )
    dims = {}
    for key in needed:
        if raw.get(key) is None:
            raise InputError(
                f"{where}.state: {key} is missing", hint=f"a {kind} state takes {', '.join(needed)}"
            )
        dims[key] = positive_int(raw[key], f"{where}.state.{key}")
    conv = raw.get("dtype", values.get("dtype"))
    if conv is None:
        raise InputError(f"{where}.state: dtype is missing", hint='set dtype, e.g. "bfloat16"')
    dtype = kv_dtype(string(conv, f"{where}.state.dtype"), where=f"{where}.state.dtype")
    ssm = raw.get("ssm_dtype")
    ssm_dtype = (
        dtype
        if ssm is None
        else kv_dtype(string(ssm, f"{where}.state.ssm_dtype"), where=f"{where}.state.ssm_dtype")
    )
    return MambaSpec(kind, dtype, ssm_dtype, **dims)


def _make_spec(
    attention: str, values: dict[str, Any], where: str
) -> tuple[KVCacheSpec | MambaSpec | None, str]:
    """The spec of one layer from its merged settings; the attention kind it resolved to."""
    kind = attention.strip().lower()
    if kind in NO_KV_TYPES:
        return None, "none"
    if kind in STATE_TYPES:
        return _state_spec(values, where), "mamba"
    known = FULL_TYPES | SLIDING_TYPES | CHUNKED_TYPES | MLA_TYPES
    if kind not in known:
        raise InputError(
            f"{where}: unknown attention type {attention!r}",
            hint=f"use one of: {KNOWN_TYPES}",
        )
    if kind in MLA_TYPES and values.get("num_kv_heads") is None:
        values = {**values, "num_kv_heads": 1}  # one latent "head"
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
    if kind in MLA_TYPES:
        ds_mla = values.get("ds_mla")
        if ds_mla is not None and not isinstance(ds_mla, bool):
            raise InputError(
                f"{where}.ds_mla must be true or false, got {shown(ds_mla)}",
                hint="true: vLLM's fp8_ds_mla cache (656 bytes per token)",
            )
        return MLAAttentionSpec(block, heads, head, dtype, bool(ds_mla)), "mla"
    if kind in CHUNKED_TYPES:
        chunk = values.get("attention_chunk_size")
        if chunk is None:
            raise InputError(
                f"{where}: a chunked layer needs attention_chunk_size",
                hint="set attention_chunk_size (tokens) on the layer or in 'defaults'",
            )
        chunk = positive_int(chunk, f"{where}.attention_chunk_size")
        return ChunkedLocalAttentionSpec(block, heads, head, dtype, chunk), "chunked"
    window = values.get("sliding_window")
    if window is None:
        raise InputError(
            f"{where}: a sliding layer needs sliding_window",
            hint="set sliding_window (tokens) on the layer or in 'defaults'",
        )
    window = positive_int(window, f"{where}.sliding_window")
    return SlidingWindowSpec(block, heads, head, dtype, window), "sliding"


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
    cache: dict[Any, tuple[KVCacheSpec | MambaSpec | None, str]] = {}
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
        for own, kinds, kind_name in _KIND_KEYS:
            if raw.get(own) is not None and attention.strip().lower() not in kinds:
                raise InputError(
                    f"{loc} ({layer_name}) sets {own} but its attention is {attention}",
                    hint=f'add "attention": "{kind_name}", or remove {own}',
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
    given = defaults.get("block_size") is not None or any(
        isinstance(raw, dict) and raw.get("block_size") is not None for raw in raw_layers
    )
    return ModelConfig(
        name=name, source="mmcli", layers=layers, max_model_len=max_len, block_size_given=given
    )
