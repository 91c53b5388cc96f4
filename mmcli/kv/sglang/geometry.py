"""The model as SGLang's token pool sees it: one cell per token over every attention layer.

SGLang keeps one pool slot per token in every layer (``MHATokenToKVPool``: K and V of
``kv_heads/tp × head_dim`` per layer; ``MLATokenToKVPool``: one latent of ``kv_lora_rank +
qk_rope_head_dim``, not split by tp). The layers come from mmcli's reading of the config
(:func:`mmcli.kv.inputs.layer_config.load_config`); what SGLang does differently for a model
that mmcli does not mirror is refused here, naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmcli.dtypes import KV_DTYPE_BYTES
from mmcli.dtypes import find as find_dtype
from mmcli.errors import InputError
from mmcli.kv.model import ModelConfig, architecture
from mmcli.kv.sglang.hybrid import HybridState, hybrid_state
from mmcli.kv.sglang.releases import SglangRules, newest_release
from mmcli.kv.sglang.swa_lists import GEMMA4
from mmcli.kv.spec import KVCacheSpec, MLAAttentionSpec
from mmcli.kv.state import MambaSpec

#: SGLang's ``--kv-cache-dtype`` values and their bytes (``auto``: the model dtype).
KV_CACHE_DTYPES = {"fp8_e4m3": 1, "fp8_e5m2": 1}

_GIB = 2**30


@dataclass(frozen=True)
class Cell:
    """What one token takes in the pool of one rank."""

    layers: int
    #: KV heads per rank (MHA) or 1 (MLA).
    heads: int
    #: head_dim (MHA) or kv_lora_rank + qk_rope_head_dim (MLA).
    head_dim: int
    dtype_bytes: int
    mla: bool
    #: Sliding layers that keep every token here (no hybrid pool for this model).
    sliding_as_full: int = 0
    #: The pool's torch dtype as the KV line names it ("" where mmcli cannot tell).
    dtype_name: str = ""

    @property
    def bytes_per_token(self) -> int:
        """``profile_max_num_token``'s ``cell_size``."""
        factor = 1 if self.mla else 2
        return self.heads * self.head_dim * self.layers * factor * self.dtype_bytes

    def tensor_bytes(self, slots: int) -> int:
        """Bytes of one of the pool's K (or V, or latent) buffers over all layers."""
        return slots * self.heads * self.head_dim * self.layers * self.dtype_bytes


def _refuse(what: str, hint: str) -> InputError:
    return InputError(f"SGLang: {what}", hint=hint)


