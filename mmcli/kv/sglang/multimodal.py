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

#: configs/model_config.py ``multimodal_model_archs`` (with MIMO_V2_MULTIMODAL_ARCHS): the
#: architectures on that list in every release of the rows that set multimodal_by_arch.
_MULTIMODAL_ARCHS = frozenset(
    """CLIPModel Cohere2VisionForConditionalGeneration DeepseekOCRForCausalLM
    DeepseekVL2ForCausalLM DotsOCRForCausalLM DotsVLMForCausalLM
    Ernie4_5_VLMoeForConditionalGeneration Gemma3ForConditionalGeneration
    Gemma3nForConditionalGeneration Gemma4ForConditionalGeneration
    Gemma4UnifiedForConditionalGeneration Glm4vForConditionalGeneration
    Glm4vMoeForConditionalGeneration GlmAsrForConditionalGeneration
    GlmImageForConditionalGeneration GlmOcrForConditionalGeneration Grok1AForCausalLM
    Grok1VForCausalLM InternS1ForConditionalGeneration InternS1ProForConditionalGeneration
    InternS2MobiusForConditionalGeneration InternS2PreviewForConditionalGeneration
    InternVLChatModel JetVLMForConditionalGeneration KimiK25ForConditionalGeneration
    KimiVLForConditionalGeneration Lfm2VlForConditionalGeneration
    LightOnOCRForConditionalGeneration Llama4ForConditionalGeneration
    LlavaForConditionalGeneration LlavaLlamaForCausalLM LlavaMistralForCausalLM
    LlavaQwenForCausalLM LlavaVidForCausalLM LocateAnythingForConditionalGeneration
    MiDashengLMModel MiMoV2ASRForCausalLM MiMoV2ForCausalLM MiniCPMO MiniCPMV
    MiniMaxM3SparseForConditionalGeneration Mistral3ForConditionalGeneration
    MllamaForConditionalGeneration MossVLForConditionalGeneration MultiModalityCausalLM
    MuseGlimmerForConditionalGeneration NVILAForConditionalGeneration
    NVILALiteForConditionalGeneration NemotronH_Nano_Omni_Reasoning_V3 NemotronH_Nano_VL_V2
    POINTSV15ChatModel PaddleOCRVLForConditionalGeneration Phi4MMForCausalLM
    PixtralForConditionalGeneration Qwen2AudioForConditionalGeneration
    Qwen2VLForConditionalGeneration Qwen2_5_VLForConditionalGeneration
    Qwen3ASRForConditionalGeneration Qwen3OmniMoeForConditionalGeneration
    Qwen3VLForConditionalGeneration Qwen3VLMoeForConditionalGeneration
    Qwen3_5ForConditionalGeneration Qwen3_5MoeForConditionalGeneration
    Sarashina2VisionForCausalLM Step3VLForConditionalGeneration
    Step3p7ForConditionalGeneration StepVLForConditionalGeneration UnlimitedOCRForCausalLM
    VoxtralForConditionalGeneration WhisperForConditionalGeneration""".split()
)
#: Architectures whose multimodal status or prefill graphs differ between those releases:
#: added to multimodal_model_archs in a later one, or moved between the piecewise and breakable
#: allowlists (``multimodal_{piecewise,breakable}_cuda_graph_supported_model_archs``).
_VARYING = frozenset(
    """BailingMM2NativeForConditionalGeneration BailingMMNativeForConditionalGeneration
    BailingMoeV3VLForConditionalGeneration Cosmos3EdgeForConditionalGeneration
    DiffusionGemmaForBlockDiffusion Dots3NoteForCausalLM EmbeddingGemma2Model
    Glm5NextForConditionalGeneration MuseSparkForConditionalGeneration
    NemotronH_Omni_Reasoning_V3 Qwen4ExpForConditionalGeneration
    Cohere2VisionForConditionalGeneration PaddleOCRVLForConditionalGeneration
    MiniMaxM3SparseForCausalLM MiniMaxM3SparseForConditionalGeneration""".split()
)
#: ``multimodal_breakable_cuda_graph_supported_model_archs`` in each of those releases (less
#: MuseGlimmer, whose prefill graphs have their own default size): their graphs stay on.
_BREAKABLE_KEPT = frozenset(
    """InternS2MobiusForConditionalGeneration Qwen3_5ForConditionalGeneration
    Qwen3_5MoeForConditionalGeneration KimiK3ForConditionalGeneration
    KimiK25ForConditionalGeneration""".split()
)
#: ``ModelConfig.__init__``'s ``mm_disabled_models``: an unset --enable-multimodal is False
#: (the same three from 0.5.3; Inkling joins in 0.5.18).
_MM_OFF_OLD = (
    "Gemma3ForConditionalGeneration",
    "Llama4ForConditionalGeneration",
    "Step3VLForConditionalGeneration",
)
_MM_OFF_BY_DEFAULT = (*_MM_OFF_OLD, "InklingForConditionalGeneration")
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
    varying = sorted(a for a in archs if a in _VARYING)
    if not from_gpu:
        return False
    if varying:
        raise InputError(
            f"SGLang {rules.release}: whether {varying[0]} is multimodal, and whether its prefill "
            "CUDA graphs stay on, is not mirrored for the default mem_fraction_static",
            hint="pass --mem-fraction-static (the server_args line of the log names it)",
        )
    first = archs[0] if archs else ""
    if first in _MM_OFF_BY_DEFAULT or doc.get("language_model_only") is True:
        return False
    if first == "MiMoV2ForCausalLM" and not ("vision_config" in doc and "audio_config" in doc):
        return False
    return _text_subconfig(doc) or any(a in _MULTIMODAL_ARCHS for a in archs)


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
    if first in _MM_OFF_OLD:
        return False
    both = "vision_config" in doc and "audio_config" in doc
    if rules.multimodal_mimo_gate and first == "MiMoV2ForCausalLM" and not both:
        return False
    if any(a in rules.multimodal_archs for a in archs):
        return True
    if rules.multimodal_rule == "arch-or-vision":
        return _text_subconfig(doc) or "vision_config" in doc or "audio_config" in doc
    return rules.multimodal_rule == "arch-or-subconfig" and _text_subconfig(doc)


def multimodal_graphs_kept(doc: dict[str, Any]) -> bool:
    """Whether a multimodal model keeps its breakable prefill CUDA graphs (the breakable rules'
    "multimodal model" entry turns them off for any other)."""
    return any(a in _BREAKABLE_KEPT for a in _archs(doc))


def multimodal_mirrored(rules: SglangRules) -> bool:
    """Whether ``rules``' release's own ``is_multimodal`` is mirrored (not read for the rows
    that take any vision_config as multimodal)."""
    return rules.multimodal_by_arch or rules.multimodal_rule != "vision-config"
