"""Models a vLLM release cannot start, refused by name rather than planned (a row of
:mod:`mmcli.kv.releases` says from which release each one starts)."""

from __future__ import annotations

from mmcli.errors import InputError
from mmcli.kv.model import ModelConfig
from mmcli.kv.releases import (
    FIRST_SERVED,
    LAST_SERVED,
    V1_FROM,
    EngineRules,
    applies,
    first_release,
    parse_release,
)


def refuse_unstartable(config: ModelConfig, rules: EngineRules) -> None:
    """Models the named release cannot start, refused rather than planned."""
    sparse = config.sparse_attention
    for arch in dict.fromkeys([sparse.architecture if sparse else "", config.architecture]):
        first = FIRST_SERVED.get(arch)
        if first is not None and not applies(first, rules):
            what = f"{arch} ({sparse.name})" if sparse and arch == sparse.architecture else arch
            shown = first if first.count(".") == 2 else f"{first}.0"
            raise InputError(
                f"{config.name}: vLLM {rules.release} does not serve {what} yet (the first "
                f"release that does is {shown}; the engine refuses to start)",
                hint=f"plan with --vllm-version {first} or newer",
            )
    v1 = V1_FROM.get(config.architecture)
    if v1 is not None and not applies(v1, rules):
        raise InputError(
            f"{config.name}: vLLM {rules.release} serves {config.architecture} on its V0 "
            "engine alone (SupportsV0Only), whose KV sizing mmcli does not model",
            hint=f"plan with --vllm-version {v1} or newer",
        )
    last = LAST_SERVED.get(config.architecture)
    if last is not None and parse_release(rules.release) > parse_release(last):
        raise InputError(
            f"{config.name}: vLLM {rules.release} no longer serves {config.architecture} "
            f"(the last release that did is {last}; the engine refuses to start)",
            hint=f"plan with --vllm-version {last} or older",
        )
    cla = any(f.code == "cla-not-shared-by-engine" for f in config.map_findings)
    if cla and config.model_type.startswith("hunyuan") and not rules.hunyuan_cla_starts:
        raise InputError(
            f"{config.name}: vLLM {rules.release} does not start Hunyuan with cross-layer "
            "attention (use_cla): its model builds the sharing layers as cross-attention, "
            "which the KV-cache spec asserts against; from "
            f"{first_release('hunyuan_cla_starts')} the Transformers backend serves it",
            hint=f"plan with --vllm-version {first_release('hunyuan_cla_starts')} or later, or "
            "set use_cla to false",
        )
