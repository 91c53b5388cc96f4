"""SGLang's hybrid GDN / Mamba-2 pools: the per-request state, its slots, and the attention cell.

A hybrid model (Qwen3-Next's Gated DeltaNet, Falcon-H1's and Nemotron-H's Mamba-2) gets two
pools in SGLang 0.5.3 and 0.5.4: a state pool of ``max_mamba_cache_size`` slots, each one
request's conv and SSM state in every state layer, and a token pool over the full-attention
layers only. Everything here follows SGLang's own config classes (``configs/qwen3_next.py``,
``configs/falcon_h1.py``, ``configs/nemotron_h.py``, ``configs/mamba_utils.py``) read from the
raw ``config.json``, as SGLang reads it, with the defaults of those classes; the release
differences are in :class:`mmcli.kv.sglang.releases.SglangRules`. The rules, with file and
line, are in docs/kv-share-engines.md.

* conv state ``(conv_dim / tp, conv_kernel − 1)`` in bfloat16 (``CONV_DTYPE``), SSM state of
  ``heads / tp × head_dim × state_size`` in float32 (``--mamba-ssm-dtype`` default);
  ``conv_dim = intermediate + 2 · n' · state_size``, ``n'`` the groups raised to tp when tp
  does not divide them (``extra_groups_for_head_shards``: ``tp − n``); 0.5.3's Qwen3-Next
  takes ``2 · key_heads · key_dim + value_heads · value_dim`` without that raise.
* state bytes per request = (conv + SSM bytes) × state layers (``mamba_cache_per_req``).
* attention cell = ``max(1, kv_heads // tp) × head_dim × 2 × full-attention layers × bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.sglang.qwen3_5 import QWEN3_5_TYPES, qwen3_5_text
from mmcli.kv.sglang.releases import RELEASES, SglangRules, newest_release
from mmcli.kv.sglang.swa_lists import QWEN3_5

_GIB = 2**30

#: ``--mamba-full-memory-ratio`` default (0.5.4 server_args.py:382; 0.5.7 :472).
MAMBA_FULL_MEMORY_RATIO = 0.9
#: ``CONV_DTYPE`` (bfloat16) and the default ``--mamba-ssm-dtype`` (float32), in bytes.
CONV_BYTES = 2
SSM_BYTES = 4


@dataclass(frozen=True)
class HybridState:
    """One request's recurrent state in SGLang's state pool, on one rank."""

    architecture: str
    #: "gdn" (Qwen3-Next), "mamba2" (Falcon-H1, Nemotron-H).
    kind: str
    state_layers: int
    attention_layers: int
    conv_shape: tuple[int, int]
    ssm_shape: tuple[int, int, int]
    #: KV heads per rank and head_dim of the attention layers, as SGLang's ModelConfig has them.
    kv_heads: int
    head_dim: int
    #: Whether the release keeps the radix cache on for this model (then the state budget is a
    #: share of the pool budget); off: a fixed number of slots.
    radix_cache: bool
    #: Bytes of one SSM state element: float32 unless the config's mamba_ssm_dtype says
    #: otherwise where the release reads it.
    ssm_dtype_bytes: int = SSM_BYTES

    @property
    def conv_bytes(self) -> int:
        """One layer's conv state for one request."""
        return prod(self.conv_shape) * CONV_BYTES

    @property
    def ssm_bytes(self) -> int:
        """One layer's SSM (temporal) state for one request."""
        return prod(self.ssm_shape) * self.ssm_dtype_bytes

    @property
    def bytes_per_request(self) -> int:
        """``mamba_cache_per_req``."""
        return (self.conv_bytes + self.ssm_bytes) * self.state_layers

    def intermediate_bytes(self, slots: int, draft_tokens: int) -> tuple[int, int]:
        """Bytes of the speculative intermediate SSM states and conv windows: one per draft
        token in each of ``slots`` + 1 slots (0.5.5 memory_pool.py:207, :239)."""
        ssm, conv = self.pool_bytes(slots)[::-1]
        return ssm * draft_tokens, conv * draft_tokens

    def pool_bytes(self, slots: int) -> tuple[int, int]:
        """Bytes of the conv and SSM buffers for ``slots`` slots (SGLang allocates one more)."""
        return (
            self.state_layers * (slots + 1) * prod(self.conv_shape) * CONV_BYTES,
            self.state_layers * (slots + 1) * prod(self.ssm_shape) * self.ssm_dtype_bytes,
        )


