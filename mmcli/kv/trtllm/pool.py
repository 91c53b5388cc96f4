"""TensorRT-LLM's paged KV pool for one model: bytes per token, tokens, blocks, concurrency.

Bytes per token per rank: ``2 × kv_heads/tp × head_dim × layers × dtype bytes`` (K and V), or
``(kv_lora_rank + qk_rope_head_dim) × layers × dtype bytes`` for MLA (K only, SELFKONLY; not
split by tp). What the release mirrors is in :mod:`mmcli.kv.trtllm.releases`; models whose
pools differ (windowed VSWA pools, Mamba hybrids, shared layers) are refused, naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmcli.dtypes import KV_DTYPE_BYTES
from mmcli.errors import InputError
from mmcli.kv.figures import EngineFigures, Figure, PoolRequest, max_concurrency
from mmcli.kv.model import ModelConfig
from mmcli.kv.spec import KVCacheSpec, MLAAttentionSpec
from mmcli.kv.state import MambaSpec
from mmcli.kv.trtllm.releases import TrtllmRules, trtllm_blocks_by_path, trtllm_rules

_GIB = 2**30


@dataclass(frozen=True)
class TrtllmOptions(PoolRequest):
    """What a TensorRT-LLM launch sets that changes the pool (per rank), beyond the shared
    :class:`~mmcli.kv.figures.PoolRequest` (whose ``memory_bytes`` is the figure the engine
    logs: before the fraction on the C++ runtime, after it on the PyTorch backend)."""

    release: str | None = None
    free_gpu_memory_fraction: float | None = None
    tokens_per_block: int | None = None
    max_tokens: int | None = None


def _refuse(what: str, hint: str = "plan it for vLLM (--engine vllm)") -> InputError:
    return InputError(f"TensorRT-LLM: {what}", hint=hint)


def bytes_per_token(
    config: ModelConfig, doc: dict[str, Any], rules: TrtllmRules, *, tp: int, kv_dtype: str
) -> tuple[int, bool]:
    """Bytes one token takes on one rank, and whether the model is MLA; refuses the rest."""
    specs = [layer.spec for layer in config.layers]
    if any(isinstance(s, MambaSpec) for s in specs):
        raise _refuse("hybrid Mamba / GDN models (MambaHybridCacheManager) are not mirrored")
    if any(s is None for s in specs) or any(lay.kv_sharing_target for lay in config.layers):
        raise _refuse("layers without a cache, or sharing another layer's, are not mirrored")
    attention = [s for s in specs if isinstance(s, KVCacheSpec)]
    if any(s.attention in ("sliding", "chunked") for s in attention):
        raise _refuse(
            "sliding-window and chunked layers (max_attention_window, the windowed VSWA "
            "pools) are not mirrored"
        )
    if any(getattr(s, "ds_mla", False) for s in attention) or doc.get("index_topk"):
        raise _refuse("DeepSeek sparse attention is not mirrored")
    if len({(type(s), s.num_kv_heads, s.head_size, s.dtype) for s in attention}) != 1:
        raise _refuse("layers of different head geometry (variable GQA) are not mirrored")
    spec = attention[0]
    mla = isinstance(spec, MLAAttentionSpec)
    if mla and not rules.mla:
        raise _refuse(f"MLA models are not mirrored for {rules.release}")
    if kv_dtype == "auto":
        quant = doc.get("quantization_config")
        if isinstance(quant, dict) and quant.get("kv_cache_quant_algo") is not None:
            raise _refuse(
                "kv_cache_quant_algo in quantization_config picks the KV dtype, which is "
                "not mirrored",
                hint="pass --kv-dtype fp8 (or the KV dtype the engine was built with)",
            )
        dtype_bytes = KV_DTYPE_BYTES[spec.dtype]
    elif kv_dtype in KV_DTYPE_BYTES:
        dtype_bytes = KV_DTYPE_BYTES[kv_dtype]
    else:
        raise _refuse(f"KV cache dtype {kv_dtype} is not mirrored", hint="use auto or fp8")
    if mla:
        return spec.head_size * len(attention) * dtype_bytes, True
    if spec.num_kv_heads % tp:
        raise _refuse(
            f"{spec.num_kv_heads} KV heads do not divide over tp {tp}; how the engine "
            "replicates them is not mirrored",
            hint="plan with a tp that divides the KV heads",
        )
    return 2 * (spec.num_kv_heads // tp) * spec.head_size * len(attention) * dtype_bytes, False


def _check(options: TrtllmOptions) -> None:
    if options.pp != 1:
        raise _refuse("pipeline parallelism is not mirrored", "plan with pp 1")
    if options.tp <= 0 or (options.tokens_per_block is not None and options.tokens_per_block <= 0):
        raise InputError(
            "tp and tokens per block must be positive",
            hint=f"TensorRT-LLM's tokens per block is {trtllm_blocks_by_path()}",
        )
    fraction = options.free_gpu_memory_fraction
    if fraction is not None and not 0 < fraction < 1:
        raise InputError(
            f"--free-gpu-memory-fraction must be between 0 and 1, got {fraction}",
            hint="TensorRT-LLM's default is 0.9",
        )


def plan_trtllm(config: ModelConfig, doc: dict[str, Any], options: TrtllmOptions) -> EngineFigures:
    """What TensorRT-LLM ``options.release`` allocates for ``config`` per rank."""
    rules = trtllm_rules(options.release)
    _check(options)
    per_token, mla = bytes_per_token(config, doc, rules, tp=options.tp, kv_dtype=options.kv_dtype)
    fraction_given = options.free_gpu_memory_fraction is not None
    fraction = options.free_gpu_memory_fraction if fraction_given else rules.default_fraction
    assert fraction is not None
    block = options.tokens_per_block or rules.tokens_per_block
    estimate: str | None = None
    if options.memory_bytes is not None:
        memory = options.memory_bytes
        if rules.memory_before_fraction:
            source = "--memory: the 'available' memory of 'Memory usage when calculating max "
            source += "tokens in paged kv cache'"
            budget = memory * fraction
        else:
            source = "--memory: 'available KV cache memory when calculating max tokens' (the "
            source += "fraction already applied)"
            budget = float(memory)
    elif options.gpu_bytes is not None and options.weights_bytes is not None:
        free = options.gpu_bytes - options.weights_bytes // options.tp
        budget = float(int(free * fraction))
        source = f"estimate from --gpu {options.gpu_name} and --weights"
        estimate = (
            "estimate: TensorRT-LLM sizes the pool from memory it measures after a profiled "
            "peak (activations, CUDA graphs, NCCL) that a config cannot predict; mmcli takes "
            "the GPU's total less the weights, so this is an upper bound"
        )
    else:
        raise _refuse(
            "no KV budget: pass --memory (the memory figure the engine logs), or --gpu and "
            "--weights for an estimate",
            hint="e.g. --memory 21.89GiB",
        )
    tokens = int(budget / per_token) if rules.path == "cpp" else int(budget) // per_token
    if options.max_tokens is not None:
        # 0.13: max_tokens alone replaces the fraction's figure; with a fraction given, the
        # smaller wins. 1.1: the smaller always wins.
        if rules.path == "cpp" and not fraction_given:
            tokens = options.max_tokens
        else:
            tokens = min(tokens, options.max_tokens)
    blocks = -(-tokens // block)
    figures = {
        "bytes_per_token": Figure(per_token),
        "block_tokens": Figure(block),
        "budget_bytes": Figure(int(budget), estimate),
        "pool_tokens": Figure(blocks * block, estimate),
        "blocks": Figure(blocks, estimate),
    }
    max_len = options.max_model_len or config.max_model_len
    refusal = None
    if blocks <= 0:
        refusal = "TensorRT-LLM stops at start-up: 'Impossible to fit in any sequence in kvCache'"
    elif max_len is not None:
        figures["max_concurrency"] = Figure(
            max_concurrency(blocks * block, max_len, block), estimate
        )
    reserves = f"1 − free_gpu_memory_fraction ({1 - fraction:.2f}) of the memory left after "
    reserves += "the weights" if rules.path == "cpp" else "the profiled peak"
    notes = [f"K only (MLA), {per_token:,} B per token" if mla else "K and V per token"]
    if not options.tokens_per_block:
        notes.append(
            f"tokens per block {block}: the {rules.release} default; pass "
            "--tokens-per-block for an engine built otherwise"
        )
    result = EngineFigures(
        "trtllm",
        rules.release,
        figures,
        source,
        reserves,
        notes=notes,
        refusal=refusal,
        kept_back=f"{1 - fraction:.0%} of free",
    )
    if rules.path == "cpp" and blocks > 0:
        result.log_lines = [
            f"Number of blocks in KV cache primary pool: {blocks}",
            f"Number of tokens per block: {block}.",
            f"[MemUsageChange] Allocated {blocks * block * per_token / _GIB:.2f} GiB for max "
            f"tokens in paged KV cache ({blocks * block}).",
        ]
    return result
