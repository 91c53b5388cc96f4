"""SGLang's KV budget: the default ``mem_fraction_static`` of a release, and the pool budget.

SGLang sizes its pool as ``rest = available_after_weights − total_before × (1 −
mem_fraction_static)`` (``ModelRunner.profile_max_num_token``), both memories measured on the
GPU at start-up, in GiB. ``--memory`` is that ``rest`` and is exact; from ``--gpu`` and
``--weights`` mmcli takes the GPU's total for ``total_before`` and ``total − weights`` for
``available_after`` (the CUDA context and communication buffers are not counted), so that
budget is an estimate and says so.

The default fraction depends on the GPU's memory as ``nvidia-smi`` reports it (MiB), which
mmcli takes as CUDA's total: the tables' thresholds are GiB-wide, so only a board within a few
hundred MiB of a threshold could fall on the other side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.sglang.multimodal import multimodal_graphs_kept
from mmcli.kv.sglang.releases import SglangRules

_MIB = 2**20


@dataclass(frozen=True)
class Fraction:
    """The ``mem_fraction_static`` a release picks, and the sizes it picked it from."""

    value: float
    #: How it was reached, in words.
    why: str
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None


def _tp_table(gpu_mib: float, parallel: int) -> float:
    # 0.4.6 / 0.4.7 server_args: by tp × pp, for GPUs up to 80 GiB; 0.88 above.
    if gpu_mib > 81920:
        return 0.88
    for size, value in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87)):
        if parallel >= size:
            return value
    return 0.88


def _gpu_tier(gpu_mib: float, tp: int, rules: SglangRules) -> tuple[int, int]:
    """0.5.3 on: defaults (chunked_prefill_size, cuda_graph_max_bs) by GPU memory and tp (the
    < 35 GiB tier from the release's row)."""
    gib = 1024
    if gpu_mib < 20 * gib:
        return 2048, 8
    if gpu_mib < 35 * gib:
        small_bs = rules.small_gpu_graph_bs if tp < 4 else rules.small_gpu_graph_bs_tp4
        return rules.small_gpu_chunk, small_bs
    if gpu_mib < 60 * gib:
        return 4096, 32 if tp < 4 else 160
    if gpu_mib < 160 * gib:  # the < 90 GiB (H100) and < 160 GiB (H200) tiers are equal
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def _reserve_by_gpu(gpu_mib: float, parallel: int) -> float:
    # 0.4.9.post2 server_args: MiB reserved for activations and CUDA graphs, by GPU tier.
    gib = 1024
    if gpu_mib < 35 * gib:
        return (2.8 + parallel / 10) * gib
    if gpu_mib < 90 * gib:
        return (9.5 + parallel / 2) * gib
    if gpu_mib < 160 * gib:
        return (12 + parallel / 2) * gib
    return 32 * gib


@dataclass(frozen=True)
class PrefillGraphs:
    """What decides the piecewise (prefill) CUDA graphs' reserve of a "reserve-pcg" release."""

    #: The model's pool is MLA (SGLang's ``use_mla_backend``).
    mla: bool = False
    #: Whether SGLang treats the model as multimodal (piecewise graphs off).
    multimodal: bool = False
    max_total_tokens: int | None = None
    #: The model's name (SGLang caps the graphs at 4096 tokens when its path names Llama-2).
    model_path: str = ""
    #: --max-model-len, SGLang's --context-length (None: not given).
    context_length: int | None = None


#: Architectures SGLang captures no piecewise graphs for (0.5.10 configs/model_config.py
#: ``piecewise_cuda_graph_disabled_model_archs``; 0.5.12 adds DeepSeek-V4, refused elsewhere).
_NO_PIECEWISE = (
    "DeepseekV32ForCausalLM",
    "DeepseekV4ForCausalLM",
    "Qwen3NextForCausalLM",
    "GlmMoeDsaForCausalLM",
    "BailingMoeV2_5ForCausalLM",
    "LLaDAModelLM",
)
#: 0.5.14 configs/model_config.py:1713 ``piecewise_cuda_graph_disabled_model_archs`` (the DSA
#: models left it in 0.5.13), and :1725 the multimodal architectures that keep the graphs.
#: The DeepSeek sparse attention architectures on that list through 0.5.12 (0.5.13
#: configs/model_config.py ``piecewise_cuda_graph_disabled_model_archs`` drops them).
_DSA_ARCHS = ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM")
_NO_PIECEWISE_0514 = (
    "DeepseekV4ForCausalLM",
    "DeepseekV4ForCausalLMNextN",
    "Qwen3NextForCausalLM",
    "BailingMoeV2_5ForCausalLM",
    "LLaDAModelLM",
)
_MULTIMODAL_PIECEWISE = ("Cohere2VisionForConditionalGeneration",)
#: 0.5.15 server_args.py:3356: the breakable backend turns the graphs off for DeepSeek-V4.
_NO_BREAKABLE = ("DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN")
#: 0.5.16 configs/model_config.py:1785 ``multimodal_breakable_cuda_graph_supported_model_archs``
#: (:1848 in 0.5.17): multimodal architectures whose breakable prefill graphs stay on
#: (server_args.py:3763).
_MULTIMODAL_BREAKABLE = (
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
)
#: 0.5.18 server_args.py:4431 (0.5.19 arg_groups/cuda_graph_hook.py): MuseGlimmer's prefill
#: graphs default to 512 tokens, a reserve not mirrored.
_OWN_PREFILL_MAX_BS = ("MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration")
#: Config keys that make a model a mixture of experts (its MoE runner may be picked by the GPU).
_MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")


#: What a multimodal model's budget loses where ``multimodal_kv_reserve`` is set
#: (``mm_runtime_reservation_gb``): SGLANG_VLM_CACHE_SIZE_MB (default 100) for the embedding
#: cache, plus SGLANG_MM_FEATURE_CACHE_MB only with the cuda_ipc / cuda_vmm feature transport,
#: which a single-node launch never picks unasked (it resolves the transport to cpu).
MM_RUNTIME_RESERVE_BYTES = 100 * _MIB
MM_RESERVE_WHY = (
    "less mm_runtime_reservation_gb's 100 MiB (the multimodal embedding cache; the cpu feature "
    "transport of a single-node launch adds none, --mm-feature-transport cuda_ipc / cuda_vmm "
    "would add 1 GiB)"
)

#: The rules whose default fraction reserves the prefill (piecewise / breakable) CUDA graphs.
_PREFILL_GRAPH_RULES = (
    "reserve-pcg",
    "prefill-config",
    "prefill-breakable",
    "breakable-allowlist",
    "breakable-mla",
)


def _capture_sizes(max_tokens: int) -> int:
    """How many token counts the piecewise graphs are captured at, up to ``max_tokens``."""
    steps = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256))
    count = sum(len(range(lo, min(hi, max_tokens) + 1, step)) for lo, hi, step in steps)
    return count + len(range(4608, max_tokens + 1, 512))