def _newest_state_pool(before: str | None = None) -> str:
    """The newest release whose hybrid state pool is mirrored (older than ``before``)."""
    names = [r.release for r in RELEASES]
    end = names.index(before) if before in names else len(names)
    return next(r.release for r in reversed(RELEASES[:end]) if r.hybrid_rule in ("fixed", "ratio"))


def _refuse(what: str, hint: str) -> InputError:
    return InputError(f"SGLang: {what}", hint=hint)


def _int(doc: dict[str, Any], key: str, default: int | None, arch: str) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _refuse(
            f"{arch}: {key} must be a positive integer for SGLang's state pool, got {value!r}",
            f"set {key} in the config",
        )
    return value


def _divide(value: int, tp: int, what: str, arch: str) -> int:
    if value % tp:
        raise _refuse(
            f"{arch}: {what} {value} does not divide over tp {tp} (SGLang's divide() asserts)",
            "pick a tensor-parallel size that divides it",
        )
    return value // tp


def _mamba2_shapes(
    *,
    tp: int,
    intermediate: int,
    n_groups: int,
    num_heads: int,
    head_dim: int,
    state_size: int,
    conv_kernel: int,
    arch: str,
) -> tuple[tuple[int, int], tuple[int, int, int]]:
    """``Mamba2StateShape.create`` (0.5.4 mamba_utils.py:50)."""
    if n_groups % tp:
        n_groups += tp - n_groups
    conv_dim = intermediate + 2 * n_groups * state_size
    conv = (_divide(conv_dim, tp, "conv_dim", arch), conv_kernel - 1)
    ssm = (_divide(num_heads, tp, "the state heads", arch), head_dim, state_size)
    return conv, ssm


