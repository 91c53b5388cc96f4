"""SGLang release names that are not rows of the rule table: the short and post-release
spellings that map onto a row, and the ``ServerArgs`` field that first appears in each release
(for ``kv-share explain``, which dates a log by its ``server_args`` line).
"""

from __future__ import annotations

from typing import Any

from mmcli.kv.sglang import mm_lists as ml
from mmcli.kv.sglang import swa_lists as sl
from mmcli.kv.sglang.mm_lists import MM_053, MM_BASE, VILA
from mmcli.kv.sglang.swa_lists import MIMO_V2, STEP3P5

#: Short spellings of a read release (``0.4.6`` is the 0.4.6.post5 wheel that was read), and
#: post releases read and found to size the pool as their base release does.
ALIASES = {
    "0.4.6": "0.4.6.post5",
    "0.4.9": "0.4.9.post2",
    "0.5.5.post1": "0.5.5",
    "0.5.5.post2": "0.5.5",
    "0.5.5.post3": "0.5.5",
    "0.5.6.post1": "0.5.6",
    "0.5.6.post2": "0.5.6",
    "0.5.8.post1": "0.5.8",
    "0.5.10.post1": "0.5.10",
    "0.5.12.post1": "0.5.12",
    "0.5.13.post1": "0.5.13",
    "0.5.15.post1": "0.5.15",
}


#: A ``ServerArgs`` field first in each release (the dataclass of server_args.py of each wheel,
#: 0.5.4 – 0.5.19; each stays through 0.5.23, server_args.py / arg_groups): a ``server_args``
#: line that names one is of that release or a later one. 0.5.20 – 0.5.23 were not told apart.
ARGS_FIRST_IN: dict[str, str] = {
    "debug_tensor_dump_layers": "0.5.5",
    "enable_attn_tp_input_scattered": "0.5.6",
    "enable_dynamic_chunking": "0.5.7",
    "enable_prefill_delayer": "0.5.8",
    "attn_cp_size": "0.5.9",
    "disable_priority_preemption": "0.5.10",
    "batch_notify_size": "0.5.11",
    "detokenizer_worker_num": "0.5.12",
    "disable_attn_tp_gather": "0.5.13",
    "cuda_graph_backend_decode": "0.5.14",
    "dcp_size": "0.5.15",
    "elastic_ep_initial_size": "0.5.16",
    "dwdp_size": "0.5.17",
    "c128_page_size": "0.5.18",
    "dsv4_prefill_backend": "0.5.19",
}

