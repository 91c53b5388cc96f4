"""KV-cache spec types: what one attention layer keeps per token, and its page size."""

from __future__ import annotations

from dataclasses import dataclass, field

from mmcli.dtypes import KV_DTYPE_BYTES, kv_dtype_or_none
from mmcli.errors import InputError


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

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
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

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        # The window need not start on a block boundary, hence one block more; and a prefill
        # chunk of up to max_num_batched_tokens is written before the window slides past it.
        tokens = min(self.sliding_window - 1 + max_num_batched_tokens, max_model_len)
        return cdiv(tokens, self.block_size) + 1


@dataclass(slots=True)
class KVCacheGroupSpec:
    """Layers that share one block table; the engine appends sharing layers to their target's."""

    layer_names: list[str]
    kv_cache_spec: KVCacheSpec


@dataclass(frozen=True, slots=True)
class Layer:
    """One layer of a model as the planner sees it: its KV spec (None: it keeps no KV cache)."""

    name: str
    spec: KVCacheSpec | None
    kv_sharing_target: str | None = None
    #: The layer type the config gave (``sliding_attention``, ``linear_attention``, …).
    kind: str = ""

    @property
    def attention(self) -> str:
        """``full``, ``sliding``, or ``none`` for a layer without a KV cache."""
        return "none" if self.spec is None else self.spec.attention
