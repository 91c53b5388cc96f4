"""Which vLLM releases serve an architecture: the first that registers it and the last that
did before it was removed (release table data, read with :mod:`mmcli.kv.releases`)."""

from __future__ import annotations

from typing import Final

#: Architectures vLLM stopped serving, with the last release that served them (vLLM 0.32's
#: ``_PREVIOUSLY_SUPPORTED_MODELS``, model_executor/models/registry.py: a later release
#: refuses to start "Model architecture X was supported in vLLM until vY"); the ones whose
#: configs mmcli would otherwise plan.
LAST_SERVED: Final[dict[str, str]] = {
    "BambaForCausalLM": "0.23",
    "MiniMaxForCausalLM": "0.23",
    "MiniMaxText01ForCausalLM": "0.23",
    "MiniMaxM1ForCausalLM": "0.23",
    "MiniMaxVL01ForConditionalGeneration": "0.23",
    "Dots1ForCausalLM": "0.23",
    "XverseForCausalLM": "0.23",
    "BaiChuanForCausalLM": "0.23",
    "BaichuanForCausalLM": "0.23",
    "InternLMForCausalLM": "0.23",
    "InternLM2VEForCausalLM": "0.23",
    "QWenLMHeadModel": "0.23",
    "JAISLMHeadModel": "0.22",
    "AquilaModel": "0.24",
    "AquilaForCausalLM": "0.24",
    "Grok1ModelForCausalLM": "0.24",
    "Grok1ForCausalLM": "0.24",
    "MotifForCausalLM": "0.10.2",
    "Phi3SmallForCausalLM": "0.9.2",
    "Phi4FlashForCausalLM": "0.10.2",
}

#: Architectures with recurrent states that vLLM serves on its V0 engine alone before a
#: release (``SupportsV0Only`` in model_executor/models/ of 0.10.0: jamba.py, mamba.py,
#: minimax_text_01.py; plamo2.py until 0.10.1), with the first release whose V1 serves them.
V1_FROM: Final[dict[str, str]] = {
    "JambaForCausalLM": "0.10.1",
    "MambaForCausalLM": "0.10.1",
    "MiniMaxText01ForCausalLM": "0.10.1",
    "Plamo2ForCausalLM": "0.10.2",
}

#: Architectures a vLLM release older than the first that serves them does not start, with
#: that release (``model_executor/models/registry.py`` of each release: Qwen3NextForCausalLM
#: from 0.10.2, DeepseekV32ForCausalLM from 0.11.0, GlmMoeDsaForCausalLM from 0.16.0,
#: DeepseekV4ForCausalLM from 0.20.0,
#: Qwen3_5(Moe)ForConditionalGeneration from 0.17.0, Qwen3_5(Moe)ForCausalLM from 0.27.0).
FIRST_SERVED: Final[dict[str, str]] = {
    "Qwen3NextForCausalLM": "0.10.2",
    "DeepseekV32ForCausalLM": "0.11",
    "GlmMoeDsaForCausalLM": "0.16",
    "DeepseekV4ForCausalLM": "0.20",
    "Qwen3_5ForConditionalGeneration": "0.17",
    "Qwen3_5MoeForConditionalGeneration": "0.17",
    "Qwen3_5ForCausalLM": "0.27",
    "Qwen3_5MoeForCausalLM": "0.27",
}
