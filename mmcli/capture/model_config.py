"""What every capture path reads from the model's own config: the language model's hidden size
(and the key it came from), the placeholder token id of each modality and the number of
deepstack levels the encoder's rows carry.

Duck-typed over a transformers ``PretrainedConfig`` (what vLLM's ``model_config.hf_config``,
SGLang's model ``config`` and a transformers model's ``config`` are); imports nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The modalities whose placeholder token a config may name.
MODALITIES = ("image", "video", "audio")
#: Sub-configs that hold the language model's settings, in the order they are looked for
#: (``text_config``: LLaVA, Qwen2-VL, Gemma 3, …; ``llm_config``: InternVL).
TEXT_CONFIG_KEYS = ("text_config", "llm_config")


@dataclass(frozen=True)
class ModelFacts:
    """What the capture records about the model (None / empty where the config says nothing)."""

    hidden_size: int | None = None
    #: The config key ``hidden_size`` was read from: ``text_config.hidden_size``,
    #: ``llm_config.hidden_size`` or ``hidden_size`` (a config without a sub-config).
    hidden_size_source: str | None = None
    #: modality → placeholder token id (``image_token_id`` or ``image_token_index``, …).
    tokens: dict[str, int] = field(default_factory=dict)
    #: Deepstack levels concatenated to each encoder row (Qwen3-VL): the length of
    #: ``vision_config.deepstack_visual_indexes``; 0 for a config with a vision tower and no
    #: such key (known: none); None when the config has no ``vision_config`` (unknown).
    deepstack_levels: int | None = None


def deepstack_levels_of(config: object) -> int | None:
    """``len(vision_config.deepstack_visual_indexes)``, 0 when a ``vision_config`` has no
    such key, None without a ``vision_config`` (vLLM 0.20.0
    vllm/model_executor/models/qwen3_vl.py: ``deepstack_num_level`` is that length, 0 when
    the key is absent, and the encoder's rows are ``out_hidden_size * (1 + levels)`` wide)."""
    vision = getattr(config, "vision_config", None)
    if vision is None:
        return None
    if isinstance(vision, dict):
        indexes = vision.get("deepstack_visual_indexes")
    else:
        indexes = getattr(vision, "deepstack_visual_indexes", None)
    return len(indexes) if isinstance(indexes, list | tuple) else 0


def token_of(config: object, modality: str) -> int | None:
    """The placeholder token id of ``modality`` (``<modality>_token_id`` or ``…_index``)."""
    for key in (f"{modality}_token_id", f"{modality}_token_index"):
        token = getattr(config, key, None)
        if isinstance(token, int) and not isinstance(token, bool) and token >= 0:
            return token
    return None


def model_facts(config: object) -> ModelFacts:
    """The language model's hidden size (with its key) and the placeholder ids of ``config``."""
    if config is None:
        return ModelFacts()
    hidden: int | None = None
    source: str | None = None
    for key in TEXT_CONFIG_KEYS:
        sub = getattr(config, key, None)
        value = getattr(sub, "hidden_size", None) if sub is not None else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            hidden, source = value, f"{key}.hidden_size"
            break
    if hidden is None:
        value = getattr(config, "hidden_size", None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            hidden, source = value, "hidden_size"
    tokens = {m: t for m in MODALITIES if (t := token_of(config, m)) is not None}
    return ModelFacts(
        hidden_size=hidden,
        hidden_size_source=source,
        tokens=tokens,
        deepstack_levels=deepstack_levels_of(config),
    )


def tokens_for(facts: ModelFacts, modalities: list[str]) -> list[int] | None:
    """The placeholder ids of ``modalities`` (every one the config names when none is known)."""
    known = [facts.tokens[m] for m in modalities if m in facts.tokens]
    if not known and not modalities:
        known = list(facts.tokens.values())
    return sorted(set(known)) or None
