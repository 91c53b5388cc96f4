"""``is_hybrid_swa_model``'s allow-list (configs/model_config.py) release by release: the
architectures SGLang gives the hybrid sliding-window pool. Only GPT-OSS's and Llama 4's pools
are mirrored (mmcli/kv/sglang/swa.py); the others on a release's list are refused by name.

0.5.8 :1220 GPT-OSS, Llama 4, MiMo-V2-Flash / MTP; 0.5.9 :1320 adds Step-3.5; 0.5.10 :1438 is
0.5.9's; 0.5.11 :1546 adds MiMoV2ForCausalLM and Gemma 4; 0.5.12 :1663 DeepSeek-V4 and Laguna;
0.5.13 :1685 Step-3.7 and Gemma4Unified (and a config's ``is_hybrid_swa`` opt-in, :1703);
0.5.14 :1842 the same list (Laguna only with a sliding_window); 0.5.15 :1833 adds
UnlimitedOCRForCausalLM; 0.5.16 :1903 DeepseekV4ForCausalLMDSpark, Mellum and Inkling (and its
MTP); 0.5.17 :1988 the same; 0.5.18 :2050 MuseGlimmer; 0.5.19 :2115 takes GPT-OSS through
SWA_SINK_ARCHS (:54, with GraniteSWA / GraniteMoeSWA); 0.5.20 :2340 the same; 0.5.21 :2454 adds
DiffusionGemma and (SWA_SINK_ARCHS :86) IQuestQ1 and its MTP; 0.5.22 :2536 EmbeddingGemma2Model;
0.5.23 :2651 BeamForCausalLM (only with a sliding layer in its layer_types).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mmcli.kv.sglang.rules import SglangRules

MIMO_V2 = ("MiMoV2FlashForCausalLM", "MiMoV2MTP")
STEP3P5 = ("Step3p5ForCausalLM", "Step3p5MTP")
LLAMA4_GPT_OSS = ("Llama4ForConditionalGeneration", "GptOssForCausalLM")
INKLING_MELLUM = (
    "DeepseekV4ForCausalLMDSpark",
    "MellumForCausalLM",
    "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP",
)
MUSE_GLIMMER = ("MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration")
GRANITE_SWA = ("GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM")
IQUEST_DIFFUSION = ("DiffusionGemmaForBlockDiffusion", "IQuestQ1ForCausalLM", "IQuestQ1MTP")
EMBEDDING_GEMMA2 = ("EmbeddingGemma2Model",)
BEAM = ("BeamForCausalLM",)


def with_swa(
    row: SglangRules,
    off: tuple[str, ...],
    lists: dict[str, tuple[str, ...]],
    floor: bool = False,
) -> SglangRules:
    """0.5.14 / 0.5.15 keep 0.5.13's hybrid SWA pool: HybridSWAPoolConfigurator's budget solve
    (model_executor/pool_configurator.py:236 in 0.5.14, :284 in 0.5.15, the same cell; 0.5.15's
    draft layers join it only with EAGLE, refused for these models), ratio 0.8 by default
    (server_args.py:753 / :734), the pool ``off`` for Gemma 2/3/3n and Olmo 2 (0.5.14
    server_args.py:4056, :4122; 0.5.15 arg_groups/overrides.py:462, :909). SWAChunkCap
    (0.5.14 pool_configurator.py:339) needs --disable-radix-cache, which a plan never gives.
    ``lists``: the unmirrored architectures on the list of each mirrored release (other rows are
    returned as they are). 0.5.16 – 0.5.23 size the pools from mem_cache/kv_cache_configurator.py
    with the same configurator and cell (pool_configurator.py:301 in 0.5.16, :656 in 0.5.23;
    MLA, mxfp8, unified memory and the draft rows are not reached by these models); the ratio's
    default is 0.8 (0.5.16 server_args.py:795; from 0.5.20 a resolvable None whose fallback is
    0.8, arg_groups/fields/schedule.py:162, overridden to 0.1 only for DeepSeek-V4 / Inkling);
    the pool is off for Gemma 2/3/3n and Olmo 2 (0.5.16 arg_groups/overrides.py:564, :1060; 0.5.23
    model_overrides/gemma2_gemma3.py:26, olmo2.py:23). ``floor``: the admission floor
    (``swa_admission_floor``)."""
    if row.release not in lists:
        return row
    return replace(
        row,
        sliding_mirrored=True,
        swa_disabled_for=off,
        swa_pool_unmirrored_for=lists[row.release],
        hybrid_swa_archs=(*LLAMA4_GPT_OSS, *lists[row.release]),
        swa_split="budget",
        gpt_oss_sm100_swa_off=False,
        swa_config_opt_in=True,
        swa_admission_floor=floor,
    )


#: The Qwen3.5 / 3.6 architectures SGLang serves with a GDN state pool from 0.5.9
#: (model_runner.py:1580 ``hybrid_gdn_config``, configs/qwen3_5.py).
QWEN3_5 = ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration")


#: SGLang's multimodal Gemma 4, whose config utils/hf_transformers/config.py turns around
#: (model_type "gemma4"); Gemma4ForCausalLM (model_type "gemma4_text") is not, and stays
#: refused by name, as Gemma4UnifiedForConditionalGeneration does.
GEMMA4 = "Gemma4ForConditionalGeneration"


def gemma4_fields(row: SglangRules, per_layer: bool) -> dict[str, Any]:
    """A row giving Gemma 4 the hybrid SWA pool hands it to sglang/gemma4.py, which reads its
    shapes as transformers' per-layer config states them where ``per_layer``."""
    if GEMMA4 not in row.swa_pool_unmirrored_for:
        return {}
    rest = tuple(a for a in row.swa_pool_unmirrored_for if a != GEMMA4)
    return {
        "swa_pool_unmirrored_for": rest,
        "gemma4_swa_mirrored": True,
        "gemma4_per_layer_shapes": per_layer,
    }
