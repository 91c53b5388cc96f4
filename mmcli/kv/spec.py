"""KV-cache spec types: what one layer keeps per token (or per request), and its page size.

Attention kinds: full, sliding window, chunked local (Llama 4), multi-head latent attention
(MLA: one latent per token, stored once) and the key cache of a DeepSeek sparse-attention
indexer (beside each MLA cache of DeepSeek V3.2 and GLM-5). Recurrent-state layers are
:class:`MambaSpec` (``mmcli.kv.state``). Every spec answers how many pages one request reserves
(:meth:`KVCacheSpec.blocks_per_request`) given the request length and the tokens the engine
may write past a window in one step (``reserve_tokens``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mmcli.dtypes import KV_DTYPE_BYTES, kv_dtype_or_none
from mmcli.errors import InputError
from mmcli.kv.state import MambaSpec

#: Bytes per token per layer of vLLM's ``fp8_ds_mla`` cache (fp8 latent, scales, bf16 rope).
DS_MLA_BYTES_PER_TOKEN = 656


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


@dataclass(frozen=True, slots=True)
class KVCacheSpec:
    """What one layer stores per token: ``num_kv_heads`` keys and values of ``head_size``."""

    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: str

    def __post_init__(self) -> None:
        for name in ("block_size", "num_kv_heads", "head_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InputError(
                    f"{name} must be a positive integer, got {value!r}",
                    hint="KV heads, head size and block size are counts greater than 0",
                )
        if self.dtype not in KV_DTYPE_BYTES:
            # Also take a torch dtype or another spelling (torch.bfloat16, "bf16"), as the
            # engine's specs carry torch dtypes.
            canonical = kv_dtype_or_none(str(self.dtype))
            if canonical is None:
                raise InputError(
                    f"unknown KV dtype {self.dtype!r}",
                    hint=f"use one of: {', '.join(KV_DTYPE_BYTES)}",
                )
            object.__setattr__(self, "dtype", canonical)

    @property
    def attention(self) -> str:
        """The attention kind: ``full`` or ``sliding``."""
        raise NotImplementedError

    @property
    def dtype_bytes(self) -> int:
        """Bytes per element."""
        return KV_DTYPE_BYTES[self.dtype]

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token adds to this layer's cache: a key and a value for every KV head."""
        return 2 * self.num_kv_heads * self.head_size * self.dtype_bytes

    @property
    def page_size_bytes(self) -> int:
        """Bytes of one block of this layer: ``2 × block × heads × head size × dtype bytes``."""
        return self.block_size * self.bytes_per_token

    def tokens_held(self, max_model_len: int) -> int:
        """Tokens one sequence of ``max_model_len`` keeps in this layer (plain estimate)."""
        return max_model_len

    @property
    def type_key(self) -> str:
        """What the engine compares to put layers of different specs in one group."""
        return self.attention

    def blocks_per_request(self, max_model_len: int, reserve_tokens: int) -> int:
        """Blocks the engine reserves for one request at ``max_model_len``."""
        return cdiv(max_model_len, self.block_size)


@dataclass(frozen=True, slots=True)
class FullAttentionSpec(KVCacheSpec):
    """A layer attending to every earlier token: its cache grows with the sequence."""

    @property
    def attention(self) -> str:
        return "full"


@dataclass(frozen=True, slots=True)
class SlidingWindowSpec(KVCacheSpec):
    """A layer attending to the last ``sliding_window`` tokens only."""

    sliding_window: int = field(default=0)

    def __post_init__(self) -> None:
        KVCacheSpec.__post_init__(self)
        window = self.sliding_window
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise InputError(
                f"sliding_window must be a positive integer, got {window!r}",
                hint="a sliding layer needs the number of tokens it attends to",
            )

    @property
    def attention(self) -> str:
        return "sliding"

    def tokens_held(self, max_model_len: int) -> int:
        return min(max_model_len, self.sliding_window)

    @property
    def type_key(self) -> str:
        return f"sliding:{self.sliding_window}"

    def blocks_per_request(self, max_model_len: int, reserve_tokens: int) -> int:
        # The window need not start on a block boundary, hence one block more; and the tokens
        # of a step (a prefill chunk, or every in-flight batch) are written before the window
        # slides past them.
        tokens = min(self.sliding_window - 1 + reserve_tokens, max_model_len)
        return cdiv(tokens, self.block_size) + 1