def _prefill_graphs_off(
    rules: SglangRules, graphs: PrefillGraphs, doc: dict[str, Any], text: dict[str, Any]
) -> bool:
    """Whether the release's default prefill backend captures no graphs for this model."""
    archs = doc.get("architectures")
    archs = archs if isinstance(archs, list) else []
    if rules.fraction_rule == "breakable-mla":
        if any(a in _OWN_PREFILL_MAX_BS for a in archs):
            raise InputError(
                f"SGLang {rules.release}: the default mem_fraction_static of a model whose "
                "prefill CUDA graphs have their own default size (MuseGlimmer) is not mirrored",
                hint="pass --mem-fraction-static (the server_args line of the log names it)",
            )
        multimodal = graphs.multimodal and not multimodal_graphs_kept(doc, rules, mla=graphs.mla)
        return multimodal or any(a in _NO_BREAKABLE for a in archs)
    if rules.fraction_rule in ("prefill-breakable", "breakable-allowlist"):
        multimodal = graphs.multimodal
        if rules.fraction_rule == "breakable-allowlist":
            multimodal = multimodal and not any(a in _MULTIMODAL_BREAKABLE for a in archs)
        mla = graphs.mla and not (rules.dsa_breakable_graphs_kept and "index_topk" in text)
        return mla or multimodal or any(a in _NO_BREAKABLE for a in archs)
    if rules.fraction_rule == "prefill-config":
        kept = any(a in _MULTIMODAL_PIECEWISE for a in archs)
        return (graphs.multimodal and not kept) or any(a in _NO_PIECEWISE_0514 for a in archs)
    dsa_off = rules.dsa_piecewise_graphs_off
    off = [a for a in _NO_PIECEWISE if dsa_off or a not in _DSA_ARCHS]
    return graphs.multimodal or any(a in off for a in archs) or ("index_topk" in text and dsa_off)


def _prefill_graph_reserve(
    rules: SglangRules, graphs: PrefillGraphs, chunk: int, gpu_mib: float, doc: dict[str, Any]
) -> tuple[float, str]:
    """MiB reserved for piecewise CUDA graphs, and a phrase saying how (0 when they are off)."""
    text = doc.get("text_config")
    text = text if isinstance(text, dict) else doc
    if _prefill_graphs_off(rules, graphs, doc, text):
        return 0.0, ", no piecewise graphs for this model"
    moe = any(k in text for k in _MOE_KEYS)
    if rules.moe_runner_disables_prefill_graphs and gpu_mib >= 160 * 1024 and moe:
        raise InputError(
            f"SGLang {rules.release}: the default mem_fraction_static of a mixture-of-experts "
            "model on a GPU of 160 GiB or more is not mirrored (on SM100 GPUs the MoE runner "
            "picked at start-up can turn the piecewise CUDA graphs, and their reserve, off)",
            hint="pass --mem-fraction-static (the server_args line of the log names it)",
        )
    if graphs.mla:
        return 1.5 * 1024, ", piecewise graphs 1,536 MiB (MLA)"
    if chunk <= 0:
        raise InputError(
            f"SGLang: chunked prefill {chunk}: the piecewise CUDA graphs' reserve of an "
            "unchunked prefill is not mirrored",
            hint="pass a positive --chunked-prefill-size, or --mem-fraction-static",
        )
    tokens = chunk if graphs.max_total_tokens is None else min(chunk, graphs.max_total_tokens)
    if "llama-2" in graphs.model_path.lower():
        tokens = min(tokens, 4096)
    if rules.prefill_graphs_clamped_to_context and graphs.context_length is not None:
        tokens = min(tokens, graphs.context_length)
    sizes = _capture_sizes(tokens)
    return sizes * 8.0, f", piecewise graphs at {sizes} sizes up to {tokens:,} tokens"


