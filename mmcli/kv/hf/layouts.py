"""Which layers of a Hugging Face config hold KV, a state, or nothing: the layout rules.

Each rule mirrors how transformers' config class derives ``layer_types`` (or the hybrid
pattern vLLM's model code reads), model type by model type (see docs/kv-configs.md):

* ``layer_types`` when given; otherwise
* Nemotron-H ``hybrid_override_pattern`` ('M' Mamba2, '*' attention, '-' MLP, 'E' MoE);
* Zamba2 ``layers_block_type`` ('mamba', 'hybrid' = Mamba2 plus attention), Jamba-style
  ``layers_block_type`` ('attention', 'mamba');
* Jamba ``attn_layer_period`` / ``attn_layer_offset`` (attention iff i % period == offset);
* Bamba ``attn_layer_indices``; MiniMax ``attn_type_list`` (1 full, 0 linear attention);
* Qwen3-Next / Qwen3.5 ``full_attention_interval`` (full iff (i + 1) % interval == 0;
  default 4);
* Llama 4 ``attention_chunk_size`` with ``no_rope_layers`` (chunked iff entry != 0;
  default: every ``no_rope_layer_interval``-th (4th) layer is full);
* Falcon-H1: every layer runs attention and Mamba2 side by side;
* sliding windows: Gemma 2 alternating (sliding for even i), Gemma 3 / Gemma 4
  ``sliding_window_pattern`` (default 6, Gemma 3n 5; Gemma 4 always 6, its last layer
  forced full, as in transformers), Olmo 3
  (3 sliding : 1 full; window 4096 when unset), Mistral (window 4096 when the key is
  absent), Qwen2-family ``use_sliding_window`` / ``max_window_layers``, and otherwise the
  engine's default: the window applies to every layer.
"""

from __future__ import annotations

from typing import Any

from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.inputs.values import optional_int, shown
from mmcli.kv.model import (
    CHUNKED_TYPES,
    FULL_TYPES,
    KNOWN_TYPES,
    NO_KV_TYPES,
    SLIDING_TYPES,
    STATE_TYPES,
)

#: Layer kinds of a layout beyond ``layer_types``' own: a Zamba2 hybrid layer (Mamba2 plus
#: an attention block) and a Falcon-H1 layer (attention and Mamba2 in parallel).
HYBRID = "hybrid"
PARALLEL_HYBRID = "parallel_hybrid"

_NEMOTRON_PATTERN = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_QWEN_SLIDING = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next")
#: Model types whose transformers config class gives a window when the config has none
#: (``MistralConfig.sliding_window`` = 4096, ``Olmo3Config`` 4096, Gemma's below).
DEFAULT_WINDOW = {
    "mistral": 4096,
    "olmo3": 4096,
    "gemma2": 4096,
    "gemma3": 4096,
    "gemma3_text": 4096,
    "gemma4": 512,
    "gemma4_text": 512,
}


def _int_list(text: dict[str, Any], key: str, where: str) -> list[int]:
    value = text[key]
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise InputError(
            f"{where}: {key} must be a list of integers, got {shown(value)}",
            hint=f"write {key} as a JSON list of whole numbers",
        )
    return value


