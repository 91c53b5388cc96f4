"""Which models SGLang treats as multimodal, and whether their prefill CUDA graphs stay on, for
the releases whose row sets ``multimodal_by_arch`` (the arch-list tables and the default
``enable_multimodal`` of their configs/model_config.py); the rows before them carry their own
list (``multimodal_archs``) and reading (``multimodal_rule``).

``ModelConfig.is_multimodal`` is ``enable_multimodal and not language_model_only and (the
architecture is in multimodal_model_archs, or the config has a text sub-config)``; an unset
``--enable-multimodal`` is False for a few architectures (Gemma 3, Llama 4, …). Keyed on that,
not on ``vision_config``: the ViT scaling of the default fraction alone needs a vision_config.
"""

from __future__ import annotations

from typing import Any

from mmcli.errors import InputError
from mmcli.kv.sglang.rules import SglangRules

#: 0.5.23 arg_groups/overrides.py:310: MuseSpark's KV cache defaults to fp8_e4m3 (and its own
#: hooks, muse_spark_hook.py / moe_hook.py:62, change the launch): not mirrored.
_OWN_DEFAULTS = ("MuseSparkForConditionalGeneration",)
#: ``ModelConfig.__init__``'s ``mm_disabled_models``: an unset --enable-multimodal is False
#: (the same three from 0.5.3; Inkling joins in 0.5.16, configs/model_config.py:313, the first
#: release that serves it, so the list holds for every release).
_MM_OFF_BY_DEFAULT = (
    "Gemma3ForConditionalGeneration",
    "Llama4ForConditionalGeneration",
    "Step3VLForConditionalGeneration",
    "InklingForConditionalGeneration",
)
#: get_hf_text_config's sub-configs: a config with one is multimodal (has_multimodal_subconfig).
_TEXT_SUBCONFIGS = ("thinker_config", "llm_config", "language_config", "text_config")


def _archs(doc: dict[str, Any]) -> list[str]:
    archs = doc.get("architectures")
    return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []


def is_multimodal(doc: dict[str, Any], rules: SglangRules, *, from_gpu: bool) -> bool:
    """SGLang's ``model_config.is_multimodal`` for ``doc`` under a default launch, as far as the
    budget needs it (``from_gpu``: the budget comes from --gpu, not --memory, which needs none)."""
    if not rules.multimodal_by_arch:
        return _listed_multimodal(doc, rules)
    archs = _archs(doc)
    own = [a for a in archs if a in _OWN_DEFAULTS and a in rules.multimodal_archs]
    if own:
        raise InputError(
            f"SGLang {rules.release}: {own[0]} is not mirrored (its KV cache defaults to "
            "fp8_e4m3 and its own launch hooks change the defaults)",
            hint="read its KV cache from the SGLang log (the KV Cache is allocated line)",
        )
    if not from_gpu:
        return False
    first = archs[0] if archs else ""
    if first in _MM_OFF_BY_DEFAULT or doc.get("language_model_only") is True:
        return False
    if first == "MiMoV2ForCausalLM" and not ("vision_config" in doc and "audio_config" in doc):
        return False
    return _text_subconfig(doc) or any(a in rules.multimodal_archs for a in archs)


def _text_subconfig(doc: dict[str, Any]) -> bool:
    """Whether get_hf_text_config picks a sub-config (Llava*ForCausalLM keep their own)."""
    first = (_archs(doc) or [""])[0]
    llava_own = first.startswith("Llava") and first.endswith("ForCausalLM")
    return not llava_own and any(isinstance(doc.get(k), dict) for k in _TEXT_SUBCONFIGS)


def _listed_multimodal(doc: dict[str, Any], rules: SglangRules) -> bool:
    """``is_multimodal`` before the ``multimodal_by_arch`` rows (``rules.multimodal_rule``)."""
    if rules.multimodal_rule == "vision-config":
        return isinstance(doc.get("vision_config"), dict)
    archs = _archs(doc)
    first = archs[0] if archs else ""
    if first in _MM_OFF_BY_DEFAULT:
        return False
    both = "vision_config" in doc and "audio_config" in doc
    if rules.multimodal_mimo_gate and first == "MiMoV2ForCausalLM" and not both:
        return False
    if any(a in rules.multimodal_archs for a in archs):
        return True
    if rules.multimodal_rule == "arch-or-vision":
        return _text_subconfig(doc) or "vision_config" in doc or "audio_config" in doc
    return rules.multimodal_rule == "arch-or-subconfig" and _text_subconfig(doc)


def multimodal_graphs_kept(doc: dict[str, Any], rules: SglangRules, *, mla: bool) -> bool:
    """Whether a multimodal model keeps its prefill CUDA graphs on a ``multimodal_by_arch`` row:
    on the breakable allowlist, or on the piecewise one where the release moves those to
    tc_piecewise (whose rules keep them: none is on piecewise_cuda_graph_disabled_model_archs).
    The breakable rules' "multimodal model" entry turns them off for any other."""
    archs = _archs(doc)
    if any(a in rules.multimodal_breakable_archs for a in archs):
        return True
    if not any(a in rules.multimodal_piecewise_archs for a in archs):
        return False
    if mla:
        raise InputError(
            f"SGLang {rules.release}: the default mem_fraction_static of an MLA model on "
            "multimodal_piecewise_cuda_graph_supported_model_archs is not mirrored (its prefill "
            "graphs move to tc_piecewise unless the attention backend resolves to trtllm_mla)",
            hint="pass --mem-fraction-static (the server_args line of the log names it)",
        )
    return True


def multimodal_mirrored(rules: SglangRules) -> bool:
    """Whether ``rules``' release's own ``is_multimodal`` is mirrored (not read for the rows
    that take any vision_config as multimodal)."""
    return rules.multimodal_by_arch or rules.multimodal_rule != "vision-config"
