"""Dump reader (``mm_dump`` v1 and v2): read it item by item; the writer is re-exported.

A dump is a safetensors file holding ``mm_embeddings.{i}`` (or one stacked ``mm_embeddings``,
or in v2 one merged 2-D ``mm_embeddings`` with ``item_counts``), optional ``is_embed.{i}``
masks and ``placeholders.{i}`` scattered copies, v2 sequence context, and string metadata
(see ``docs/dump-format.md``). :func:`load_dump` validates the header
and the schema up front, then reads each tensor on demand with a positioned read into a
fresh tensor, so memory is bounded by the largest item rather than the file (a memory map
would count every page touched in the process's resident set while it is open).
:func:`dump_encoder_outputs` lives in :mod:`mmcli.dump.writer`.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from mmcli.dtypes import dump_torch_dtype, torch_model_dtype
from mmcli.dump.context import item_counts, merged_item, merged_starts
from mmcli.dump.safetensors import FileSource, Header, TensorInfo, open_file, open_safetensors
from mmcli.dump.schema import (
    DumpLayout,
    check_schema,
    int_metadata,
)
from mmcli.dump.writer import dump_encoder_outputs
from mmcli.errors import InputError
from mmcli.text import human_bytes, printable, quoted

__all__ = ["Dump", "dump_encoder_outputs", "load_dump", "read_tensor"]


#: Reads smaller than this skip the free-memory check (reading /proc costs more than they do).
_SMALL_READ = 64 << 20


def _source(header: Header) -> tuple[FileSource, bool]:
    """The open file to read ``header``'s tensors from, and whether this call opened it.

    A header from :func:`open_safetensors` (a :class:`Dump`'s) carries its open file: the
    path is never opened again, so a file renamed over it cannot be read by mistake (nor a
    FIFO block the read). A bare :func:`read_header` header is reopened once, checked to be
    to read just this tensor.
    """
    if header.source is not None:
        if header.source.closed:
            raise InputError(
                f"{printable(str(header.path))}: the dump was closed",
                hint="read tensors before closing the dump (or load it again)",
            )
        return header.source, False
    return open_file(header.path), True


def _allocate(nbytes: int, device: torch.device, what: str, *, pin: bool) -> torch.Tensor:
    """A uint8 CPU buffer of ``nbytes``, refused cleanly when memory cannot hold it."""
    from mmcli.devices import require_memory

    if nbytes >= _SMALL_READ:
        require_memory(nbytes, torch.device("cpu"), what)
        if device.type != "cpu":
            require_memory(nbytes, device, what)
    try:
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=pin)
    except (MemoryError, RuntimeError) as exc:  # RuntimeError: "can't allocate memory"
        raise InputError(
            f"{what}: cannot allocate {human_bytes(nbytes)}: {type(exc).__name__}",
            hint="free memory, or check the file on a machine with more memory",
        ) from None


def read_tensor(
    header: Header,
    info: TensorInfo,
    device: torch.device | str = "cpu",
    *,
    index: int | None = None,
) -> torch.Tensor:
    """Read one tensor (or, with ``index``, its ``index``-th slice along dim 0) onto ``device``.

    Exactly the needed bytes are read, with a positioned read into a fresh tensor, through
    the header's open file when it has one. A read larger than the memory available is
    refused (InputError) before allocating.
    """
    where = f"{printable(str(header.path))}: tensor {quoted(info.name)}"
    dtype = dump_torch_dtype(info.dtype)
    if dtype is None:
        raise InputError(
            f"{where} has dtype {info.dtype}, which mmcli cannot load",
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
    buffer = _allocate(nbytes, device, where, pin=device.type == "cuda")
    if nbytes:
        source, opened = _source(header)
        try:
            got = source.read_into(buffer.numpy().data.cast("B"), offset)
        finally:
            if opened:
                source.close()
        if got < nbytes:
            raise InputError(
                f"{where}: file ended after {got} of {nbytes} bytes",
                hint="the file was truncated or is being rewritten; write it again",
            )
    tensor = buffer.view(dtype).reshape(shape) if nbytes else torch.empty(shape, dtype=dtype)
    return tensor.to(device) if device.type != "cpu" else tensor


class Dump:
    """An opened dump: header and schema checked, tensors read on demand onto ``device``."""

    def __init__(self, header: Header, layout: DumpLayout, device: torch.device) -> None:
        self.header = header
        self.layout = layout
        self.device = device
        self._merged_rows: tuple[list[int], list[int]] | None = None

    def _rows(self) -> tuple[list[int], list[int]]:
        """A merged dump's ``item_counts`` and each item's first row, read once."""
        if self._merged_rows is None:
            counts = item_counts(self.header, read_tensor)
            self._merged_rows = (counts, merged_starts(counts))
        return self._merged_rows

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
        if self.layout.merged:  # version 2: the row count is in item_counts
            rows = self._rows()[0][index]
            return (rows, self.header.tensors["mm_embeddings"].shape[1])
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
        if self.layout.merged:  # version 2: rows of one merged 2-D tensor
            return merged_item(self.header, index, self.device, read_tensor, self._rows())
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

    def close(self) -> None:
        """Close the dump's file (also done when the dump is collected); reads then fail."""
        if self.header.source is not None:
            self.header.source.close()

    def __enter__(self) -> Dump:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_dump(path: str | os.PathLike[str], *, device: str | torch.device = "cpu") -> Dump:
    """Open a dump: read and check the header and schema; tensors are read on demand.

    ``device`` is ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (or a ``torch.device``).
    """
    from mmcli.devices import resolve_device

    target = device if isinstance(device, torch.device) else resolve_device(device)
    header = open_safetensors(path)  # opened once; every tensor is read through this handle
    try:
        return Dump(header, check_schema(header), target)
    except BaseException:
        if header.source is not None:
            header.source.close()
        raise