def _str_list(text: dict[str, Any], key: str, n: int, where: str) -> list[str]:
    value = text[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(
            f"{where}: {key} must be a list of strings",
            hint='e.g. ["sliding_attention", "full_attention", …]',
        )
    if len(value) != n:
        raise InputError(
            f"{where}: {key} has {len(value)} entries but num_hidden_layers is {n}",
            hint="give one entry per layer",
        )
    return list(value)


#: ``layer_types`` spellings of sparse-attention checkpoints (GLM-5.2's), which vLLM counts as
#: full attention (``_ATTENTION_LAYER_TYPES``, config/model.py, 0.34): an MLA layer (with its
#: indexer cache when the config sets ``index_topk``).
SPARSE_TYPES = frozenset({"deepseek_sparse_attention", "indexed_attention"})


def _checked_layer_types(text: dict[str, Any], n: int, where: str) -> list[str]:
    types = _str_list(text, "layer_types", n, where)
    if SPARSE_TYPES.intersection(types):
        types = ["full_attention" if t in SPARSE_TYPES else t for t in types]
    known = FULL_TYPES | SLIDING_TYPES | CHUNKED_TYPES | STATE_TYPES | NO_KV_TYPES
    for i, t in enumerate(types):
        if t not in known:
            raise InputError(
                f"{where}: layer_types[{i}] is {t!r}, a layer type mmcli does not know",
                hint=f"known types: {KNOWN_TYPES}",
            )
    return types


#: Attention-free models (transformers' MambaConfig, FalconMambaConfig, Mamba2Config) and the
#: state every layer keeps; vLLM serves them with ``MambaForCausalLM`` / ``Mamba2ForCausalLM``.
ATTENTION_FREE = {"mamba": "mamba1", "falcon_mamba": "mamba1", "mamba2": "mamba2"}


def layer_kinds(
    text: dict[str, Any], model_type: str, n: int, where: str
) -> tuple[list[str], list[Finding]]:
    """Each layer's kind (a ``layer_types``-style name) and notes on the rule applied."""
    if model_type in ATTENTION_FREE:  # every layer a Mamba mixer, no attention at all
        return [ATTENTION_FREE[model_type]] * n, []
    if text.get("layer_types") is not None:
        kinds = _checked_layer_types(text, n, where)
        if model_type.startswith("gemma4"):
            return _gemma4_kinds(kinds, where)
        return kinds, []
    if model_type == "lfm2":  # Lfm2Config: full attention at full_attn_idxs, else conv
        idxs = text.get("full_attn_idxs")
        full = set(range(n)) if idxs is None else set(_int_list(text, "full_attn_idxs", where))
        return ["full_attention" if i in full else "conv" for i in range(n)], []
    if text.get("hybrid_override_pattern") is not None:
        pattern = text["hybrid_override_pattern"]
        if not isinstance(pattern, str) or len(pattern) != n:
            raise InputError(
                f"{where}: hybrid_override_pattern must be a string of {n} characters (one "
                f"per layer), got {shown(pattern)}",
                hint="'M' Mamba2, '*' attention, '-' MLP, 'E' MoE",
            )
        for i, c in enumerate(pattern):
            if c not in _NEMOTRON_PATTERN:
                raise InputError(
                    f"{where}: hybrid_override_pattern[{i}] is {c!r}, a block mmcli does not know",
                    hint="known: 'M' Mamba2, '*' attention, '-' MLP, 'E' MoE",
                )
        return [_NEMOTRON_PATTERN[c] for c in pattern], []
    if text.get("layers_block_type") is not None:
        kinds = _str_list(text, "layers_block_type", n, where)
        allowed = {"mamba", "attention", HYBRID}
        for i, k in enumerate(kinds):
            if k not in allowed:
                raise InputError(
                    f"{where}: layers_block_type[{i}] is {k!r}, a block type mmcli does not know",
                    hint="known: mamba, attention, hybrid (Zamba2)",
                )
        return kinds, []
    if text.get("attn_layer_period") is not None or text.get("attn_layer_offset") is not None:
        period = optional_int(text, "attn_layer_period", where)
        offset = optional_int(text, "attn_layer_offset", where, minimum=0)
        if period is None or offset is None:
            raise InputError(
                f"{where}: attn_layer_period and attn_layer_offset must both be set",
                hint="Jamba: layer i is attention iff i % attn_layer_period == attn_layer_offset",
            )
        return ["attention" if i % period == offset else "mamba" for i in range(n)], []
    if text.get("attn_layer_indices") is not None:
        indices = set(_int_list(text, "attn_layer_indices", where))
        bad = sorted(i for i in indices if not 0 <= i < n)
        if bad:
            raise InputError(
                f"{where}: attn_layer_indices names layer {bad[0]}, but the model has {n} layers",
                hint="indices count from 0",
            )
        return ["attention" if i in indices else "mamba" for i in range(n)], []
    if text.get("attn_type_list") is not None:
        flags = _int_list(text, "attn_type_list", where)
        if len(flags) != n or any(f not in (0, 1) for f in flags):
            raise InputError(
                f"{where}: attn_type_list must hold {n} entries of 0 (linear attention) or 1 "
                "(full attention)",
                hint="MiniMax: one entry per layer",
            )
        return ["full_attention" if f else "linear_attention" for f in flags], []
    if text.get("full_attention_interval") is not None or model_type.startswith(
        ("qwen3_next", "qwen3_5")
    ):
        interval = optional_int(text, "full_attention_interval", where) or 4
        kinds = [
            "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)
        ]
        return kinds, []
    if model_type.startswith("falcon_h1"):
        return [PARALLEL_HYBRID] * n, []
    if text.get("attention_chunk_size") is not None:
        return _llama4_kinds(text, model_type, n, where), []
    return _sliding_kinds(text, model_type, n, where)


def _llama4_kinds(text: dict[str, Any], model_type: str, n: int, where: str) -> list[str]:
    if not model_type.startswith("llama4"):
        raise InputError(
            f"{where}: attention_chunk_size is set, but which layers chunk is model code "
            f"mmcli mirrors only for Llama 4 (model_type {model_type or 'not set'!r})",
            hint="add layer_types (chunked_attention / full_attention per layer) or describe "
            "the layers in an mmcli layer config",
        )
    if text.get("no_rope_layers") is not None:
        flags = _int_list(text, "no_rope_layers", where)
        if len(flags) != n:
            raise InputError(
                f"{where}: no_rope_layers has {len(flags)} entries but num_hidden_layers is {n}",
                hint="give one entry per layer (0: a full NoPE layer)",
            )
    else:
        interval = optional_int(text, "no_rope_layer_interval", where) or 4
        flags = [int((i + 1) % interval != 0) for i in range(n)]
    return ["chunked_attention" if f else "full_attention" for f in flags]


def sliding_window(text: dict[str, Any], model_type: str, where: str) -> int | None:
    """The config's window (None: no sliding layers); 0 means none, as the engine reads it."""
    if "sliding_window" not in text and model_type in DEFAULT_WINDOW:
        return DEFAULT_WINDOW[model_type]
    window = optional_int(text, "sliding_window", where, minimum=0)
    return window or None


def _sliding_kinds(
    text: dict[str, Any], model_type: str, n: int, where: str
) -> tuple[list[str], list[Finding]]:
    if model_type.startswith("gemma4"):  # Gemma4TextConfig: 5 sliding : 1 full, any window
        kinds = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
        kinds, notes = _gemma4_kinds(kinds, where)
        return kinds, _gemma4_pattern_note(text, where) + notes
    window = sliding_window(text, model_type, where)
    if model_type in _QWEN_SLIDING or "use_sliding_window" in text:
        if not text.get("use_sliding_window"):
            return ["full_attention"] * n, []
        first = optional_int(text, "max_window_layers", where, minimum=0)
        first = 28 if first is None else first
        if window is None or first >= n:
            return ["full_attention"] * n, []
        if first > 0:
            raise InputError(
                f"{where}: use_sliding_window is true and max_window_layers is {first}, less "
                f"than num_hidden_layers {n}: only layers {first}… would slide, which the "
                "engine refuses ('Sliding window for some but all layers is not supported')",
                hint="set max_window_layers to 0 (every layer slides) or num_hidden_layers",
            )
        return ["sliding_attention"] * n, []
    if window is None:
        return ["full_attention"] * n, []
    pattern = optional_int(text, "sliding_window_pattern", where)
    if model_type == "gemma2":
        pattern = 2 if pattern is None else pattern
    if model_type in ("gemma3", "gemma3_text"):
        pattern = 6 if pattern is None else pattern
    if model_type.startswith("gemma3n"):  # Gemma3nTextConfig: every 5th layer full
        pattern = 5 if pattern is None else pattern
    if model_type == "olmo3":  # Olmo3Config: three sliding layers, then a full one
        pattern = 4 if pattern is None else pattern
    if pattern is not None:
        kinds = [
            "full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)
        ]
        return kinds, []
    note = Finding(
        "sliding-all-layers",
        "info",
        f"sliding_window is {window} and the config gives no per-layer types, so the engine "
        "applies the window to every layer",
        hint="add layer_types if only some layers slide",
    )
    return ["sliding_attention"] * n, [note]


def _gemma4_kinds(kinds: list[str], where: str) -> tuple[list[str], list[Finding]]:
    """Gemma 4's layer types as transformers' ``Gemma4TextConfig`` builds them: only sliding
    and full layers, and the last layer forced to full (the engine reads what it built)."""
    for i, kind in enumerate(kinds):
        if kind not in ("sliding_attention", "full_attention"):
            raise InputError(
                f"{where}: layer_types[{i}] is {kind!r}, but vLLM's Gemma 4 model code knows "
                "only sliding_attention and full_attention layers",
                hint="write each Gemma 4 layer as sliding_attention or full_attention",
            )
    if kinds and kinds[-1] != "full_attention":
        kinds = [*kinds[:-1], "full_attention"]
        return kinds, [
            Finding(
                "gemma4-last-layer-full",
                "info",
                f"layer {len(kinds) - 1}, the config's last, is sliding, but transformers' "
                "Gemma 4 config forces the last layer to full attention, and the engine "
                "builds what transformers built: planned as a full layer",
                hint="write full_attention as the last entry of layer_types to match",
            )
        ]
    return kinds, []


def _gemma4_pattern_note(text: dict[str, Any], where: str) -> list[Finding]:
    """transformers' Gemma 4 config builds missing ``layer_types`` as 5 sliding : 1 full
    whatever ``sliding_window_pattern`` says."""
    pattern = optional_int(text, "sliding_window_pattern", where)
    if pattern is None or pattern == 6:
        return []
    return [
        Finding(
            "gemma4-pattern-ignored",
            "warning",
            f"sliding_window_pattern is {pattern}, but transformers' Gemma 4 config ignores it "
            "and makes every 6th layer full when layer_types is missing: planned that way",
            hint="give layer_types to plan another layout",
        )
    ]
