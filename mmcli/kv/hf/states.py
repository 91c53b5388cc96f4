"""The recurrent state of a Hugging Face config's Mamba / linear-attention layers.

Sizes are whole-model (before tensor parallelism), read with the keys vLLM's model code
passes to its state-shape calculator:

* GDN (Qwen3-Next, Qwen3.5/3.6): ``linear_num_key_heads``, ``linear_key_head_dim``,
  ``linear_num_value_heads``, ``linear_value_head_dim``, ``linear_conv_kernel_dim``
  (transformers' defaults 16, 128, 32, 128, 4 for the Qwen model types).
* Short convolution (LFM2 ``conv`` layers): ``conv_dim``, ``conv_L_cache`` (default 3).
* MiniMax lightning attention: ``num_attention_heads`` × ``head_dim``.
* Mamba1 and Mamba2 of the attention-free models (``mamba``, ``falcon_mamba``, ``mamba2``):
  ``state_size``, ``conv_kernel``, Mamba2's ``num_heads``, ``head_dim``, ``n_groups``;
  intermediate ``expand × hidden_size`` (transformers' defaults where a key is missing).
* Mamba1 (Jamba): intermediate ``mamba_expand × hidden_size``, ``mamba_d_state``,
  ``mamba_d_conv``.
* Mamba2, Nemotron-H: ``mamba_num_heads``, ``mamba_head_dim`` (intermediate = their product),
  ``ssm_state_size``, ``n_groups``, ``conv_kernel``.
* Mamba2, Zamba2: ``n_mamba_heads``, ``mamba_headdim``, ``mamba_ngroups``, ``mamba_d_state``,
  ``mamba_d_conv``, intermediate ``mamba_expand × hidden_size``.
* Mamba2, Bamba / Falcon-H1 / GraniteMoeHybrid and other ``mamba`` layers: ``mamba_n_heads``,
  ``mamba_d_head``, ``mamba_n_groups``, ``mamba_d_state``, ``mamba_d_conv``, intermediate
  ``mamba_d_ssm`` (Falcon-H1) or ``mamba_expand × hidden_size``.

The conv state is in the model dtype. The SSM dtype: Nemotron-H's engine config sets it
(``mamba_ssm_cache_dtype`` from the config, else float16 in vLLM 0.15–0.19 and float32 from
0.20); Qwen3.5/3.6's takes ``mamba_ssm_dtype`` from the config (vLLM 0.18+); otherwise the
model dtype.
"""

from __future__ import annotations

from typing import Any

from mmcli.dtypes import kv_dtype
from mmcli.errors import InputError
from mmcli.kv.inputs.values import optional_int, shown, string
from mmcli.kv.releases import first_release
from mmcli.kv.state import MambaSpec

_QWEN_GDN_DEFAULTS = {
    "linear_num_key_heads": 16,
    "linear_key_head_dim": 128,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
}


def _need(text: dict[str, Any], key: str, what: str, where: str, default: int | None = None) -> int:
    value = optional_int(text, key, where)
    if value is None:
        if default is not None:
            return default
        raise InputError(
            f"{where}: the config has {what} layers, but {key} is not set, so their state "
            "size is unknown",
            hint=f"set {key} (see docs/kv-configs.md for the keys each layer kind needs)",
        )
    return value


def _expand_times_hidden(text: dict[str, Any], what: str, where: str) -> int:
    hidden = _need(text, "hidden_size", what, where)
    expand = text.get("mamba_expand")
    if expand is None:
        raise InputError(
            f"{where}: the config has {what} layers, but mamba_expand is not set, so their "
            "state size is unknown",
            hint="set mamba_expand (the intermediate size is mamba_expand × hidden_size)",
        )
    if isinstance(expand, bool) or not isinstance(expand, int | float) or expand <= 0:
        raise InputError(
            f"{where}: mamba_expand must be a positive number, got {shown(expand)}",
            hint="e.g. 2",
        )
    inner = expand * hidden
    if inner != int(inner):
        raise InputError(
            f"{where}: mamba_expand × hidden_size is {inner}, not a whole number",
            hint="check mamba_expand and hidden_size",
        )
    return int(inner)


#: transformers' defaults for the keys the attention-free models' states are read from
#: (MambaConfig, FalconMambaConfig, Mamba2Config; transformers 5.19).
_MAMBA_DEFAULTS: dict[str, dict[str, int]] = {
    "mamba": {"hidden_size": 768, "expand": 2, "state_size": 16, "conv_kernel": 4},
    "falcon_mamba": {"hidden_size": 768, "expand": 2, "state_size": 16, "conv_kernel": 4},
    "mamba2": {
        "hidden_size": 4096,
        "expand": 2,
        "state_size": 128,
        "conv_kernel": 4,
        "num_heads": 128,
        "head_dim": 64,
        "n_groups": 8,
    },
}


def _attention_free(
    text: dict[str, Any], model_type: str, dtype: str, ssm_dtype: str, where: str
) -> MambaSpec:
    """The state of an attention-free model's layer. The intermediate size is ``expand ×
    hidden_size`` as transformers sets it (its config classes overwrite an
    ``intermediate_size`` key with it, and vLLM's Mamba2 model computes it so)."""
    what = "Mamba1" if model_type != "mamba2" else "Mamba2"
    dims = {
        key: _need(text, key, what, where, default)
        for key, default in _MAMBA_DEFAULTS[model_type].items()
    }
    inner = dims["expand"] * dims["hidden_size"]
    if model_type != "mamba2":
        return MambaSpec(
            "mamba1",
            dtype,
            ssm_dtype,
            intermediate=inner,
            state_size=dims["state_size"],
            conv_kernel=dims["conv_kernel"],
        )
    if inner != dims["num_heads"] * dims["head_dim"]:
        raise InputError(
            f"{where}: hidden_size × expand is {inner} but num_heads × head_dim is "
            f"{dims['num_heads'] * dims['head_dim']}: transformers' Mamba2Config refuses "
            "such a config, so the engine cannot load it",
            hint="make hidden_size × expand equal num_heads × head_dim",
        )
    return MambaSpec(
        "mamba2",
        dtype,
        ssm_dtype,
        intermediate=inner,
        state_size=dims["state_size"],
        conv_kernel=dims["conv_kernel"],
        num_heads=dims["num_heads"],
        head_dim=dims["head_dim"],
        n_groups=dims["n_groups"],
    )


