"""The dump writer: encoder outputs, masks and (v2) their sequence context, written atomically.

A file is written as ``format_version=1`` unless it uses something only version 2 has
(sequence context, a merged layout, a non-tensor return, a row width, tp or deepstack
figures, capture details), so that plain dumps stay readable by older mmcli releases.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

import torch

from mmcli.atomic import atomic_write
from mmcli.dtypes import dump_code, name_of
from mmcli.dump.safetensors import natural_key
from mmcli.dump.schema import CONTEXT_TENSORS, FORMAT, V1, V2, V2_METADATA
from mmcli.embeddings.inputs import per_item_tensors
from mmcli.errors import InputError


def _metadata_value(key: str, value: object) -> str:
    if isinstance(value, torch.dtype):
        return name_of(value)
    if key == "placeholder_token_ids" and isinstance(value, list | tuple):
        return ",".join(str(int(v)) for v in value)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InputError(
            f"metadata {key}={value!r} is a {type(value).__name__}; metadata values are strings",
            hint="pass strings (or numbers, or a torch.dtype for dtype)",
        )
    return str(value)


def return_type(value: object) -> str:
    """A short description of a non-tensor encoder return: ``NoneType``, ``list[Tensor,
    NoneType]``, ``dict``."""
    if isinstance(value, torch.Tensor):  # only a 0-D one is not embeddings
        return f"Tensor[0-d {name_of(value.dtype)}]"
    if isinstance(value, list | tuple):
        inner = ", ".join(type(v).__name__ for v in value[:8])
        more = ", …" if len(value) > 8 else ""
        return f"{type(value).__name__}[{inner}{more}]"
    return type(value).__name__


def _int_tensor(value: object, name: str, ndim: int) -> torch.Tensor:
    t = value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=torch.int64)
    if ndim == 2 and t.numel() == 0:
        t = t.reshape(0, 2)
    if t.is_floating_point() or t.dtype == torch.bool or t.ndim != ndim:
        raise InputError(
            f"{name} must be {ndim}-D integers, got {name_of(t.dtype)} of shape {tuple(t.shape)}",
            hint="token ids and positions are integers; ranges are (offset, length) pairs",
        )
    return t.to(torch.int64)


def dump_encoder_outputs(
    path: str | os.PathLike[str],
    mm_embeddings: object,
    *,
    is_embed: object = None,
    expected_num_items: int | None = None,
    hidden_size: int | None = None,
    placeholders: object = None,
    item_counts: Sequence[int] | torch.Tensor | None = None,
    input_ids: Sequence[int] | torch.Tensor | None = None,
    placeholder_positions: Sequence[int] | torch.Tensor | None = None,
    placeholder_ranges: Sequence[tuple[int, int]] | torch.Tensor | None = None,
    **metadata: object,
) -> Path:
    """Write encoder outputs (and masks) as an ``mm_dump`` file, atomically; return its path.

    ``mm_embeddings`` is what the model returned: a list/tuple of per-item tensors (any
    shape: a broken output is worth dumping too), one stacked tensor, or (with
    ``item_counts``, rows per item) one merged 2-D tensor of every item's rows. Anything else
    (``None``, a list holding a non-tensor) is recorded as ``encoder_return_type`` with no
    items. ``is_embed`` and ``placeholders`` are per-item lists (entries may be None).

    Sequence context (version 2): ``input_ids`` (the prompt, 1-D) or ``placeholder_positions``,
    ``placeholder_ranges`` (one ``(offset, length)`` per item), and as metadata
    ``placeholder_token_ids`` (a list of ints), ``row_width``, ``deepstack_levels``,
    ``tp_size``, ``tp_rank``, ``phase``, ``engine``, ``engine_error``, ``version_<lib>``.
    Other keyword arguments become metadata (``dtype=torch.bfloat16``, ``modality="image"``,
    ``model="…"``). The file is written to a temporary name in the same directory and renamed
    over ``path``.
    """
    tensors: dict[str, torch.Tensor] = {}
    meta: dict[str, str] = {}
    # A 0-D tensor holds one value, no item: recorded as what the encoder returned (a 0-D
    # stacked mm_embeddings would claim a batch it does not have).
    if isinstance(mm_embeddings, torch.Tensor) and (mm_embeddings.ndim or item_counts is not None):
        tensors["mm_embeddings"] = mm_embeddings
        if item_counts is not None:
            tensors["item_counts"] = _int_tensor(item_counts, "item_counts", 1)
            meta["layout"] = "merged"
    elif isinstance(mm_embeddings, list | tuple) and all(
        isinstance(item, torch.Tensor) for item in mm_embeddings
    ):
        for i, item in enumerate(mm_embeddings):
            tensors[f"mm_embeddings.{i}"] = item
    else:
        meta["encoder_return_type"] = return_type(mm_embeddings)
    if item_counts is not None and "item_counts" not in tensors:
        raise InputError(
            "item_counts is for one merged 2-D tensor of every item's rows",
            hint="pass a tensor with item_counts, or per-item tensors without",
        )
    for prefix, value in (("is_embed", is_embed), ("placeholders", placeholders)):
        for i, t in enumerate(per_item_tensors(value, prefix)):
            if t is not None:
                tensors[f"{prefix}.{i}"] = t
    for name, value, ndim in (
        ("input_ids", input_ids, 1),
        ("placeholder_positions", placeholder_positions, 1),
        ("placeholder_ranges", placeholder_ranges, 2),
    ):
        if value is not None:
            tensors[name] = _int_tensor(value, name, ndim)
    if expected_num_items is not None:
        meta["expected_num_items"] = str(int(expected_num_items))
    if hidden_size is not None:
        meta["hidden_size"] = str(int(hidden_size))
    for key, value in metadata.items():
        if key in ("format", "format_version", "layout", "encoder_return_type"):
            raise InputError(f"metadata key {key!r} is reserved", hint="use another key")
        if value is not None:
            meta[key] = _metadata_value(key, value)
    v2 = any(k in meta for k in V2_METADATA) or any(k.startswith("version_") for k in meta)
    v2 = v2 or any(name in tensors for name in CONTEXT_TENSORS)
    meta.update(format=FORMAT, format_version=V2 if v2 else V1)
    return _write_atomically(Path(path), _host_copies(tensors), meta)


def _host_copies(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Contiguous CPU copies (or the tensors themselves, when already so)."""
    return {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}


