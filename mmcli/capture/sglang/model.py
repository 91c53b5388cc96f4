"""What the SGLang plugin records about the model its encoder is bound to (pure helpers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mmcli.capture.model_config import model_facts as config_facts


@dataclass(frozen=True)
class ModelSide:
    """What the dump records about the model the encoder is bound to (None: not seen)."""

    hidden_size: int | None = None
    hidden_size_source: str | None = None
    model: str | None = None
    levels: int = 0
    #: From the config: ``len(vision_config.deepstack_visual_indexes)``, 0 for a vision tower
    #: without the key, None without a ``vision_config``.
    deepstack_levels: int | None = None
    tokens: dict[str, int] = field(default_factory=dict)  # modality → placeholder token id
    dtype: Any = None


def model_facts(encoder: object) -> ModelSide:
    """The language model's hidden size (from the config, with its key), the model's name,
    deepstack levels, placeholder token ids and dtype (its input embedding's weights), from
    the model the encoder is bound to."""
    owner = getattr(encoder, "__self__", None)
    config = getattr(owner, "config", None)
    facts = config_facts(config)
    name = getattr(config, "_name_or_path", None)
    levels = getattr(owner, "deepstack_visual_indexes", None)
    return ModelSide(
        hidden_size=facts.hidden_size,
        hidden_size_source=facts.hidden_size_source,
        model=name if isinstance(name, str) and name else None,
        levels=len(levels) if isinstance(levels, list | tuple) else facts.deepstack_levels or 0,
        deepstack_levels=facts.deepstack_levels,
        tokens=dict(facts.tokens),
        dtype=_embedding_dtype(owner),
    )


def _embedding_dtype(owner: object) -> Any:
    """The dtype of the language model's input embedding weights (the dtype SGLang serves
    in), or None."""
    import torch

    for holder in (owner, getattr(owner, "language_model", None), getattr(owner, "model", None)):
        get = getattr(holder, "get_input_embeddings", None)
        if not callable(get):
            continue
        try:
            weight = getattr(get(), "weight", None)
        except Exception:
            continue
        if isinstance(weight, torch.Tensor) and weight.is_floating_point():
            return weight.dtype
    return None
