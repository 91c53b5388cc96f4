"""Qwen3.5 / 3.6 on SGLang: how a release that serves them (row field ``qwen3_5_served``) reads
their config for the GDN state pool (mmcli/kv/sglang/hybrid.py sizes it as Qwen3-Next's).

0.5.9 configs/qwen3_5.py: Qwen3_5Config / Qwen3_5MoeConfig (model_type ``qwen3_5`` /
``qwen3_5_moe``) hold a ``text_config`` (Qwen3_5TextConfig, a Qwen3NextConfig subclass) and a
``vision_config`` (a default one when the file has none, :95). model_runner.py:1578
``hybrid_gdn_config`` returns ``get_text_config()``, so the state shape, the layers and the
SSM dtype (configs/mamba_utils.py:76: the text config's own mamba_ssm_dtype) come from it.
"""

from __future__ import annotations

from typing import Any

from mmcli.errors import InputError
from mmcli.kv.model import architecture
from mmcli.kv.sglang.rules import SglangRules
from mmcli.kv.sglang.swa_lists import QWEN3_5


def _refuse(what: str, hint: str) -> InputError:
    return InputError(f"SGLang: {what}", hint=hint)


def _positive(doc: dict[str, Any], key: str, arch: str, default: int | None = None) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _refuse(
            f"{arch}: text_config's {key} must be a positive integer, got {value!r}",
            f"set {key} in the config's text_config",
        )
    return value


#: The top-level model_type SGLang's AutoConfig maps to Qwen3_5Config / Qwen3_5MoeConfig
#: (0.5.9 configs/qwen3_5.py), whose ``text_config`` (a Qwen3NextConfig) the state pool reads.
QWEN3_5_TYPES = dict(zip(QWEN3_5, ("qwen3_5", "qwen3_5_moe"), strict=True))


def qwen3_5_text(doc: dict[str, Any], arch: str) -> dict[str, Any]:
    """The text_config ``hybrid_gdn_config`` returns (0.5.9 model_runner.py:1578
    ``get_text_config()``): Qwen3NextConfig's reading, whose ``layers_block_type`` takes every
    ``full_attention_interval``-th layer as full attention and ignores ``layer_types``."""
    text = doc.get("text_config")
    if not isinstance(text, dict) or "full_attention_interval" not in text:
        raise _refuse(
            f"{arch}: SGLang reads the layers from text_config's full_attention_interval, "
            "which this config does not give (Qwen3_5Config's defaults are not mirrored)",
            "use the checkpoint's config.json, with its text_config",
        )
    every = _positive(text, "full_attention_interval", arch)
    layers = _positive(text, "num_hidden_layers", arch, 48)
    pattern = [
        "full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)
    ]
    if text.get("layer_types", pattern) != pattern:
        raise _refuse(
            f"{arch}: text_config's layer_types differ from full_attention_interval {every}, "
            "whose pattern SGLang follows (layer_types is ignored); not mirrored",
            "use the checkpoint's config.json, whose layer_types follow the interval",
        )
    return text


def check_default_vision(doc: dict[str, Any], rules: SglangRules) -> None:
    """Refuses a default fraction for Qwen3.5 / 3.6 without a vision_config: Qwen3_5Config
    builds a default one (0.5.9 configs/qwen3_5.py:95), which adjust_mem_fraction_for_vlm
    (server_args.py:5483) scales the fraction by; mmcli reads the ViT from the config only."""
    arch = architecture(doc)
    if rules.qwen3_5_served and arch in QWEN3_5 and not isinstance(doc.get("vision_config"), dict):
        raise _refuse(
            f"{arch}: the config has no vision_config; SGLang {rules.release} scales the default "
            "mem_fraction_static by the ViT of the default one Qwen3_5Config builds, which is "
            "not mirrored",
            "use the checkpoint's config.json (with its vision_config), or pass "
            "--mem-fraction-static or --memory",
        )


def check_target_nextn(doc: dict[str, Any], rules: SglangRules, speculative: object) -> None:
    """Refuses a speculative run where SGLang would add the target's ``num_nextn_predict_layers``
    draft layers to the KV cell (row field ``target_nextn_layers_in_cell``): not mirrored.
    ModelConfig reads the key from the text config (``get_hf_text_config``: the text_config of
    Qwen3.5 / 3.6, the top level otherwise)."""
    text = doc.get("text_config") if architecture(doc) in QWEN3_5 else doc
    if speculative is None or not rules.target_nextn_layers_in_cell or not isinstance(text, dict):
        return
    if text.get("num_nextn_predict_layers") is not None:
        raise _refuse(
            f"{rules.release} sizes a path-less NEXTN draft's KV layers from the config's "
            "num_nextn_predict_layers (added to the KV cell), which is not mirrored",
            "plan without --speculative-num-steps, or use the checkpoint's config.json",
        )
