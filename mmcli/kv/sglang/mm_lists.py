"""The architectures on SGLang's ``multimodal_model_archs`` (configs/model_config.py) in the
oldest release read that has the list; what each later release adds is in
:data:`mmcli.kv.sglang.release_names.MM_ADDED`, the rows' ``multimodal_archs`` built from both;
and the names of the prefill-graph allowlists of the ``multimodal_by_arch`` rows.
"""

from __future__ import annotations

#: The list's 20 names in 0.4.6.post5 configs/model_config.py:534.
MM_BASE = tuple(
    """CLIPModel DeepseekVL2ForCausalLM Gemma3ForConditionalGeneration Grok1AForCausalLM
    Grok1VForCausalLM InternVLChatModel KimiVLForConditionalGeneration
    Llama4ForConditionalGeneration LlavaForConditionalGeneration LlavaLlamaForCausalLM
    LlavaMistralForCausalLM LlavaQwenForCausalLM LlavaVidForCausalLM MiniCPMO MiniCPMV
    Mistral3ForConditionalGeneration MllamaForConditionalGeneration MultiModalityCausalLM
    Qwen2VLForConditionalGeneration Qwen2_5_VLForConditionalGeneration""".split()
)
#: What 0.5.3 adds (:780, 33 names in all).
MM_053 = tuple(
    """DotsOCRForCausalLM DotsVLMForCausalLM Glm4vForConditionalGeneration
    Glm4vMoeForConditionalGeneration InternS1ForConditionalGeneration
    Qwen3VLForConditionalGeneration Qwen3VLMoeForConditionalGeneration
    Sarashina2VisionForCausalLM Step3VLForConditionalGeneration""".split()
)
#: Dropped from the list when NVILA replaced it (0.5.5).
VILA = "VILAForConditionalGeneration"

#: What 0.5.18 – 0.5.23 add to ``multimodal_model_archs`` (release_names.MM_ADDED has where).
INTERN_MUSE = ("InternS2MobiusForConditionalGeneration", "MuseGlimmerForConditionalGeneration")
GLM5_QWEN4 = (
    "Cosmos3EdgeForConditionalGeneration",
    "Glm5NextForConditionalGeneration",
    "NemotronH_Omni_Reasoning_V3",
    "Qwen4ExpForConditionalGeneration",
)
BAILING = tuple(
    """BailingMM2NativeForConditionalGeneration BailingMMNativeForConditionalGeneration
    BailingMoeV3VLForConditionalGeneration DiffusionGemmaForBlockDiffusion""".split()
)
MINIMAX_M3 = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")
MUSE_SPARK = "MuseSparkForConditionalGeneration"
#: ``multimodal_breakable_cuda_graph_supported_model_archs`` of 0.5.18 (configs/model_config.py
#: :1921); release_names.MM_BREAKABLE_ADDED has what later releases add.
BREAKABLE_0518 = tuple(
    """InternS2MobiusForConditionalGeneration Qwen3_5ForConditionalGeneration
    Qwen3_5MoeForConditionalGeneration MuseGlimmerForConditionalGeneration
    KimiK3ForConditionalGeneration KimiK25ForConditionalGeneration""".split()
)
#: ``multimodal_piecewise_cuda_graph_supported_model_archs`` (0.5.18 :1908): these move to the
#: tc_piecewise prefill backend, which keeps their graphs (release_names.MM_PIECEWISE).
PIECEWISE_0518 = (
    "Cohere2VisionForConditionalGeneration",
    "KimiK25ForConditionalGeneration",
    *MINIMAX_M3,
)
