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
    window = text.get("sliding_window")
    if not isinstance(window, int) or "sliding_attention" not in kinds:
        raise _refuse(rules, "a config without sliding_window / sliding layers is not mirrored")
    swa_dim = int(text["head_dim"])
    full_dim = int(text.get("global_head_dim") or swa_dim)
    if int(text.get("v_head_dim", full_dim)) != full_dim:
        raise _refuse(rules, "a v_head_dim other than the full layers' head_dim is not mirrored")
    swa_heads = max(1, int(text["num_key_value_heads"]) // tp)
    full_heads = max(1, int(text.get("num_global_key_value_heads") or swa_heads * tp) // tp)
    return Gemma4Shapes(
        kinds.count("full_attention"),
        kinds.count("sliding_attention"),
        full_heads * full_dim * dtype_bytes,
        swa_heads * swa_dim * dtype_bytes,
        window - 1,
    )
