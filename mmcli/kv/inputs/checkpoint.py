"""A checkpoint's size from its ``model.safetensors.index.json`` (``metadata.total_size``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.inputs.readers import parse_json, read_text, unique_keys
from mmcli.text import printable

_INDEX_HINT = "a safetensors index written by transformers has {'metadata': {'total_size': N}}"


def index_total(path: Path) -> int:
    """``metadata.total_size`` of a ``model.safetensors.index.json``: every tensor's bytes."""
    try:
        text = read_text(path)
        doc: Any = parse_json(path, text, hint=_INDEX_HINT, object_pairs_hook=unique_keys(path))
    except InputError as exc:
        raise InputError(f"--weights: {exc.message}", hint=exc.hint) from None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if isinstance(total, str) and total.isascii() and total.isdigit() and len(total) <= 30:
        total = int(total)
    if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
        raise InputError(
            f"--weights: {printable(str(path))} has no positive metadata.total_size",
            hint=_INDEX_HINT,
        )
    return total