def sglang_cell(
    config: ModelConfig, doc: dict[str, Any], rules: SglangRules, *, tp: int, kv_dtype: str
) -> Cell:
    """The cell of ``config`` on one of ``tp`` ranks; refuses what is not mirrored."""
    specs = [layer.spec for layer in config.layers]
    if any(isinstance(s, MambaSpec) for s in specs):
        raise _refuse(
            "the model has Mamba / GDN state layers: SGLang keeps their state in a state pool "
            "beside the token pool, which a token-pool cell alone does not describe",
            "plan it with kv-share plan --engine sglang, which sizes both pools",
        )
    if any(s is None for s in specs):
        raise _refuse(
            "a model with layers that keep no KV cache is not mirrored (SGLang counts "
            "num_hidden_layers into the cell)",
            "plan it for vLLM (--engine vllm)",
        )
    gemma4_pools = architecture(doc) == GEMMA4 and GEMMA4 in rules.hybrid_swa_archs
    if any(layer.kv_sharing_target for layer in config.layers) and not gemma4_pools:
        # Gemma 4 E2B / E4B on its hybrid pools: the shared layers read an earlier layer's KV
        # (gemma4_causal.py:285 in 0.5.11) while get_hybrid_layer_ids still gives them pool
        # slots (sglang/gemma4.py counts layer_types); elsewhere not mirrored.
        key = "num_kv_shared_layers" if architecture(doc) == GEMMA4 else "Gemma 3n-style"
        raise _refuse(
            f"cross-layer KV sharing ({key}) is not mirrored",
            "plan it for vLLM (--engine vllm)",
        )
    attention = [s for s in specs if isinstance(s, KVCacheSpec)]
    if not attention:
        raise _refuse("the model has no attention layer", "check the config")
    sliding = sum(1 for s in attention if s.attention in ("sliding", "chunked"))
    arch = architecture(doc)
    if sliding and arch in rules.swa_pool_unmirrored_for:
        raise _refuse(
            f"SGLang {rules.release} gives {arch} a hybrid sliding-window pool "
            "(swa_full_tokens_ratio split), which is not mirrored",
            "plan it for vLLM (--engine vllm)",
        )
    if any(getattr(s, "ds_mla", False) for s in attention) or doc.get("index_topk"):
        raise _refuse(
            "DeepSeek sparse attention (the fp8 DSA / NSA layout and its indexer) is not mirrored",
            "plan it for vLLM (--engine vllm)",
        )
    latent = {isinstance(s, MLAAttentionSpec) for s in attention}
    shapes = {(s.num_kv_heads, s.head_size, s.dtype) for s in attention}
    # Gemma 4's two shapes are the hybrid pool's (sglang/gemma4.py), which sizes its cell.
    two_pools = arch == GEMMA4 and arch in rules.hybrid_swa_archs
    if len(latent) != 1 or (len(shapes) != 1 and not two_pools):
        raise _refuse(
            "layers of different head geometry are not mirrored (SGLang sizes one cell "
            "from the config's single head_dim and KV head count)",
            "plan it for vLLM (--engine vllm)",
        )
    spec = attention[0]
    mla = isinstance(spec, MLAAttentionSpec)
    dtype_bytes = _dtype_bytes(spec, doc, rules, kv_dtype)
    heads = 1 if mla else max(1, spec.num_kv_heads // tp)
    if sliding and not rules.sliding_mirrored:
        raise _refuse(
            f"sliding-window (or chunked) layers in SGLang {rules.release}: its hybrid SWA pool "
            "(is_hybrid_swa_model, swa_full_tokens_ratio) is not mirrored",
            f"pass --sglang-version {newest_release(lambda r: r.sliding_mirrored)}, or plan it "
            "for vLLM (--engine vllm)",
        )
    if not mla and rules.v_head_dim_in_cell:
        _check_v_head_dim(doc, spec.head_size, rules)
    name = _torch_dtype(spec, kv_dtype)
    return Cell(len(attention), heads, spec.head_size, dtype_bytes, mla, sliding, name)


def _torch_dtype(spec: KVCacheSpec, kv_dtype: str) -> str:
    """The torch dtype of SGLang's pool as its KV line names it (mem_cache/memory_pool.py
    ``self.dtype``): --kv-cache-dtype's (fp8_e4m3 is torch.float8_e4m3fn), for ``auto`` the
    model's; "" for a dtype a KV pool does not take (1- and 2-byte floats only)."""
    found = find_dtype(spec.dtype if kv_dtype == "auto" else kv_dtype)
    if found is None or found.kind != "float" or found.bits not in (8, 16):
        return ""
    return f"torch.{found.name}"


def kv_line_head(rules: SglangRules, cell: Cell) -> str:
    """``KV Cache is allocated. `` and, from the release that names it, the pool's dtype
    (0.5.13 mem_cache/memory_pool.py:819 ``dtype: {self.dtype}``; "…" where not known)."""
    head = "KV Cache is allocated. "
    return head + f"dtype: {cell.dtype_name or '…'}, " if rules.kv_line_names_dtype else head


def _check_v_head_dim(doc: dict[str, Any], head_dim: int, rules: SglangRules) -> None:
    """Refuse a config whose ``v_head_dim`` is not ``head_dim`` (the cell is K + V heads)."""
    text = doc.get("text_config") if isinstance(doc.get("text_config"), dict) else doc
    v_head_dim = text.get("v_head_dim", head_dim) if isinstance(text, dict) else head_dim
    if v_head_dim != head_dim:
        raise _refuse(
            f"v_head_dim {v_head_dim} differs from head_dim {head_dim}: SGLang "
            f"{rules.release} sizes the cell as kv_heads · (head_dim + v_head_dim), which is "
            "not mirrored",
            "plan it for vLLM (--engine vllm)",
        )


def _dtype_bytes(spec: KVCacheSpec, doc: dict[str, Any], rules: SglangRules, kv_dtype: str) -> int:
    """Bytes of one KV element: ``--kv-cache-dtype``, or the model dtype with ``auto``."""
    if kv_dtype == "auto":
        quant = doc.get("quantization_config")
        if rules.kv_quant_algo_refused and isinstance(quant, dict):
            if quant.get("kv_cache_quant_algo") is not None:
                raise _refuse(
                    "kv_cache_quant_algo in quantization_config picks the KV dtype in this "
                    "release, which is not mirrored",
                    "pass --kv-dtype fp8_e4m3 (or the dtype the log names)",
                )
        return KV_DTYPE_BYTES[spec.dtype]
    if kv_dtype in KV_CACHE_DTYPES or kv_dtype in KV_DTYPE_BYTES:
        return KV_CACHE_DTYPES.get(kv_dtype) or KV_DTYPE_BYTES[kv_dtype]
    raise _refuse(f"KV cache dtype {kv_dtype} is not mirrored", "use auto or fp8")


def hybrid_cell(
    config: ModelConfig, doc: dict[str, Any], rules: SglangRules, *, tp: int, kv_dtype: str
) -> tuple[Cell, HybridState]:
    """The attention cell and the per-request state of a hybrid GDN / Mamba model."""
    state = hybrid_state(doc, rules, architecture(doc), tp=tp)
    attention = [layer.spec for layer in config.layers if isinstance(layer.spec, KVCacheSpec)]
    if not attention or any(isinstance(s, MLAAttentionSpec) for s in attention):
        raise _refuse(
            "a hybrid model without plain attention layers is not mirrored",
            "plan it for vLLM (--engine vllm)",
        )
    dtype_bytes = _dtype_bytes(attention[0], doc, rules, kv_dtype)
    name = _torch_dtype(attention[0], kv_dtype)
    cell = Cell(state.attention_layers, state.kv_heads, state.head_dim, dtype_bytes, False, 0, name)
    return cell, state


def sliding_note(doc: dict[str, Any], rules: SglangRules, count: int) -> str | None:
    """Why sliding (or chunked) layers keep every token in this release, or None."""
    if not count:
        return None
    arch = architecture(doc) or "this architecture"
    if not rules.has_swa_pool:
        why = f"SGLang {rules.release} has no hybrid sliding-window pool"
    elif arch in rules.swa_disabled_for:
        why = f"SGLang {rules.release} turns the hybrid SWA pool off for {arch} (server_args)"
    elif arch.startswith("Llama4"):
        why = "Llama 4's chunked layers get a hybrid pool only with --hybrid-kvcache-ratio"
    else:
        why = (
            f"{arch} is not on SGLang's hybrid-SWA list (its model class defines no "
            "get_attention_sliding_window_size)"
        )
    return f"{why}, so its {count} sliding layers keep every token, as full layers do"


def pool_log_lines(
    cell: Cell, tokens: int, page: int, running: int | None, context: int | None, head: str
) -> list[str]:
    """The token pool's "KV Cache is allocated" line (``head``: its start, see
    :func:`kv_line_head`) and the scheduler's totals line."""
    slots = tokens + page
    size = cell.tensor_bytes(slots) / _GIB
    if cell.mla:
        first = f"{head}#tokens: {tokens}, KV size: {size:.2f} GB"
    else:
        first = f"{head}#tokens: {tokens}, K size: {size:.2f} GB, V size: {size:.2f} GB"
    ctx = "?" if context is None else str(context)
    runs = "?" if running is None else str(running)
    second = f"max_total_num_tokens={tokens}, …, max_running_requests={runs}, "
    second += f"context_len={ctx}"
    return [first, second]
