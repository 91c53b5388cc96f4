"""DeepSeek sparse attention (DSA): the indexer cache vLLM keeps beside every MLA cache.

DeepSeek V3.2 (``deepseek_v32``) and GLM-5 (``glm_moe_dsa``) set ``index_topk``; vLLM's DeepSeek
model then gives every decoder layer, MTP layers included, an indexer whose key cache is a
layer of its own, ``model.layers.{i}.self_attn.indexer.k_cache``, registered before the
layer's MLA cache ``model.layers.{i}.self_attn.attn`` (``DeepseekV32IndexerCache`` and
``Indexer`` in ``model_executor/models/deepseek_v2.py``, 0.11.0–0.34.0; from 0.29 the model
class lives in ``vllm/models/deepseek_v32/`` and builds the same cache). Its spec is an MLA
spec of one head of ``index_head_dim + index_head_dim // 128 * 4`` bytes in ``uint8``: fp8
keys and one fp32 scale per 128 of them, 132 bytes for ``index_head_dim`` 128, replicated on
every tensor-parallel rank (the indexer's projections are ``ReplicatedLinear``).
"""

from __future__ import annotations

from itertools import chain
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.inputs.values import optional_int
from mmcli.kv.model import DEFAULT_BLOCK_SIZE, SparseAttention, architecture
from mmcli.kv.spec import INDEXER_DTYPE, IndexerCacheSpec, Layer, MLAAttentionSpec

#: The DSA models vLLM plans with an indexer, by model type (each one's architecture).
DSA_MODELS: dict[str, SparseAttention] = {
    "deepseek_v32": SparseAttention("DeepseekV32ForCausalLM", "DeepSeek V3.2"),
    "glm_moe_dsa": SparseAttention("GlmMoeDsaForCausalLM", "GLM-5"),
}
_BY_ARCHITECTURE = {model.architecture: model for model in DSA_MODELS.values()}

#: The indexer quantizes its keys in blocks of 128 values with one fp32 (4-byte) scale each
#: (``Indexer.quant_block_size``; the cache holds ``head_dim // 128 * 4`` scale bytes).
QUANT_BLOCK = 128
SCALE_BYTES = 4
#: ``index_head_dim`` when the config has none (transformers' DeepseekV32Config and
#: GlmMoeDsaConfig default; every published config sets it).
DEFAULT_INDEX_HEAD_DIM = 128


def dsa_model(doc: dict[str, Any], text: dict[str, Any]) -> SparseAttention | None:
    """The DSA model of a config that sets ``index_topk`` (vLLM builds the indexer whenever
    the key is there), known by its model type or architecture; None otherwise."""
    if text.get("index_topk") is None and doc.get("index_topk") is None:
        return None
    model_type = str(text.get("model_type") or doc.get("model_type") or "")
    return DSA_MODELS.get(model_type) or _BY_ARCHITECTURE.get(architecture(doc))


def indexer_spec(text: dict[str, Any], where: str) -> IndexerCacheSpec:
    """The spec of one indexer cache of this config."""
    head = optional_int(text, "index_head_dim", where)
    head = DEFAULT_INDEX_HEAD_DIM if head is None else head
    size = head + head // QUANT_BLOCK * SCALE_BYTES
    return IndexerCacheSpec(DEFAULT_BLOCK_SIZE, 1, size, INDEXER_DTYPE)


def sparse_attention(
    doc: dict[str, Any], text: dict[str, Any], where: str
) -> tuple[SparseAttention, IndexerCacheSpec] | None:
    """The DSA model a config describes and its indexer spec (None: no indexer)."""
    found = dsa_model(doc, text)
    if found is None:
        return None
    if text.get("kv_lora_rank") is None:
        raise InputError(
            f"{where}: index_topk is set ({found.name} sparse attention) but kv_lora_rank is "
            "not: the indexer sits beside a multi-head latent attention cache",
            hint="set kv_lora_rank and qk_rope_head_dim (512 and 64 in the published configs)",
        )
    return found, indexer_spec(text, where)


def with_indexers(layers: list[Layer], spec: IndexerCacheSpec) -> tuple[list[Layer], list[int]]:
    """The layers with an indexer cache before each MLA layer, and each one's decoder index.

    ``layers`` holds one layer per decoder index (in order), as a DSA config builds them.
    """
    indexers = [
        Layer(_indexer_name(layer.name), spec, None, "indexer")
        if isinstance(layer.spec, MLAAttentionSpec)
        else None
        for layer in layers
    ]
    out = [lay for lay in chain.from_iterable(zip(indexers, layers, strict=True)) if lay]
    index = list(
        chain.from_iterable(
            (i, i) if indexer is not None else (i,) for i, indexer in enumerate(indexers)
        )
    )
    return out, index


def _indexer_name(attention: str) -> str:
    """``model.layers.3.self_attn.indexer.k_cache`` beside ``model.layers.3.self_attn.attn``."""
    return attention.removesuffix(".attn") + ".indexer.k_cache"
