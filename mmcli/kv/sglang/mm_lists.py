"""The architectures on SGLang's ``multimodal_model_archs`` (configs/model_config.py) in the
oldest release read that has the list; what each later release adds is in
:data:`mmcli.kv.sglang.release_names.MM_ADDED`, the rows' ``multimodal_archs`` built from both.
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