#: The architectures each release adds to ``is_hybrid_swa_model`` (configs/model_config.py),
#: and all of them up to each release: their hybrid sliding-window pool is refused by name.
SWA_ADDED: dict[str, tuple[str, ...]] = {  # is_hybrid_swa_model additions: see swa_lists.py
    "0.5.10": (*MIMO_V2, *STEP3P5),
    "0.5.11": ("MiMoV2ForCausalLM", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"),
    "0.5.12": ("DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "LagunaForCausalLM"),
    "0.5.13": ("Step3p7ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration"),
    "0.5.14": (),
    "0.5.15": ("UnlimitedOCRForCausalLM",),
    "0.5.16": sl.INKLING_MELLUM,
    "0.5.17": (),
    "0.5.18": sl.MUSE_GLIMMER,
    "0.5.19": sl.GRANITE_SWA,
    "0.5.20": (),
    "0.5.21": sl.IQUEST_DIFFUSION,
    "0.5.22": sl.EMBEDDING_GEMMA2,
    "0.5.23": sl.BEAM,
}
_SWA_KEYS = list(SWA_ADDED)
UNMIRRORED = {
    n: tuple(a for m in _SWA_KEYS[: i + 1] for a in SWA_ADDED[m]) for i, n in enumerate(_SWA_KEYS)
}

#: What each release adds to ``multimodal_model_archs`` (configs/model_config.py: 0.4.7 :559,
#: 0.4.9.post2 :612, 0.5.3 :780, 0.5.4 :888,
#: 0.5.5 :911, 0.5.6 :921, 0.5.7 :1050, 0.5.8 :1119, 0.5.9 :1211, 0.5.10 :1296, 0.5.11 :1384
#: with MIMO_V2_MULTIMODAL_ARCHS :46, 0.5.12 :1495, 0.5.13 :1513, 0.5.14 :1645, 0.5.15 :1634,
#: 0.5.16 :1692, 0.5.17 :1755, 0.5.18 :1822, 0.5.19 :1886, 0.5.20 :2103, 0.5.21 :2199,
#: 0.5.22 :2279, 0.5.23 :2391); 0.5.5 drops VILA.
MM_ADDED: dict[str, tuple[str, ...]] = {
    "0.4.6.post5": MM_BASE,
    "0.4.7": ("Phi4MMForCausalLM",),
    "0.4.9.post2": ("Gemma3nForConditionalGeneration", "Qwen2AudioForConditionalGeneration", VILA),
    "0.5.3": MM_053,
    "0.5.4": (
        "DeepseekOCRForCausalLM",
        "POINTSV15ChatModel",
        "Qwen3OmniMoeForConditionalGeneration",
    ),
    "0.5.5": ("NVILAForConditionalGeneration", "NVILALiteForConditionalGeneration"),
    "0.5.6": ("JetVLMForConditionalGeneration", "NemotronH_Nano_VL_V2"),
    "0.5.7": (
        "GlmAsrForConditionalGeneration",
        "MiDashengLMModel",
        "PixtralForConditionalGeneration",
    )
    + ("PaddleOCRVLForConditionalGeneration",),
    "0.5.8": (),
    "0.5.9": ("Ernie4_5_VLMoeForConditionalGeneration", "GlmOcrForConditionalGeneration")
    + ("InternS1ProForConditionalGeneration", "KimiK25ForConditionalGeneration")
    + ("LightOnOCRForConditionalGeneration", "StepVLForConditionalGeneration", *sl.QWEN3_5),
    "0.5.10": ("Lfm2VlForConditionalGeneration", "WhisperForConditionalGeneration"),
    "0.5.11": (
        "Gemma4ForConditionalGeneration",
        "MiMoV2ForCausalLM",
        "MossVLForConditionalGeneration",
    )
    + ("NemotronH_Nano_Omni_Reasoning_V3", "Qwen3ASRForConditionalGeneration")
    + ("VoxtralForConditionalGeneration",),
    "0.5.12": ("InternS2PreviewForConditionalGeneration",),
    "0.5.13": ("Cohere2VisionForConditionalGeneration", "Step3p7ForConditionalGeneration")
    + ("Gemma4UnifiedForConditionalGeneration",),
    "0.5.14": ("MiMoV2ASRForCausalLM", "MiniMaxM3SparseForConditionalGeneration"),
    "0.5.15": ("LocateAnythingForConditionalGeneration", "UnlimitedOCRForCausalLM"),
    "0.5.16": ("GlmImageForConditionalGeneration",),
    "0.5.17": (),
    "0.5.18": ml.INTERN_MUSE,
    "0.5.19": ("Dots3NoteForCausalLM",),
    "0.5.20": ml.GLM5_QWEN4,
    "0.5.21": ml.BAILING,
    "0.5.22": ("EmbeddingGemma2Model",),
    "0.5.23": (ml.MUSE_SPARK,),
}
#: What each release adds to ``multimodal_breakable_cuda_graph_supported_model_archs``
#: (configs/model_config.py: 0.5.18 :1921, 0.5.19 :1985, 0.5.20 :2207, 0.5.21 :2307 none,
#: 0.5.22 :2388, 0.5.23 :2501).
MM_BREAKABLE_ADDED: dict[str, tuple[str, ...]] = {
    "0.5.18": ml.BREAKABLE_0518,
    "0.5.19": ("Cohere2VisionForConditionalGeneration", "PaddleOCRVLForConditionalGeneration"),
    "0.5.20": ("Glm5NextForConditionalGeneration",),
    "0.5.21": (),
    "0.5.22": (*ml.MINIMAX_M3, "Qwen4ExpForConditionalGeneration"),
    "0.5.23": (ml.MUSE_SPARK,),
}
#: ``multimodal_piecewise_cuda_graph_supported_model_archs`` where a breakable prefill default
#: moves them to tc_piecewise (0.5.18 server_args.py:4548; arg_groups/cuda_graph_hook.py:106 in
#: 0.5.19, :114 in 0.5.21): 0.5.18 :1908, 0.5.19 :1973 (less Cohere2-Vision), 0.5.21 :2295.
#: 0.5.22 drops the switch (cuda_graph_hook.py:104; cuda_graph_config.py:48 no tc_piecewise).
MM_PIECEWISE = {
    "0.5.18": ml.PIECEWISE_0518,
    "0.5.19": ml.PIECEWISE_0518[1:],
    "0.5.20": ml.PIECEWISE_0518[1:],
    "0.5.21": ml.PIECEWISE_0518[1:],
}
#: ``is_multimodal``'s reading of a config from each release on (configs/model_config.py:
#: 0.4.6.post5 :107 and 0.5.3 :158 the list alone; 0.5.10 :183 also any sub-config,
#: vision_config or audio_config; 0.5.11 :218 a text sub-config only), and the MiMo-V2 gate's
#: first release (0.5.12 :229).
_MM_RULE_FROM = {
    "0.4.6.post5": "arch-list",
    "0.5.10": "arch-or-vision",
    "0.5.11": "arch-or-subconfig",
}
_MIMO_GATE_FROM = "0.5.12"
_VILA_DROPPED_IN = "0.5.5"


def mm_fields(release: str) -> dict[str, Any]:
    """The multimodal fields of ``release``'s row (none past the releases of MM_ADDED)."""
    if release not in MM_ADDED:
        return {}
    keys = list(MM_ADDED)
    upto = keys[: keys.index(release) + 1]
    archs = {a for k in upto for a in MM_ADDED[k]} - ({VILA} if _VILA_DROPPED_IN in upto else set())
    rule = [r for k, r in _MM_RULE_FROM.items() if k in upto][-1]
    gate = _MIMO_GATE_FROM in upto
    graph_keys = [k for k in MM_BREAKABLE_ADDED if k in upto]
    breakable = {a for k in graph_keys for a in MM_BREAKABLE_ADDED[k]}
    return {
        "multimodal_rule": rule,
        "multimodal_archs": frozenset(archs),
        "multimodal_mimo_gate": gate,
        "multimodal_breakable_archs": frozenset(breakable),
        "multimodal_piecewise_archs": frozenset(MM_PIECEWISE.get(release, ())),
    }


#: DeepSeek-V4 (mmcli/kv/sglang/dsv4.py): from this release DSV4PoolConfigurator sizes the SWA
#: pool from the request cap when --swa-full-tokens-ratio is not given (0.5.21
#: model_executor/pool_configurator.py ``_resolve_swa_cap_tokens``; absent in 0.5.20).
DSV4_SWA_CAP_FROM = "0.5.21"
