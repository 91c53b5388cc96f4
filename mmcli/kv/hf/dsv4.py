"""DeepSeek-V4 (``deepseek_v4``, ``DeepseekV4…``): refused with the caches vLLM would build.

vLLM serves ``DeepseekV4ForCausalLM`` from 0.20.0 (``model_executor/models/registry.py``;
the model lives in ``model_executor/models/deepseek_v4.py`` in 0.20–0.21 and in
``vllm/models/deepseek_v4/`` from 0.22). Every decoder layer ``model.layers.{i}.attn`` reads
``compress_ratios[i]`` (``max(1, …)``; an MTP layer takes 1) and ``sliding_window``, and
registers (vLLM 0.20.0):

* a sliding cache ``…attn.swa_cache`` (``DeepseekV4SWACache``, ``sparse_swa.py``): a
  ``SlidingWindowMLASpec`` of 64-token blocks whatever ``--block-size`` says, 584-byte rows
  (448 fp8 NoPE + 128 bf16 RoPE + 8 scale bytes, ``kv_cache_interface.py``) in pages padded up
  to a multiple of 576 bytes (``alignment=576``: 64 × 584 = 37,376 → 37,440);
* with ``compress_ratio`` > 1, a compressed MLA cache ``…attn`` (``MLAAttentionSpec`` with
  ``compress_ratio``: a block of ``block_size`` tokens stores ``block_size // compress_ratio``
  584-byte rows, padded to 576) and its compressor's fp32 state ``…attn.compressor.state_cache``
  (``CompressorStateCache``, ``deepseek_compressor.py``: a ``SlidingWindowMLASpec`` of 4-token
  blocks and window 8 at ratio 4, 8-token blocks and window 128 at ratio 128);
* with ``compress_ratio`` 4, an indexer: ``…attn.indexer.k_cache`` (132 bytes per state,
  ``index_head_dim`` 128 fp8 plus one fp32 scale) and its own compressor state.

The engine groups these by spec (``group_and_unify_kv_cache_specs``), pads each sliding group's
pages to the nearest full-MLA page size and lays all groups out in shared "layer tuples"
(``_get_kv_cache_groups_uniform_groups`` and ``_get_kv_cache_config_deepseek_v4`` in
``v1/core/kv_cache_utils.py``, 0.20–0.25; restructured from 0.26). Later releases change the
alignment (512 without the ``fp8_ds_mla`` layout from 0.25), the indexer row (68 bytes with an
MXFP4 indexer cache from 0.27) and the specs (``state_content_bytes`` from 0.28). None of that
is mirrored yet, so a DeepSeek-V4 config is refused, naming the caches it would get.
"""

from __future__ import annotations

from typing import Any

from mmcli.errors import InputError
from mmcli.kv.model import architecture
from mmcli.kv.releases import FIRST_SERVED

ARCHITECTURE = "DeepseekV4ForCausalLM"
#: ``compress_ratio`` of the layers that also build an indexer ("Only C4A uses sparse
#: attention and hence has indexer", ``DeepseekV4Attention``).
INDEXED_RATIO = 4


def is_deepseek_v4(doc: dict[str, Any], text: dict[str, Any]) -> bool:
    """Whether the config is DeepSeek-V4, by model type or architecture."""
    model_type = str(text.get("model_type") or doc.get("model_type") or "")
    return model_type.startswith("deepseek_v4") or architecture(doc).startswith("DeepseekV4")


def layer_ratios(text: dict[str, Any]) -> list[int] | None:
    """Each decoder layer's compress ratio as the engine reads it (``max(1, ratio)``), or None
    when ``compress_ratios`` is missing or not a list of integers."""
    ratios = text.get("compress_ratios")
    layers = text.get("num_hidden_layers")
    if not isinstance(ratios, list) or not isinstance(layers, int) or len(ratios) < layers:
        return None
    if not all(isinstance(r, int) and not isinstance(r, bool) for r in ratios):
        return None
    return [max(1, r) for r in ratios[:layers]]


def caches(text: dict[str, Any]) -> str:
    """The caches the engine would register for this config, counted."""
    ratios = layer_ratios(text)
    if ratios is None:
        return (
            "a sliding cache per layer and, by compress_ratios (not a list of one integer per "
            "layer here), compressed MLA caches, compressor states and indexers"
        )
    compressed = sum(r > 1 for r in ratios)
    indexed = sum(r == INDEXED_RATIO for r in ratios)
    return (
        f"{len(ratios)} sliding caches (attn.swa_cache), {compressed} compressed MLA caches "
        f"with their compressor states (compress_ratio > 1) and {indexed} indexers "
        f"(compress_ratio {INDEXED_RATIO})"
    )


def refuse_deepseek_v4(doc: dict[str, Any], text: dict[str, Any], where: str) -> None:
    """Raise :class:`InputError` for a DeepSeek-V4 config, naming what is not mirrored."""
    if not is_deepseek_v4(doc, text):
        return
    model_type = str(text.get("model_type") or doc.get("model_type") or "")
    first = FIRST_SERVED[ARCHITECTURE]
    raise InputError(
        f"{where}: DeepSeek-V4 ({model_type or architecture(doc)}): vLLM serves it from "
        f"{first}.0 with {caches(text)}; the engine's DeepseekV4 layout of these caches "
        "(page padding and layer tuples, _get_kv_cache_config_deepseek_v4) is not planned yet",
        hint="describe the layers in an mmcli layer config (docs/kv-configs.md) to plan an "
        "approximation; mmcli plans the sparse attention of DeepSeek V3.2 and GLM-5",
    )
