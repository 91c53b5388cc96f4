"""The keys a published config leaves out, as transformers' config class fills them.

vLLM reads a model's config through transformers (``AutoConfig``), so a key missing from
``config.json`` takes the default of the config class of its ``model_type`` (Gemma 3's
``text_config`` has no ``vocab_size``: ``Gemma3TextConfig`` sets 262,208). transformers is an
optional dependency, imported only here and only when a key is missing; without it (or for a
``model_type`` it does not know) nothing is filled and the caller says which key is missing.
"""

from __future__ import annotations

from typing import Any


def class_values(doc: dict[str, Any], keys: tuple[str, ...]) -> tuple[dict[str, Any], str | None]:
    """The values transformers' config class gives ``keys`` for ``doc`` (the config's text part:
    its ``text_config`` where it has one), and the class's name; ``({}, None)`` when transformers
    is absent or does not know the ``model_type``."""
    text = doc.get("text_config") if isinstance(doc.get("text_config"), dict) else None
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        return {}, None
    config = _text_config(CONFIG_MAPPING, doc, text)
    if config is None:
        return {}, None
    values = {key: getattr(config, key) for key in keys if getattr(config, key, None) is not None}
    return values, type(config).__name__


def installed() -> bool:
    """Whether transformers can be imported."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def _text_config(mapping: Any, doc: dict[str, Any], text: dict[str, Any] | None) -> Any:
    """The text config transformers builds from ``doc`` (its keys given, the rest defaults)."""
    for part, kind in ((text, None), (doc, "top")):
        if part is None:
            continue
        model_type = part.get("model_type")
        if not isinstance(model_type, str) or model_type not in mapping:
            continue
        try:
            config = mapping[model_type](**part)
        except Exception:  # a config its class refuses: nothing is filled
            return None
        return config.get_text_config() if kind == "top" else config
    return None