def _attention(
    doc: dict[str, Any], tp: int, head_default: int | None, arch: str
) -> tuple[int, int]:
    heads = _int(doc, "num_attention_heads", None, arch)
    kv = doc.get("num_key_value_heads")
    kv = heads if kv is None else _int(doc, "num_key_value_heads", None, arch)
    if doc.get("head_dim") is None and head_default is None:
        head_dim = _int(doc, "hidden_size", None, arch) // heads
    else:
        head_dim = _int(doc, "head_dim", head_default, arch)
    return max(1, kv // tp), head_dim


def _qwen3_next(doc: dict[str, Any], rules: SglangRules, tp: int, arch: str) -> HybridState:
    layers = _int(doc, "num_hidden_layers", 48, arch)
    interval = _int(doc, "full_attention_interval", 4, arch)
    full = sum(1 for i in range(layers) if (i + 1) % interval == 0)
    key_heads = _int(doc, "linear_num_key_heads", 16, arch)
    value_heads = _int(doc, "linear_num_value_heads", 32, arch)
    key_dim = _int(doc, "linear_key_head_dim", 128, arch)
    value_dim = _int(doc, "linear_value_head_dim", 128, arch)
    kernel = _int(doc, "linear_conv_kernel_dim", 4, arch)
    if rules.hybrid_rule == "fixed":
        # 0.5.3 configs/qwen3_next.py:285 hybrid_gdn_params.
        conv_dim = key_dim * key_heads * 2 + value_dim * value_heads
        conv = (_divide(conv_dim, tp, "conv_dim", arch), kernel - 1)
        ssm = (_divide(value_heads, tp, "linear_num_value_heads", arch), key_dim, value_dim)
    else:
        conv, ssm = _mamba2_shapes(
            tp=tp,
            intermediate=value_dim * value_heads,
            n_groups=key_heads,
            num_heads=value_heads,
            head_dim=value_dim,
            state_size=key_dim,
            conv_kernel=kernel,
            arch=arch,
        )
    kv_heads, head_dim = _attention(doc, tp, 256, arch)
    # 0.5.3 turns the radix cache off for hybrid GDN models (model_runner.py:357); 0.5.4
    # keeps it on for Qwen3-Next (only mamba2_config models turn it off, :402).
    radix = rules.hybrid_rule == "ratio"
    return HybridState(arch, "gdn", layers - full, full, conv, ssm, kv_heads, head_dim, radix)


def _falcon_h1(doc: dict[str, Any], rules: SglangRules, tp: int, arch: str) -> HybridState:
    layers = _int(doc, "num_hidden_layers", 32, arch)
    hidden = _int(doc, "hidden_size", 4096, arch)
    n_heads = _int(doc, "mamba_n_heads", 128, arch)
    d_ssm = doc.get("mamba_d_ssm", 1024)
    if d_ssm is None:
        if rules.hybrid_rule == "fixed":
            raise _refuse(
                f"{arch}: mamba_d_ssm null is not sized by SGLang {rules.release} (its "
                "hybrid_gdn_params adds None to the groups)",
                "set mamba_d_ssm, or plan with --sglang-version "
                f"{newest_release(lambda r: r.hybrid_rule == 'ratio')}",
            )
        intermediate = _int(doc, "mamba_expand", 2, arch) * hidden
    else:
        intermediate = _int(doc, "mamba_d_ssm", 1024, arch)
    d_head = doc.get("mamba_d_head", "auto")
    d_head = intermediate // n_heads if d_head == "auto" else _int(doc, "mamba_d_head", 0, arch)
    if d_head * n_heads != intermediate:
        raise _refuse(
            f"{arch}: mamba_d_head × mamba_n_heads is not the Mamba intermediate size "
            "(FalconH1Config raises)",
            "check the config",
        )
    conv, ssm = _mamba2_shapes(
        tp=tp,
        intermediate=intermediate,
        n_groups=_int(doc, "mamba_n_groups", 1, arch),
        num_heads=n_heads,
        head_dim=d_head,
        state_size=_int(doc, "mamba_d_state", 256, arch),
        conv_kernel=_int(doc, "mamba_d_conv", 4, arch),
        arch=arch,
    )
    if rules.hybrid_rule == "fixed":  # 0.5.3 orders the SSM state (d_state, d_head, heads/tp)
        ssm = (ssm[2], ssm[1], ssm[0])
    kv_heads, head_dim = _attention(doc, tp, None, arch)
    # Every Falcon-H1 layer has both attention and a Mamba-2 mixer.
    radix = rules.mamba2_radix_cache
    return HybridState(arch, "mamba2", layers, layers, conv, ssm, kv_heads, head_dim, radix)


def _nemotron_h(doc: dict[str, Any], rules: SglangRules, tp: int, arch: str) -> HybridState:
    pattern = doc.get("hybrid_override_pattern")
    layers = _int(doc, "num_hidden_layers", 52, arch)
    if not isinstance(pattern, str) or len(pattern) != layers:
        raise _refuse(
            f"{arch}: hybrid_override_pattern must be a string of num_hidden_layers characters "
            "(NemotronHConfig asserts)",
            "check the config",
        )
    if "n_groups" not in doc:
        raise _refuse(
            f"{arch}: the config has no n_groups, which SGLang's NemotronHConfig reads for the "
            "state shape (it is not one of its arguments)",
            "add n_groups as the checkpoint's config.json has it",
        )
    # conv_kernel in config.json overrides the class's conv_kernel = mamba_d_conv.
    kernel = _int(doc, "conv_kernel" if "conv_kernel" in doc else "mamba_d_conv", 4, arch)
    heads = _int(doc, "mamba_num_heads", 128, arch)
    head_dim = _int(doc, "mamba_head_dim", 64, arch)
    conv, ssm = _mamba2_shapes(
        tp=tp,
        intermediate=heads * head_dim,
        n_groups=_int(doc, "n_groups", None, arch),
        num_heads=heads,
        head_dim=head_dim,
        state_size=_int(doc, "ssm_state_size", 128, arch),
        conv_kernel=kernel,
        arch=arch,
    )
    attention_head = doc.get("attention_head_dim")
    kv_heads, attn_dim = _attention(doc, tp, 128, arch)
    if attention_head is not None and attention_head != attn_dim:
        raise _refuse(
            f"{arch}: attention_head_dim {attention_head} differs from the head_dim "
            f"{attn_dim} SGLang's NemotronHConfig sizes the KV pool with; not mirrored",
            "plan it for vLLM (--engine vllm)",
        )
    # nemotron_h is a mamba2_config model: the radix cache is turned off (0.5.4
    # model_runner.py:402) up to 0.5.6, kept from 0.5.7 (``mamba2_radix_cache``).
    mamba, attention = pattern.count("M"), pattern.count("*")
    radix = rules.mamba2_radix_cache
    return HybridState(arch, "mamba2", mamba, attention, conv, ssm, kv_heads, attn_dim, radix)


def hybrid_state(doc: dict[str, Any], rules: SglangRules, arch: str, *, tp: int) -> HybridState:
    """The state of ``arch`` on one of ``tp`` ranks; refuses what the release does not serve."""
    kind = dict(rules.hybrid_models).get(arch)
    if rules.qwen3_5_served and arch in QWEN3_5:
        kind = QWEN3_5_TYPES[arch]
    model_type = doc.get("model_type")
    if rules.hybrid_rule == "unread":
        raise _refuse(
            f"{arch or 'this architecture'} (a hybrid Mamba / GDN / linear-attention model): "
            f"the state pool of SGLang {rules.release} is not mirrored (its sizing changed "
            f"after {_newest_state_pool(rules.release)})",
            f"pass --sglang-version {_newest_state_pool()}, or plan it for vLLM (--engine vllm)",
        )
    if arch in rules.hybrid_unmirrored:
        raise _refuse(
            f"{arch}: SGLang {rules.release} serves it with a GDN state pool (its text_config "
            "read by configs/qwen3_5.py), which is not mirrored",
            f"pass --sglang-version {newest_release(lambda r: r.qwen3_5_served)}, or plan it for "
            "vLLM (--engine vllm)",
        )
    if kind is None:
        served = ", ".join(a for a, _ in rules.hybrid_models) or "none"
        raise _refuse(
            f"{arch or 'this architecture'} (a hybrid Mamba / GDN / linear-attention model) has "
            f"no hybrid state pool in SGLang {rules.release} (hybrid models it serves: {served})",
            "plan this model for vLLM (--engine vllm), whose state pool mmcli mirrors",
        )
    if kind != model_type:
        raise _refuse(
            f"{arch} with model_type {model_type!r}: SGLang picks its hybrid config class by "
            f"model_type {kind!r}; another model_type is not mirrored",
            f"use the checkpoint's config.json (model_type {kind!r})",
        )
    text = qwen3_5_text(doc, arch) if kind in QWEN3_5_TYPES.values() else doc
    if kind in ("qwen3_next", *QWEN3_5_TYPES.values()):
        state = _qwen3_next(text, rules, tp, arch)
    elif kind == "falcon_h1":
        state = _falcon_h1(text, rules, tp, arch)
    else:
        state = _nemotron_h(text, rules, tp, arch)
    ssm = _SSM_DTYPES.get(str(text.get("mamba_ssm_dtype"))) if rules.ssm_dtype_from_config else None
    return state if ssm is None else replace(state, ssm_dtype_bytes=ssm)


#: configs/mamba_utils.py ``mamba2_state_dtype`` (0.5.9): the config's mamba_ssm_dtype, one of
#: these, unless --mamba-ssm-dtype is given (another value: a warning and float32).
_SSM_DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2}


