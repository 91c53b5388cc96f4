"""Dump reader and writer (``mm_dump`` v1): write it atomically, read it item by item.

A dump is a safetensors file holding ``mm_embeddings.{i}`` (or one stacked ``mm_embeddings``),
optional ``is_embed.{i}`` masks and ``placeholders.{i}`` scattered copies, with string
metadata ``format=mm_dump``, ``format_version=1`` and optional ``expected_num_items``,
``hidden_size``, ``dtype``, ``modality``, ``model``. :func:`load_dump` validates the header
and the schema up front, then reads each tensor on demand with a positioned read into a
fresh tensor, so memory is bounded by the largest item rather than the file (a memory map
would count every page touched in the process's resident set while it is open).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

import torch

from mmcli.atomic import atomic_write
from mmcli.dtypes import dump_code, dump_torch_dtype, name_of, torch_model_dtype
from mmcli.dump.safetensors import Header, TensorInfo, natural_key, read_header
from mmcli.dump.schema import (
    FORMAT,
    FORMAT_VERSION,
    DumpLayout,
    check_schema,
    int_metadata,
)
from mmcli.embeddings.inputs import per_item_tensors
from mmcli.errors import InputError


def _read_into(path: Path, offset: int, buffer: torch.Tensor, name: str) -> None:
    """Fill the CPU uint8 ``buffer`` with the bytes of ``path`` at ``offset``."""
    size = buffer.numel()
    if size == 0:
        return
    view = buffer.numpy().data.cast("B")  # writes land in the tensor's own memory
    with path.open("rb", buffering=0) as f:
        f.seek(offset)
        done = 0
        while done < size:
            got = f.readinto(view[done:])
            if not got:
                raise InputError(
                    f"{path}: file ended after {done} of {size} bytes of tensor {name!r}",
                    hint="the file was truncated or is being rewritten; write it again",
                )
            done += got


def read_tensor(
    header: Header,
    info: TensorInfo,
    device: torch.device | str = "cpu",
    *,
    index: int | None = None,
) -> torch.Tensor:
    """Read one tensor (or, with ``index``, its ``index``-th slice along dim 0) onto ``device``.

    Exactly the needed bytes are read, with a positioned read into a fresh tensor.
    """
    dtype = dump_torch_dtype(info.dtype)
    if dtype is None:
        raise InputError(
            f"{header.path}: tensor {info.name!r} has dtype {info.dtype}, which mmcli cannot load",
            hint="encoder outputs are bf16, fp16 or fp32; masks are bool",
        )
    shape: tuple[int, ...] = info.shape
    offset = header.data_start + info.begin
    nbytes = info.nbytes
    if index is not None:
        shape = info.shape[1:]
        nbytes //= max(info.shape[0], 1)
        offset += index * nbytes
    device = torch.device(device)
    pin = device.type == "cuda"
    buffer = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pin)
    _read_into(header.path, offset, buffer, info.name)
    tensor = buffer.view(dtype).reshape(shape) if nbytes else torch.empty(shape, dtype=dtype)
    return tensor.to(device) if device.type != "cpu" else tensor


class Dump:
    """An opened dump: header and schema checked, tensors read on demand onto ``device``."""

    def __init__(self, header: Header, layout: DumpLayout, device: torch.device) -> None:
        self.header = header
        self.layout = layout
        self.device = device

    @property
    def path(self) -> Path:
        """The dump's file."""
        return self.header.path

    @property
    def num_items(self) -> int:
        """Number of items (per-item tensors, or dim 0 of the stacked tensor)."""
        return self.layout.num_items

    @property
    def metadata(self) -> dict[str, str]:
        """All header metadata, known keys and others."""
        return dict(self.header.metadata)

    @property
    def expected_num_items(self) -> int | None:
        """``expected_num_items`` from the metadata, if any."""
        return int_metadata(self.header, "expected_num_items", 0)

    @property
    def hidden_size(self) -> int | None:
        """The text model's ``hidden_size`` from the metadata, if any."""
        return int_metadata(self.header, "hidden_size", 1)

    @property
    def model_dtype(self) -> torch.dtype | None:
        """The model dtype from the metadata, if any."""
        value = self.header.metadata.get("dtype")
        return torch_model_dtype(value) if value else None

    def item_shape(self, index: int) -> tuple[int, ...]:
        """Item ``index``'s shape, from the header alone."""
        self._check_index(index)
        if self.layout.stacked:
            return self.header.tensors["mm_embeddings"].shape[1:]
        return self.header.tensors[f"mm_embeddings.{index}"].shape

    def stacked_shape(self) -> tuple[int, ...] | None:
        """The stacked tensor's shape, or None for a per-item dump."""
        if not self.layout.stacked:
            return None
        return self.header.tensors["mm_embeddings"].shape

    def _check_index(self, index: int) -> None:
        if not 0 <= index < self.num_items:
            raise IndexError(f"item {index} out of range for {self.num_items} items")

    def embedding(self, index: int) -> torch.Tensor:
        """Item ``index``'s encoder output, read now onto the device."""
        self._check_index(index)
        if self.layout.stacked:
            info = self.header.tensors["mm_embeddings"]
            return read_tensor(self.header, info, self.device, index=index)
        return read_tensor(self.header, self.header.tensors[f"mm_embeddings.{index}"], self.device)

    def stacked(self) -> torch.Tensor:
        """The whole stacked ``mm_embeddings`` tensor (stacked dumps only)."""
        if not self.layout.stacked:
            raise InputError(f"{self.path}: not a stacked dump", hint="use embedding(i)")
        return read_tensor(self.header, self.header.tensors["mm_embeddings"], self.device)

    def is_embed(self, index: int) -> torch.Tensor | None:
        """Item ``index``'s mask, or None when the dump has none for it."""
        info = self.header.tensors.get(f"is_embed.{index}")
        return None if info is None else read_tensor(self.header, info, self.device)

    def placeholders(self, index: int) -> torch.Tensor | None:
        """Item ``index``'s stored scattered tensor, or None."""
        info = self.header.tensors.get(f"placeholders.{index}")
        return None if info is None else read_tensor(self.header, info, self.device)

    def items(self) -> list[torch.Tensor]:
        """Every item, read now (for small dumps; stream with :meth:`embedding` otherwise)."""
        return [self.embedding(i) for i in range(self.num_items)]


