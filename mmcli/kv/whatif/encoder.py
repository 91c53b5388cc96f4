"""The multimodal encoder's part of vLLM's profile run, named in the ``--gpu`` estimate.

``profile_run`` (v1/worker/gpu_model_runner.py) of a model with multimodal inputs first runs
the encoder on a dummy batch of the modality with the most tokens an item (its largest item,
as many as the encoder budget holds, under ``--limit-mm-per-prompt``) and keeps the outputs
in the encoder cache through the text forward, unless ``--skip-mm-profiling`` is given. That
peak depends on each model's processor and vision tower (tiling, patch merging, attention
kernels) and no published log in the repository separates it, so it is not estimated: it is
named, with what it depends on, and the KV memory shown may be higher than vLLM's.
"""

from __future__ import annotations

from typing import Any, Final

from mmcli.kv.whatif.components import Component

#: The config sections of an encoder vLLM profiles (``vision_config``, ``audio_config``).
ENCODER_SECTIONS: Final = ("vision_config", "audio_config")
#: The encoder keys shown as the component's inputs, where the config gives them.
ENCODER_KEYS: Final = (
    "model_type",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "image_size",
    "patch_size",
)
#: Top-level keys that give an item's token count (Gemma 3's ``mm_tokens_per_image``).
ITEM_KEYS: Final = ("mm_tokens_per_image",)


def encoder_sections(doc: dict[str, Any]) -> tuple[str, ...]:
    """The encoder sections the config has (empty: a text-only model)."""
    return tuple(key for key in ENCODER_SECTIONS if isinstance(doc.get(key), dict))


def encoder_profile(doc: dict[str, Any], max_num_batched_tokens: int) -> Component | None:
    """The encoder profile as a named component that is not estimated (None: no encoder)."""
    sections = encoder_sections(doc)
    if not sections:
        return None
    inputs: dict[str, Any] = {
        section: {k: doc[section][k] for k in ENCODER_KEYS if k in doc[section]}
        for section in sections
    }
    inputs |= {key: doc[key] for key in ITEM_KEYS if key in doc}
    inputs["max_num_batched_tokens"] = max_num_batched_tokens
    return Component(
        "encoder profile",
        0,
        inputs,
        "profile_run (v1/worker/gpu_model_runner.py): the encoder on a dummy batch of the "
        "largest item under --limit-mm-per-prompt, its outputs kept in the encoder cache "
        "(budget: max_num_encoder_input_tokens); skipped by --skip-mm-profiling",
        estimated=False,
    )


NOTE: Final = (
    "the multimodal encoder's profile is not estimated: vLLM's profile run encodes a dummy "
    "batch of the largest item under --limit-mm-per-prompt first, so the KV memory may be "
    "lower than shown; give --skip-mm-profiling where vLLM runs with it, or plan from the "
    "server's log (--from-log)"
)
