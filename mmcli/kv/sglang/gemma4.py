"""Gemma 4's hybrid sliding-window pool on SGLang (Gemma4ForConditionalGeneration).

SGLang puts Gemma 4 on ``is_hybrid_swa_model`` from 0.5.11 (configs/model_config.py:1555) and
sizes its two pools with the hybrid SWA configurator GPT-OSS's use (sglang/swa.py). What differs
is the geometry: utils/hf_transformers/config.py (0.5.11 :176 – :199, the same block to 0.5.21
:218 – :247) turns the config around: the full layers take ``global_head_dim`` and
``num_global_key_value_heads`` as head_dim / num_key_value_heads (v_head_dim = head_dim), the
sliding layers the config's ``head_dim`` and ``num_key_value_heads`` (swa_head_dim,
swa_v_head_dim, swa_num_key_value_heads); model_executor/pool_configurator.py's cell is
``F·n_full + r·S·n_swa`` with F, S = kv_heads/tp · (head_dim + v_head_dim) · dtype bytes of
each kind (0.5.11 :206 – :236). ``attention_k_eq_v`` saves nothing there: the pool keeps a V
buffer of v_head_dim for every layer (memory_pool.py:813, :907 in 0.5.11). The full and sliding
layers are the config's layer_types (model_config.py:1607 ``get_hybrid_layer_ids``); the window
of the admission floor is ``sliding_window - 1`` (models/gemma4_mm.py:240).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.sglang.releases import newest_release
from mmcli.kv.sglang.rules import SglangRules
from mmcli.kv.sglang.swa_lists import GEMMA4

_KINDS = ("full_attention", "sliding_attention")
#: transformers 5.19.0 Gemma4TextConfig: ``kwargs.pop("global_head_dim", 512)`` (:210).
_GLOBAL_HEAD_DIM = 512


def _refuse(rules: SglangRules, what: str) -> InputError:
    return InputError(
        f"SGLang {rules.release}: Gemma 4 ({GEMMA4}): {what}",
        hint="plan it for vLLM (--engine vllm)",
    )


@dataclass(frozen=True)
class Gemma4Shapes:
    """Gemma 4's two kinds of layer on one rank (sglang/swa.py builds the pools' layout)."""

    full_layers: int
    swa_layers: int
    #: K (or V) bytes of one token in one full / sliding layer.
    full_half: int
    swa_half: int
    #: SGLang's sliding_window_size: ``sliding_window - 1``.
    window: int


def gemma4_shapes(
    text: dict[str, Any], rules: SglangRules, *, tp: int, dtype_bytes: int
) -> Gemma4Shapes:
    """Gemma 4's layers on one of ``tp`` ranks; refuses what is not mirrored."""
    if not rules.gemma4_swa_mirrored:
        newest = newest_release(lambda r: r.gemma4_swa_mirrored)
        raise InputError(
            f"SGLang {rules.release}: Gemma 4's full / sliding layer shapes come from "
            "transformers' per-layer config (utils/hf_transformers/config.py "
            f"_gemma4_attention_shapes), which is not mirrored (newest mirrored: {newest})",
            hint=f"pass --sglang-version {newest}, or plan it for vLLM (--engine vllm)",
        )
    kinds = text.get("layer_types")
    layers = text.get("num_hidden_layers")
    if not isinstance(kinds, list) or len(kinds) != layers or set(kinds) - set(_KINDS):
        raise _refuse(
            rules,
            "layer_types must give num_hidden_layers entries, each full_attention or "
            "sliding_attention (SGLang takes the pools' layers from it)",
        )
    if kinds[-1] != "full_attention" or text.get("use_bidirectional_attention") == "all":
        # transformers' Gemma4TextConfig turns the last layer into a full one and halves
        # sliding_window under "all" (5.12.1 configuration_gemma4.py:195, :208; 5.19.0 :188, :201).
        raise _refuse(
            rules,
            "a last layer other than full_attention, or use_bidirectional_attention 'all' "
            "(transformers rewrites layer_types / sliding_window) is not mirrored",
        )
    window = text.get("sliding_window")
    if not isinstance(window, int) or "sliding_attention" not in kinds:
        raise _refuse(rules, "a config without sliding_window / sliding layers is not mirrored")
    swa_dim = int(text["head_dim"])
    swa_heads = int(text["num_key_value_heads"])
    if rules.gemma4_per_layer_shapes:
        full_dim, full_heads = _per_layer_full_shape(text, rules, swa_heads)
    elif not isinstance(text.get("global_head_dim"), int):
        # transformers' Gemma4TextConfig defaults it (global_head_dim: int = 512 in 5.12.1
        # configuration_gemma4.py:183); the older pins are not read.
        raise _refuse(rules, "a config without an integer global_head_dim is not mirrored")
    else:
        full_dim = int(text["global_head_dim"])
        full_heads = int(text.get("num_global_key_value_heads") or swa_heads)
    if int(text.get("v_head_dim", full_dim)) != full_dim:
        raise _refuse(rules, "a v_head_dim other than the full layers' head_dim is not mirrored")
    return Gemma4Shapes(
        kinds.count("full_attention"),
        kinds.count("sliding_attention"),
        max(1, full_heads // tp) * full_dim * dtype_bytes,
        max(1, swa_heads // tp) * swa_dim * dtype_bytes,
        window - 1,
    )


def _per_layer_full_shape(
    text: dict[str, Any], rules: SglangRules, swa_heads: int
) -> tuple[int, int]:
    """The full layers' (head_dim, KV heads) as transformers 5.19.0's Gemma4TextConfig states
    them in its per_layer_config (configuration_gemma4.py:210 – :225), which SGLang's
    ``_gemma4_attention_shapes`` reads back: head_dim is ``global_head_dim`` (512 when the
    config has none), the KV heads ``num_global_key_value_heads`` only under
    ``attention_k_eq_v`` (else the sliding layers' num_key_value_heads)."""
    if "per_layer_config" in text:
        raise _refuse(rules, "a config that states its own per_layer_config is not mirrored")
    full_dim = text.get("global_head_dim", _GLOBAL_HEAD_DIM)
    global_heads = text.get("num_global_key_value_heads")
    k_eq_v = text.get("attention_k_eq_v", False)
    if not isinstance(full_dim, int) or not isinstance(k_eq_v, bool):
        raise _refuse(rules, "global_head_dim / attention_k_eq_v of another type is not mirrored")
    if not k_eq_v or global_heads is None:
        return full_dim, swa_heads
    return full_dim, int(global_heads)