def load_dump(path: str | os.PathLike[str], *, device: str | torch.device = "cpu") -> Dump:
    """Open a dump: read and check the header and schema; tensors are read on demand.

    ``device`` is ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (or a ``torch.device``).
    """
    from mmcli.devices import resolve_device

    target = device if isinstance(device, torch.device) else resolve_device(device)
    header = read_header(path)
    return Dump(header, check_schema(header), target)


def _metadata_value(key: str, value: object) -> str:
    if isinstance(value, torch.dtype):
        return name_of(value)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InputError(
            f"metadata {key}={value!r} is a {type(value).__name__}; metadata values are strings",
            hint="pass strings (or numbers, or a torch.dtype for dtype)",
        )
    return str(value)


def dump_encoder_outputs(
    path: str | os.PathLike[str],
    mm_embeddings: object,
    *,
    is_embed: object = None,
    expected_num_items: int | None = None,
    hidden_size: int | None = None,
    placeholders: object = None,
    **metadata: object,
) -> Path:
    """Write encoder outputs (and masks) as an ``mm_dump`` v1 file, atomically; return its path.

    ``mm_embeddings`` is what the model returned: a list/tuple of per-item tensors (any
    shape: a broken output is worth dumping too) or one stacked tensor. ``is_embed`` and
    ``placeholders`` are per-item lists (entries may be None). Extra keyword arguments become
    metadata (``dtype=torch.bfloat16``, ``modality="image"``, ``model="…"``). The file is
    written to a temporary name in the same directory and renamed over ``path``.
    """
    tensors: dict[str, torch.Tensor] = {}
    if isinstance(mm_embeddings, torch.Tensor):
        tensors["mm_embeddings"] = mm_embeddings
    elif isinstance(mm_embeddings, list | tuple):
        for i, item in enumerate(mm_embeddings):
            if not isinstance(item, torch.Tensor):
                raise InputError(
                    f"mm_embeddings[{i}] is a {type(item).__name__}, not a tensor",
                    hint="pass what the model's embed_multimodal returned",
                )
            tensors[f"mm_embeddings.{i}"] = item
    else:
        raise InputError(
            "mm_embeddings must be a list or tuple of tensors, or one tensor; got "
            f"{type(mm_embeddings).__name__}",
            hint="pass what the model's embed_multimodal returned",
        )
    for prefix, value in (("is_embed", is_embed), ("placeholders", placeholders)):
        for i, t in enumerate(per_item_tensors(value, prefix)):
            if t is not None:
                tensors[f"{prefix}.{i}"] = t
    meta: dict[str, str] = {"format": FORMAT, "format_version": FORMAT_VERSION}
    if expected_num_items is not None:
        meta["expected_num_items"] = str(int(expected_num_items))
    if hidden_size is not None:
        meta["hidden_size"] = str(int(hidden_size))
    for key, value in metadata.items():
        if key in ("format", "format_version"):
            raise InputError(f"metadata key {key!r} is reserved", hint="use another key")
        if value is not None:
            meta[key] = _metadata_value(key, value)
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