def ssm_dtype_rules(
    text: dict[str, Any], model_type: str, model_dtype: str, where: str
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The SSM state dtype of the newest release, and the per-release rule (may be empty)."""
    if model_type.startswith("nemotron_h"):
        named = text.get("mamba_ssm_cache_dtype")
        if named is not None:
            dtype = kv_dtype(string(named, f"{where}: mamba_ssm_cache_dtype"), where=where)
            return dtype, ((first_release("nemotron_h_ssm_dtype", "float16"), dtype),)
        return "float32", tuple(
            (first_release("nemotron_h_ssm_dtype", d), d) for d in ("float16", "float32")
        )
    if model_type.startswith("qwen3_5") and text.get("mamba_ssm_dtype") is not None:
        named = string(text["mamba_ssm_dtype"], f"{where}: mamba_ssm_dtype")
        dtype = kv_dtype(named, where=f"{where}: mamba_ssm_dtype")
        return dtype, ((first_release("qwen3_5_named_ssm_dtype"), dtype),)
    return model_dtype, ()


def state_spec(
    kind: str, text: dict[str, Any], model_type: str, dtype: str, ssm_dtype: str, where: str
) -> MambaSpec:
    """The state of a layer of ``kind`` (``linear_attention``, ``mamba``, …)."""
    if kind in ("linear_attention", "gdn", "linear"):
        if model_type.startswith("minimax"):
            heads = _need(text, "num_attention_heads", "lightning linear-attention", where)
            head_dim = optional_int(text, "head_dim", where)
            if head_dim is None:
                head_dim = _need(text, "hidden_size", "linear-attention", where) // heads
            return MambaSpec("linear", dtype, dtype, num_heads=heads, head_dim=head_dim)
        qwen = model_type.startswith(("qwen3_next", "qwen3_5"))
        what = "Gated DeltaNet (linear_attention)"
        dims = {
            key: _need(text, key, what, where, _QWEN_GDN_DEFAULTS[key] if qwen else None)
            for key in _QWEN_GDN_DEFAULTS
        }
        return MambaSpec(
            "gdn",
            dtype,
            ssm_dtype,
            key_heads=dims["linear_num_key_heads"],
            key_dim=dims["linear_key_head_dim"],
            value_heads=dims["linear_num_value_heads"],
            value_dim=dims["linear_value_head_dim"],
            conv_kernel=dims["linear_conv_kernel_dim"],
        )
    if kind in ("conv", "short_conv"):
        # LFM2's ShortConv: vLLM reads conv_dim (a config.json key; LFM2's transformers
        # config has no default for it) and conv_L_cache (default 3).
        return MambaSpec(
            "short_conv",
            dtype,
            ssm_dtype,
            intermediate=_need(text, "conv_dim", "short-convolution (conv)", where),
            conv_kernel=_need(text, "conv_L_cache", "short-convolution (conv)", where, 3),
        )
    if model_type in _MAMBA_DEFAULTS:
        return _attention_free(text, model_type, dtype, ssm_dtype, where)
    if model_type.startswith("jamba") or kind == "mamba1":
        what = "Mamba1"
        return MambaSpec(
            "mamba1",
            dtype,
            ssm_dtype,
            intermediate=_expand_times_hidden(text, what, where),
            state_size=_need(text, "mamba_d_state", what, where),
            conv_kernel=_need(text, "mamba_d_conv", what, where),
        )
    what = "Mamba2"
    if model_type.startswith("nemotron_h"):
        heads = _need(text, "mamba_num_heads", what, where)
        head_dim = _need(text, "mamba_head_dim", what, where)
        return MambaSpec(
            "mamba2",
            dtype,
            ssm_dtype,
            intermediate=heads * head_dim,
            state_size=_need(text, "ssm_state_size", what, where),
            conv_kernel=_need(text, "conv_kernel", what, where),
            num_heads=heads,
            head_dim=head_dim,
            n_groups=_need(text, "n_groups", what, where),
        )
    if model_type.startswith("zamba2"):
        return MambaSpec(
            "mamba2",
            dtype,
            ssm_dtype,
            intermediate=_expand_times_hidden(text, what, where),
            state_size=_need(text, "mamba_d_state", what, where),
            conv_kernel=_need(text, "mamba_d_conv", what, where),
            num_heads=_need(text, "n_mamba_heads", what, where),
            head_dim=_need(text, "mamba_headdim", what, where),
            n_groups=_need(text, "mamba_ngroups", what, where),
        )
    d_ssm = optional_int(text, "mamba_d_ssm", where)
    return MambaSpec(
        "mamba2",
        dtype,
        ssm_dtype,
        intermediate=d_ssm if d_ssm is not None else _expand_times_hidden(text, what, where),
        state_size=_need(text, "mamba_d_state", what, where),
        conv_kernel=_need(text, "mamba_d_conv", what, where),
        num_heads=_need(text, "mamba_n_heads", what, where),
        head_dim=_need(text, "mamba_d_head", what, where),
        n_groups=_need(text, "mamba_n_groups", what, where),
    )
