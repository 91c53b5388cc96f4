"""DeepSeek sparse attention (DeepSeek V3.2, GLM-5): the block size and cache dtype vLLM runs
it with.

The indexer caches are layers of their own (:mod:`mmcli.kv.hf.dsa`); the MLA and indexer
layers are all full-attention specs of one block size, so the engine puts them in one group
(``UniformTypeKVCacheSpecs``) and one block holds a page of each: per token and layer, the MLA
row plus the indexer's 132 bytes. Facts mirrored (CUDA; the row of each release in
:mod:`mmcli.kv.releases`):

* Block: 64 tokens, the only size the sparse kernels take (FLASHMLA_SPARSE and the indexer's
  ``DeepseekV32IndexerBackend``: ``get_supported_kernel_block_sizes`` = 64). vLLM 0.11–0.17
  force it whatever ``--block-size`` says (``platforms/cuda.py``: "Forcing kv cache block
  size to 64 for FlashMLASparse backend"); from 0.18 it is the backends' preferred size when
  no ``--block-size`` is given, and a given one is kept.
* Cache dtype: the MLA row is 1152 bytes in bf16 (576 × 2) and 656 as ``fp8_ds_mla``.
  ``auto`` is ``fp8_ds_mla`` for DeepSeek V3.2 in 0.11.0 only, else the model dtype. An fp8
  dtype becomes ``fp8_ds_mla``: by DeepSeek V3.2's config hook (0.11–0.19), and by the
  FlashMLA-sparse backend for any DSA model (0.18 and newer), the sparse backend of Hopper.
  On Blackwell, vLLM may run FlashInfer's sparse MLA instead (for an fp8 cache from 0.19),
  which keeps plain fp8, and from 0.32 GLM-5's config hook makes ``auto`` fp8 there: notes
  say so. The indexer's cache is uint8 whatever the dtype.
"""

from __future__ import annotations

from dataclasses import replace

from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import DS_MLA, PlanOptions
from mmcli.kv.releases import EngineRules, first_release

#: The block of every sparse-attention kernel (FlashMLA-sparse, the indexer's).
DSA_BLOCK_SIZE = 64


def sparse_options(config: ModelConfig, options: PlanOptions) -> tuple[PlanOptions, list[Finding]]:
    """The options as vLLM runs a DSA model: its block size and MLA cache dtype, with notes.
    Other models' options are returned as they are."""
    model = config.sparse_attention
    if model is None:
        return options, []
    rules = options.rules
    block, notes = _block_size(options.block_size, rules)
    dtype, note = _cache_dtype(config, options.kv_dtype, rules)
    notes += [note] if note else []
    return replace(options, block_size=block, kv_dtype=dtype), notes


def _block_size(given: int | None, rules: EngineRules) -> tuple[int, list[Finding]]:
    if given is None or given == DSA_BLOCK_SIZE:
        return DSA_BLOCK_SIZE, []
    if rules.dsa_block_forced:
        note = Finding(
            "dsa-block-size",
            "info",
            f"vLLM {rules.release} forces 64-token blocks for DeepSeek sparse attention "
            f"(platforms/cuda.py, the FlashMLA-sparse backend), so --block-size {given} is "
            "not used",
            hint="drop --block-size; from vLLM "
            f"{first_release('dsa_block_forced', False)} a multiple of 64 is kept",
        )
        return DSA_BLOCK_SIZE, [note]
    if given % DSA_BLOCK_SIZE:
        note = Finding(
            "dsa-block-size",
            "warning",
            f"--block-size {given} is not a multiple of the 64-token blocks the sparse-attention "
            "kernels read (FlashMLA-sparse, the indexer): on Hopper vLLM finds no attention "
            "backend for it and does not start",
            hint="drop --block-size (vLLM then picks 64) or give a multiple of 64",
        )
        return given, [note]
    return given, []


def _cache_dtype(config: ModelConfig, given: str, rules: EngineRules) -> tuple[str, Finding | None]:
    """The cache dtype of the MLA layers, and a note on how the engine chose it."""
    model = config.sparse_attention
    assert model is not None
    if config.checkpoint_kv is not None:
        raise InputError(
            f"{config.name}: the checkpoint declares a KV-cache quantization "
            f"({config.checkpoint_kv.source}); how vLLM combines it with the fp8_ds_mla cache "
            f"of {model.name}'s sparse attention is not mirrored",
            hint="plan without the checkpoint's kv_cache_quant_algo / kv_cache_scheme and pass "
            "the --kv-cache-dtype vLLM runs it with",
        )
    v32 = model.architecture == "DeepseekV32ForCausalLM"
    if given == "auto":
        if not v32 and rules.dsa_glm_blackwell_fp8:
            return given, Finding(
                "dsa-cache-dtype",
                "info",
                f"on Blackwell (SM10x) vLLM {rules.release} caches {model.name} in fp8 under "
                "--kv-cache-dtype auto (its config hook in model_executor/models/config.py); "
                "this plan is Hopper's, in the model dtype",
                hint="there FlashInfer's sparse MLA keeps plain fp8: 576 B per token per MLA "
                "layer instead of 1,152",
            )
        if not (v32 and rules.dsa_auto_ds_mla):
            return given, None
        return DS_MLA, Finding(
            "dsa-cache-dtype",
            "info",
            f"vLLM {rules.release} caches {model.name} as fp8_ds_mla under --kv-cache-dtype "
            "auto (656 B per token per MLA layer; its config hook in "
            "model_executor/models/config.py); "
            f"{first_release('dsa_auto_ds_mla', False, after=rules.mirrored)} and later keep "
            "the model dtype",
            hint="pass --kv-cache-dtype bfloat16 to plan a bf16 cache",
        )
    if given != "fp8":
        return given, None
    if v32 and rules.dsa_fp8_hook:
        return DS_MLA, Finding(
            "dsa-cache-dtype",
            "info",
            f"vLLM {rules.release} stores an fp8 cache of {model.name} as fp8_ds_mla (656 B per "
            "token per MLA layer: fp8 latent, scales, bf16 RoPE; its config hook in "
            "model_executor/models/config.py)",
            hint="pass --kv-cache-dtype fp8_ds_mla to say so",
        )
    if rules.dsa_fp8_backend:
        return DS_MLA, Finding(
            "dsa-cache-dtype",
            "info",
            f"vLLM {rules.release} stores an fp8 cache of {model.name} as fp8_ds_mla under the "
            "FlashMLA-sparse backend (Hopper's): 656 B per token per MLA layer; on Blackwell it "
            "may run FlashInfer's sparse MLA, which keeps plain fp8 (576 B)",
            hint="pass --kv-cache-dtype fp8_ds_mla to say so",
        )
    raise InputError(
        f"--kv-cache-dtype fp8: vLLM {rules.release} has no fp8 rule for {model.name}'s sparse "
        "attention (no config hook turns it into fp8_ds_mla, and the FlashMLA-sparse backend "
        f"takes fp8_ds_mla alone until {first_release('dsa_fp8_backend')}); which cache it "
        "keeps depends on the GPU's backend",
        hint="pass --kv-cache-dtype fp8_ds_mla, or plan with --vllm-version "
        f"{first_release('dsa_fp8_backend')} or newer",
    )
