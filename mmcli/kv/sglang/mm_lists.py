"""The architectures on SGLang's ``multimodal_model_archs`` (configs/model_config.py) in the
oldest release read that has the list; what each later release adds is in
:data:`mmcli.kv.sglang.release_names.MM_ADDED`, the rows' ``multimodal_archs`` built from both.
"""

from __future__ import annotations

#: The list's 33 names in 0.5.3 configs/model_config.py:780.
MM_BASE = tuple(
    """CLIPModel DeepseekVL2ForCausalLM DotsOCRForCausalLM DotsVLMForCausalLM
    Gemma3ForConditionalGeneration Gemma3nForConditionalGeneration Glm4vForConditionalGeneration
    Glm4vMoeForConditionalGeneration Grok1AForCausalLM Grok1VForCausalLM
    InternS1ForConditionalGeneration InternVLChatModel KimiVLForConditionalGeneration
    Llama4ForConditionalGeneration LlavaForConditionalGeneration LlavaLlamaForCausalLM
    LlavaMistralForCausalLM LlavaQwenForCausalLM LlavaVidForCausalLM MiniCPMO MiniCPMV
    Mistral3ForConditionalGeneration MllamaForConditionalGeneration MultiModalityCausalLM
    Phi4MMForCausalLM Qwen2AudioForConditionalGeneration Qwen2VLForConditionalGeneration
    Qwen2_5_VLForConditionalGeneration Qwen3VLForConditionalGeneration
    Qwen3VLMoeForConditionalGeneration Sarashina2VisionForCausalLM
    Step3VLForConditionalGeneration VILAForConditionalGeneration""".split()
)
#: Dropped from the list when NVILA replaced it (0.5.5).
VILA = "VILAForConditionalGeneration"
