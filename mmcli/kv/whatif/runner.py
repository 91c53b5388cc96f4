"""Which vLLM model runner a release starts a model on by default (``VllmConfig``'s
``use_v2_model_runner``, config/vllm.py), and whether that runner's CUDA-graph estimate is
taken off the KV memory. The rules and the architecture lists are release rows
(``v2_runner_default``, ``v2_runner_architectures``, ``v2_cudagraph_estimate``).

Not modelled: ``VLLM_USE_V2_MODEL_RUNNER`` set by hand, a pooling (non-generating) model, a
``--quantization`` given on the command line, and the features the V2 runner does not support
yet (it then falls back to V1); the planned model is taken to generate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules

#: The config keys that give a model's routed experts (vLLM's ``is_moe``: experts > 0).
EXPERT_KEYS: Final = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")


def _text(doc: dict[str, Any]) -> dict[str, Any]:
    text = doc.get("text_config")
    return text if isinstance(text, dict) else doc


def is_moe(doc: dict[str, Any]) -> bool:
    """Whether the config routes tokens to experts."""
    text = _text(doc)
    values = [text.get(k, doc.get(k)) for k in EXPERT_KEYS]
    return any(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)


def state_kind(doc: dict[str, Any]) -> str:
    """ "attention-free" (every layer a state), "hybrid" (states beside attention) or ""."""
    from mmcli.kv.hf.layouts import ATTENTION_FREE, HYBRID, PARALLEL_HYBRID, layer_kinds
    from mmcli.kv.model import STATE_TYPES

    text = _text(doc)
    model_type = str(text.get("model_type", doc.get("model_type", "")))
    if model_type in ATTENTION_FREE:
        return "attention-free"
    layers = text.get("num_hidden_layers", doc.get("num_hidden_layers"))
    if not isinstance(layers, int) or layers <= 0:
        return ""
    kinds, _ = layer_kinds(text, model_type, layers, "config")
    states = STATE_TYPES | {HYBRID, PARALLEL_HYBRID}
    if all(k in states for k in kinds):
        return "attention-free"
    return "hybrid" if any(k in states for k in kinds) else ""


def default_runner(doc: dict[str, Any], rules: EngineRules) -> str:
    """``"v1"`` or ``"v2"``: the model runner ``rules``' release starts this config on."""
    rule = rules.v2_runner_default
    if rule in ("always", "only"):
        return "v2"
    if rule == "never":
        return "v1"
    archs = doc.get("architectures")
    names = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    listed = any(a in rules.v2_runner_architectures for a in names)
    moe = is_moe(doc)
    if rule == "listed-dense":
        v2 = listed and not moe and "quantization_config" not in doc
    elif rule == "listed":
        v2 = listed
    else:  # "dense-or-listed"; "hybrid-listed" takes a hybrid only when it is listed
        kind = state_kind(doc)
        hybrid_refused = kind == "hybrid" and (rule == "dense-or-listed" or not listed)
        v2 = not hybrid_refused and kind != "attention-free" and (listed or not moe)
    return "v2" if v2 else "v1"


def graph_term_subtracted(runner: str, rules: EngineRules) -> bool:
    """Whether ``determine_available_memory`` takes a non-zero CUDA-graph estimate off."""
    if not rules.cudagraph_estimate_subtracted:
        return False
    if runner == "v1":
        return True
    estimate = rules.v2_cudagraph_estimate
    return estimate == "profiled" or (
        estimate == "unless-extensible" and not rules.extensible_kv_cache
    )