@dataclass(frozen=True, slots=True)
class ChunkedLocalAttentionSpec(KVCacheSpec):
    """A layer attending within fixed chunks of ``attention_chunk_size`` tokens (Llama 4)."""

    attention_chunk_size: int = field(default=0)

    def __post_init__(self) -> None:
        KVCacheSpec.__post_init__(self)
        chunk = self.attention_chunk_size
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk <= 0:
            raise InputError(
                f"attention_chunk_size must be a positive integer, got {chunk!r}",
                hint="a chunked local layer needs its chunk length in tokens",
            )

    @property
    def attention(self) -> str:
        return "chunked"

    @property
    def type_key(self) -> str:
        return f"chunked:{self.attention_chunk_size}"

    def tokens_held(self, max_model_len: int) -> int:
        return min(max_model_len, self.attention_chunk_size)

    def blocks_per_request(self, max_model_len: int, reserve_tokens: int) -> int:
        tokens = min(self.attention_chunk_size + reserve_tokens, max_model_len)
        return cdiv(tokens, self.block_size)


@dataclass(frozen=True, slots=True)
class MLAAttentionSpec(FullAttentionSpec):
    """Multi-head latent attention: one latent of ``head_size`` per token, stored once.

    ``head_size`` is ``kv_lora_rank + qk_rope_head_dim`` (576 for DeepSeek V3) and
    ``num_kv_heads`` is 1. With ``ds_mla`` (vLLM's ``fp8_ds_mla``) a token takes 656 bytes.
    """

    ds_mla: bool = field(default=False)

    @property
    def attention(self) -> str:
        return "mla"

    @property
    def type_key(self) -> str:
        return "full"  # the engine's MLA spec is a full-attention spec

    @property
    def bytes_per_token(self) -> int:
        if self.ds_mla:
            return DS_MLA_BYTES_PER_TOKEN
        return self.num_kv_heads * self.head_size * self.dtype_bytes


#: The dtype vLLM allocates the sparse-attention indexer's cache in: raw bytes.
INDEXER_DTYPE = "uint8"


@dataclass(frozen=True, slots=True)
class IndexerCacheSpec(MLAAttentionSpec):
    """The key cache of a DeepSeek sparse-attention (DSA) indexer: vLLM's
    ``DeepseekV32IndexerCache``, one per decoder layer beside its MLA cache.

    The engine declares it as an MLA spec of one head whose ``head_size`` is the bytes of one
    token (fp8 keys of ``index_head_dim`` plus a 4-byte scale per 128 of them: 132 for
    DeepSeek V3.2) in ``uint8``, replicated on every tensor-parallel rank. Being a
    full-attention spec of the model's block size, it joins the MLA layers' group, so each
    block holds a page of both. ``--kv-cache-dtype`` does not change it.
    """

    def __post_init__(self) -> None:
        for name in ("block_size", "num_kv_heads", "head_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InputError(
                    f"{name} must be a positive integer, got {value!r}",
                    hint="the indexer cache has a head of index_head_dim bytes and scales",
                )
        if self.dtype != INDEXER_DTYPE or self.ds_mla:
            raise InputError(
                f"the indexer cache is {INDEXER_DTYPE} bytes, got dtype {self.dtype!r}",
                hint="the engine stores the indexer's fp8 keys and scales as raw bytes",
            )

    @property
    def attention(self) -> str:
        return "indexer"

    @property
    def dtype_bytes(self) -> int:
        return 1

    @property
    def bytes_per_token(self) -> int:
        return self.num_kv_heads * self.head_size


@dataclass(slots=True)
class KVCacheGroupSpec:
    """Layers that share one block table; the engine appends sharing layers to their target's."""

    layer_names: list[str]
    kv_cache_spec: KVCacheSpec | MambaSpec


@dataclass(slots=True)
class Layer:
    """One layer of a model as the planner sees it: its KV spec (None: it keeps no KV cache).

    Treat it as immutable (build a new one with :func:`dataclasses.replace`). It is not frozen
    only because a frozen dataclass takes four times as long to build, and a config may have a
    million layers.
    """

    name: str
    spec: KVCacheSpec | MambaSpec | None
    kv_sharing_target: str | None = None
    #: The layer type the config gave (``sliding_attention``, ``linear_attention``, …).
    kind: str = ""

    @property
    def attention(self) -> str:
        """``full``, ``sliding``, ``chunked``, ``mla``, ``indexer``, ``mamba``, or ``none``."""
        return "none" if self.spec is None else self.spec.attention