def state_slots(
    state: HybridState,
    rest_gib: float,
    *,
    max_running_requests: int | None,
    ratio: float,
    draft_tokens: int = 0,
    reserved_requests: int | None = None,
) -> tuple[int, float]:
    """``max_mamba_cache_size`` and the GiB left for the token pool (``rest_gib``: the budget).

    0.5.3 (model_runner.py:357, :1291): a fixed 512 slots (``--max-running-requests`` when set),
    taken off the budget. 0.5.4 (``handle_max_mamba_cache``, model_runner.py:1433): with the
    radix cache on, the slots take ``rest × r / (1 + r)`` (``mamba_full_memory_ratio`` r, 0.9);
    with it off (Falcon-H1, Nemotron-H), the fixed 512 (or ``--max-running-requests``). The
    float arithmetic is SGLang's, in its order. ``draft_tokens`` (speculative decoding's D): each
    slot also holds D intermediate states, so the slots are solved with ``per_req × (1 + D)``
    (``// (1 + D)``, and ``× (1 + D)`` off the budget). ``reserved_requests`` (0.5.7, the
    ``--max-running-requests`` of a speculative run): the D intermediate states are instead
    reserved apart, ``per_req × requests × D`` off the budget before the solve
    (model_runner_kv_cache_mixin.py:165), and each slot holds one state.
    """
    per_req = state.bytes_per_request
    if reserved_requests is not None and draft_tokens:
        rest_gib -= per_req * reserved_requests * draft_tokens / (1 << 30)
        draft_tokens = 0
    if state.radix_cache:
        raw = rest_gib * ratio / (1 + ratio)
        slots = int((raw * (1 << 30)) // per_req // (1 + draft_tokens))
    else:
        slots = max_running_requests if max_running_requests is not None else 512
    return slots, rest_gib - slots * per_req * (1 + draft_tokens) / (1 << 30)


def state_line(state: HybridState, rules: SglangRules, slots: int | None) -> str:
    """MambaPool's line: 0.5.4 names the slots (its size); 0.5.3 sizes it by the request pool."""
    if slots is None:
        return "Mamba Cache is allocated. … (its size needs the context length: --max-model-len)"
    conv, ssm = state.pool_bytes(slots)
    sizes = f"conv_state size: {conv / _GIB:.2f}GB, ssm_state size: {ssm / _GIB:.2f}GB"
    if rules.hybrid_rule == "ratio":
        return f"Mamba Cache is allocated. max_mamba_cache_size: {slots}, {sizes}"
    return f"Mamba Cache is allocated. {sizes}"