def _bytes_of(t: torch.Tensor) -> memoryview:
    """A zero-copy view of a contiguous CPU tensor's bytes."""
    return t.reshape(-1).view(torch.uint8).numpy().data


def _write_safetensors(f: BinaryIO, tensors: dict[str, torch.Tensor], meta: dict[str, str]) -> None:
    """Write a safetensors file, byte-for-byte the same for the same input.

    Tensors go in order of decreasing element size (so each starts aligned to its element
    size), then by name; the header is compact JSON padded with spaces to 8 bytes.
    """
    order = sorted(tensors, key=lambda n: (-tensors[n].element_size(), natural_key(n)))
    header: dict[str, object] = {"__metadata__": dict(sorted(meta.items()))}
    offset = 0
    for name in order:
        t = tensors[name]
        code = dump_code(t.dtype)
        if code is None:
            raise InputError(
                f"tensor {name!r} has dtype {name_of(t.dtype)}, which a dump cannot hold",
                hint="convert it first, e.g. .float()",
            )
        size = t.numel() * t.element_size()
        header[name] = {
            "dtype": code,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for name in order:
        if tensors[name].numel():
            f.write(_bytes_of(tensors[name]))


def _write_atomically(path: Path, tensors: dict[str, torch.Tensor], meta: dict[str, str]) -> Path:
    with atomic_write(path) as f:
        _write_safetensors(f, tensors, meta)
    return path
