"""Recurrent-state layers (Mamba1, Mamba2, Gated DeltaNet, lightning linear attention).

Such a layer keeps a fixed-size state per request — a convolution state and an SSM/recurrent
state — in the same memory pool as the attention pages. Its "page" is one request's state;
the engine raises the attention block size until an attention page is at least that big, then
pads the state page to the attention page (so every page in the pool has one size).

State shapes per tensor-parallel rank (``tp``), as vLLM's ``MambaStateShapeCalculator`` gives them:

* Mamba1: conv (intermediate/tp, conv_kernel − 1), ssm (intermediate/tp, state_size).
* Mamba2: groups n' = n_groups rounded up to a multiple of tp when tp does not divide it;
  conv ((intermediate + 2·n'·state_size)/tp, conv_kernel − 1), ssm (heads/tp, head_dim, state_size).
* Gated DeltaNet (Qwen3-Next, Qwen3.5/3.6): conv ((2·key_heads·key_dim + value_heads·value_dim)/tp,
  conv_kernel − 1), recurrent (value_heads/tp, value_dim, key_dim).
* Lightning linear attention (MiniMax): one state (heads/tp, head_dim, head_dim).
* Short convolution (LFM2): one conv state (conv_dim/tp, conv_L_cache − 1), model dtype.

With speculative decoding, the GDN and Mamba2 conv states of the models that pass it are
``num_spec`` (= ``num_speculative_tokens``) columns wider: conv_kernel − 1 + num_spec.

The conv state is kept in the model dtype; the SSM state in ``mamba_ssm_cache_dtype`` when set.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from mmcli.dtypes import KV_DTYPE_BYTES
from mmcli.errors import InputError

#: State kinds and the dimensions each needs (all positive integers).
STATE_KINDS: dict[str, tuple[str, ...]] = {
    "mamba1": ("intermediate", "state_size", "conv_kernel"),
    "mamba2": ("intermediate", "state_size", "conv_kernel", "num_heads", "head_dim", "n_groups"),
    "gdn": ("key_heads", "key_dim", "value_heads", "value_dim", "conv_kernel"),
    "linear": ("num_heads", "head_dim"),
    "short_conv": ("intermediate", "conv_kernel"),
}


@dataclass(frozen=True, slots=True)
class MambaSpec:
    """One recurrent-state layer: its state geometry (whole model, before tensor parallelism)."""

    kind: str
    dtype: str  # the conv state's dtype (the model dtype)
    ssm_dtype: str  # the SSM / recurrent state's dtype
    intermediate: int = 0
    state_size: int = 0
    conv_kernel: int = 0
    num_heads: int = 0
    head_dim: int = 0
    n_groups: int = 0
    key_heads: int = 0
    key_dim: int = 0
    value_heads: int = 0
    value_dim: int = 0
    tp: int = 1
    #: The attention block size this layer's page was matched to (set by the planner).
    block_size: int = 0
    #: The page after padding to the attention page (set by the planner; None: unpadded).
    page_size_padded: int | None = None
    #: Conv columns added for speculative decoding (``num_spec`` of vLLM's shape calculator).
    num_spec: int = 0
    #: States one request holds: 1 without prefix caching, 2 in the engine's "align" mode,
    #: and a Mamba-2 state's prefill checkpoint block on top from 0.32 (set by the planner).
    pages_per_request: int = 1

    def __post_init__(self) -> None:
        needed = STATE_KINDS.get(self.kind)
        if needed is None:
            raise InputError(
                f"unknown state kind {self.kind!r}",
                hint=f"use one of: {', '.join(STATE_KINDS)}",
            )
        for name in needed:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InputError(
                    f"a {self.kind} state needs {name} as a positive integer, got {value!r}",
                    hint=f"a {self.kind} layer is described by {', '.join(needed)}",
                )
        for name in ("dtype", "ssm_dtype"):
            if getattr(self, name) not in KV_DTYPE_BYTES:
                raise InputError(
                    f"unknown state dtype {getattr(self, name)!r}",
                    hint=f"use one of: {', '.join(KV_DTYPE_BYTES)}",
                )

    @property
    def attention(self) -> str:
        """The layer type for grouping: ``mamba`` (all recurrent-state kinds)."""
        return "mamba"

    def _split(self, value: int, what: str) -> int:
        if value % self.tp:
            raise InputError(
                f"the {self.kind} state's {what} ({value}) cannot be split evenly across "
                f"--tensor-parallel-size {self.tp}",
                hint="the engine shards the state over the tensor-parallel ranks",
            )
        return value // self.tp

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        """The state tensors' shapes on one rank: (conv, ssm) or (state,) for linear attention."""
        if self.kind == "mamba1":
            inner = self._split(self.intermediate, "intermediate size")
            return (inner, self.conv_kernel - 1), (inner, self.state_size)
        if self.kind == "mamba2":
            groups = self.n_groups
            if groups % self.tp:
                groups += self.tp - groups % self.tp  # the engine replicates groups up to tp
            conv_dim = self.intermediate + 2 * groups * self.state_size
            conv = (self._split(conv_dim, "conv dimension"), self.conv_kernel - 1 + self.num_spec)
            return conv, (self._split(self.num_heads, "heads"), self.head_dim, self.state_size)
        if self.kind == "gdn":
            conv_dim = 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim
            conv = (self._split(conv_dim, "conv dimension"), self.conv_kernel - 1 + self.num_spec)
            heads = self._split(self.value_heads, "value heads")
            return conv, (heads, self.value_dim, self.key_dim)
        if self.kind == "short_conv":
            inner = self._split(self.intermediate, "conv dimension")
            return ((inner, self.conv_kernel - 1 + self.num_spec),)
        heads = self._split(self.num_heads, "heads")
        return ((heads, self.head_dim, self.head_dim),)

    def state_dtypes(self) -> tuple[str, ...]:
        """The dtype of each state tensor, in the order of :meth:`shapes`."""
        if self.kind == "short_conv":
            return (self.dtype,)  # a conv state only, in the model dtype
        return (self.ssm_dtype,) if self.kind == "linear" else (self.dtype, self.ssm_dtype)

    @property
    def state_bytes(self) -> int:
        """Bytes of one request's state on one rank (the real, unpadded page)."""
        return sum(
            prod(shape) * KV_DTYPE_BYTES[dtype]
            for shape, dtype in zip(self.shapes(), self.state_dtypes(), strict=True)
        )

    @property
    def page_size_bytes(self) -> int:
        """The page in the pool: the state, padded to the attention page once planned."""
        return self.page_size_padded if self.page_size_padded is not None else self.state_bytes

    @property
    def bytes_per_token(self) -> int:
        """A state does not grow with the sequence."""
        return 0

    @property
    def type_key(self) -> str:
        """What the engine compares to put layers of different specs in one group."""
        return "mamba"

    def tokens_held(self, max_model_len: int) -> int:
        """A state holds no per-token cache."""
        return 0

    def blocks_per_request(self, max_model_len: int, reserve_tokens: int) -> int:
        """Pages one request reserves: its state(s), whatever its length."""
        return self.pages_per_request