def _vit_factor(doc: dict[str, Any]) -> float:
    # 0.5.3 / 0.5.4 adjust_mem_fraction_for_vlm: 0.95 × a factor from the ViT's size
    # relative to a ViT-L/14 (24 layers × 1024²), clamped to [0.8, 1.05].
    vision = doc.get("vision_config")
    vision = vision if isinstance(vision, dict) else {}
    layers = vision.get("num_hidden_layers", 24)
    hidden = vision.get("hidden_size", 1024)
    layers = layers if isinstance(layers, int) and not isinstance(layers, bool) else 24
    hidden = hidden if isinstance(hidden, int) and not isinstance(hidden, bool) else 1024
    ratio = layers * hidden**2 / (24 * 1024**2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def default_fraction(
    rules: SglangRules,
    gpu_bytes: int,
    *,
    tp: int,
    multimodal: bool,
    doc: dict[str, Any],
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    graphs: PrefillGraphs | None = None,
    max_running_requests: int | None = None,
) -> Fraction:
    """The fraction ``rules``' release picks on a GPU of ``gpu_bytes`` (pp is 1)."""
    gpu = gpu_bytes / _MIB
    if rules.fraction_rule in ("tp-table", "tp-table-b200"):
        value = _tp_table(gpu, tp)
        why = f"by tp {tp} on a {gpu / 1024:.1f} GiB GPU"
        if rules.fraction_rule == "tp-table-b200" and gpu > 180 * 1000:
            return Fraction(0.79, "0.79 on GPUs over 180,000 MiB")
        if gpu > 96 * 1024:
            value = min(value + 48 * 1024 * (1 - value) / gpu, (gpu - 18 * 1024) / gpu)
            why += ", raised for a GPU over 96 GiB (18 GiB kept back)"
        return Fraction(value, why)
    if rules.fraction_rule == "reserve-by-gpu":
        reserved = _reserve_by_gpu(gpu, tp)
        value = round((gpu - reserved) / gpu, 3)
        why = f"{reserved:,.0f} MiB reserved on a {gpu / 1024:.1f} GiB GPU at tp {tp}"
        if multimodal:
            value *= 0.90
            why += ", × 0.90 for a multimodal model"
        return Fraction(value, why)
    tier_chunk, tier_bs = _gpu_tier(gpu, tp, rules)
    chunk = tier_chunk if chunked_prefill_size is None else chunked_prefill_size
    graph_bs = tier_bs if cuda_graph_max_bs is None else cuda_graph_max_bs
    capped = rules.graph_bs_capped_by_running and cuda_graph_max_bs is None
    if capped and max_running_requests is not None:
        graph_bs = min(graph_bs, max_running_requests)
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp / 8 * 1024
    prefill = ""
    if rules.fraction_rule in _PREFILL_GRAPH_RULES:
        extra, prefill = _prefill_graph_reserve(rules, graphs or PrefillGraphs(), chunk, gpu, doc)
        reserved += extra
    if gpu > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    value = round((gpu - reserved) / gpu, 3)
    why = (
        f"{reserved:,.0f} MiB reserved (chunked prefill {chunk:,}, CUDA graphs up to batch "
        f"{graph_bs}, tp {tp}{prefill}) on a {gpu / 1024:.1f} GiB GPU"
    )
    if multimodal and isinstance(doc.get("vision_config"), dict):
        value *= _vit_factor(doc)
        why += ", scaled down for the vision encoder"
    elif multimodal:
        # adjust_mem_fraction_for_vlm returns at once without a vision_config.
        why += ", no vision_config in the config: not scaled for a vision encoder"
    return Fraction(value, why, chunk, graph_bs)


def estimated_rest(gpu_bytes: int, weights_per_rank: int, fraction: float) -> int:
    """The pool budget from a GPU's total and the weights one rank loads (an estimate)."""
    return int(gpu_bytes * fraction) - weights_per_rank


def reserves_text(fraction: Fraction | None) -> str:
    """What the budget keeps back, in words: 1 − mem_fraction_static and why."""
    if fraction is None:
        return "1 − mem_fraction_static of the GPU (activations, CUDA graphs), before the pool"
    return (
        f"{1 - fraction.value:.3f} of the GPU (1 − mem_fraction_static {fraction.value:.3f}: "
        f"{fraction.why})"
    )
