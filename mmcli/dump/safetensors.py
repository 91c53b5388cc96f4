"""A strict, header-only safetensors reader: validates the header without touching tensor data.

A safetensors file is an 8-byte little-endian header length ``N``, ``N`` bytes of UTF-8 JSON
(an object mapping tensor names to ``{"dtype", "shape", "data_offsets"}`` plus an optional
``__metadata__`` object of strings), then the tensor bytes. Offsets are relative to the end
of the header. Every malformation is an :class:`~mmcli.errors.InputError` naming the file and
the problem, so no caller ever sees a traceback or allocates what a corrupt header declares:
every size the header declares is checked against what the file holds, and every name or
value quoted back in a message is made printable and cut to a bounded length.

The file is opened once (without blocking, so a FIFO cannot hang the reader) and, by
:func:`open_safetensors`, kept open: tensor data is then read through that handle with
positioned reads, never by reopening the path (which may since name another file).
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, NoReturn

from mmcli.dump.compact import (
    contiguous,
    in_natural_order,
    natural_key,
    parse_compact,
    sort_by_offsets,
)
from mmcli.dump.entries import (
    TensorInfo,
    as_dict,
    fail,
    make_info,
    parse_hook,
    snippet,
    tensor_info,
)
from mmcli.dump.source import FileSource, open_file
from mmcli.text import printable, quoted

__all__ = [
    "ABSURD_HEADER_BYTES",
    "MAX_HEADER_BYTES",
    "FileSource",
    "Header",
    "TensorInfo",
    "natural_key",
    "open_file",
    "open_safetensors",
    "read_header",
]

#: Headers larger than this are refused before reading them (the safetensors library's own cap).
MAX_HEADER_BYTES = 100_000_000
#: A declared header length at or above this is nonsense whatever the file size.
ABSURD_HEADER_BYTES = 1 << 40


@dataclass(frozen=True)
class Header:
    """A validated safetensors header: the tensors in name order, the metadata, the layout.

    ``source`` is the open file the header was read from, when it was kept open
    (:func:`open_safetensors`); tensor data is read through it.
    """

    path: Path
    file_size: int
    header_size: int
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str] = field(default_factory=dict)
    source: FileSource | None = field(default=None, compare=False, repr=False)

    @property
    def data_start(self) -> int:
        """File offset of the first byte of tensor data."""
        return 8 + self.header_size

    @property
    def data_bytes(self) -> int:
        """Total bytes of tensor data."""
        return self.file_size - self.data_start


_NAME = itemgetter(0)


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: parsing creates millions of acyclic containers,
    and each collection would walk all of them again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_header(path: str | os.PathLike[str]) -> Header:
    """Read and validate the header of the safetensors file at ``path``; no tensor data is read.

    The file is closed again; :func:`open_safetensors` keeps it open for reading tensors.
    """
    source = open_file(path)
    try:
        return _read(source, keep=False)
    finally:
        source.close()


def open_safetensors(path: str | os.PathLike[str]) -> Header:
    """:func:`read_header`, keeping the file open as the header's ``source`` (close it with
    ``header.source.close()``)."""
    source = open_file(path)
    try:
        return _read(source, keep=True)
    except BaseException:
        source.close()
        raise


def _read(source: FileSource, *, keep: bool) -> Header:
    path, file_size = source.path, source.size
    prefix = source.read(0, 8)
    if len(prefix) < 8:
        raise fail(
            path,
            f"file is {file_size} bytes, too short for the 8-byte header length of a "
            "safetensors file",
        )
    n = int.from_bytes(prefix, "little")
    if n == 0:
        raise fail(path, "header length is 0; a safetensors header is at least `{}`")
    if n >= ABSURD_HEADER_BYTES:
        raise fail(path, f"header declares an absurd length of {n} bytes (>= 2^40)")
    if 8 + n > file_size:
        raise fail(
            path,
            f"header declares {n} bytes but the file has only {max(file_size - 8, 0)} bytes "
            "after the length field",
        )
    if n > MAX_HEADER_BYTES:
        raise fail(
            path,
            f"header declares {n} bytes, more than the {MAX_HEADER_BYTES}-byte limit for "
            "safetensors headers",
        )
    raw = source.read(8, n)
    if len(raw) < n:
        raise fail(path, f"header declares {n} bytes but only {len(raw)} could be read")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(path, f"header is not UTF-8 (invalid byte at offset {8 + exc.start})") from None
    del raw
    data_size = file_size - 8 - n
    with _no_gc():
        compact = parse_compact(text, data_size)
        if compact is None:
            doc = _parse(path, text, data_size)
            del text
            tensors, metadata = _validate(path, doc, data_size)
        else:
            del text
            tensors, metadata = compact
        header = _checked(path, file_size, n, tensors, metadata, data_size)
    return (
        Header(header.path, file_size, n, header.tensors, header.metadata, source)
        if keep
        else header
    )


def _parse(path: Path, text: str, data_size: int) -> Any:
    try:
        doc = json.loads(text, object_pairs_hook=parse_hook(data_size))
    except json.JSONDecodeError as exc:
        raise fail(
            path, f"header is not valid JSON: {exc.msg} at header offset {exc.pos}"
        ) from None
    except RecursionError:
        raise fail(path, "header is not valid JSON: nested too deeply") from None
    except ValueError as exc:
        problem = str(exc)
        if "Exceeds the limit" in problem:  # int("9" * 5000)
            problem = "an integer with too many digits"
        raise fail(path, f"header is not valid JSON: {printable(problem)}") from None
    if isinstance(doc, TensorInfo):
        doc = as_dict(doc)
    if not isinstance(doc, dict):
        raise fail(path, f"header is a JSON {type(doc).__name__}, not an object")
    return doc


def _validate(
    path: Path, doc: dict[str, Any], data_size: int
) -> tuple[list[TensorInfo], dict[str, str]]:
    """The tensors (in header order) and metadata of a parsed header, or the InputError that
    words its first problem."""
    metadata: dict[str, str] = {}
    raw_meta = doc.pop("__metadata__", None)
    if isinstance(raw_meta, TensorInfo):
        raw_meta = as_dict(raw_meta)
    if raw_meta is not None:
        if not isinstance(raw_meta, dict):
            raise fail(
                path,
                f"__metadata__ is a JSON {type(raw_meta).__name__}, expected an object of strings",
                "safetensors metadata maps strings to strings; convert values with str()",
            )
        for key, value in raw_meta.items():
            if not isinstance(value, str):
                if isinstance(value, TensorInfo):
                    value = as_dict(value)
                raise fail(
                    path,
                    f"__metadata__[{quoted(key)}] is a JSON {type(value).__name__} "
                    f"({snippet(value)}), expected a string",
                    "safetensors metadata maps strings to strings; convert values with str()",
                )
            metadata[key] = value
    tensors: list[TensorInfo] = []
    for name, entry in doc.items():
        if type(entry) is TensorInfo and not entry.name:
            tensors.append(make_info((name, *entry[1:])))
        else:
            tensors.append(tensor_info(path, name, entry, data_size))
    doc.clear()
    return tensors, metadata


def _checked(
    path: Path,
    file_size: int,
    header_size: int,
    tensors: list[TensorInfo],
    metadata: dict[str, str],
    data_size: int,
) -> Header:
    """The header of ``tensors`` once their data is found to be contiguous: in name order."""
    sort_by_offsets(tensors)
    if not contiguous(tensors, data_size):
        _raise_gap(path, tensors, data_size)
    ordered = list(in_natural_order(tensors))
    del tensors
    return Header(
        path=path,
        file_size=file_size,
        header_size=header_size,
        tensors=dict(zip(map(_NAME, ordered), ordered, strict=True)),
        metadata=metadata,
    )


def _raise_gap(path: Path, tensors: list[TensorInfo], data_size: int) -> NoReturn:
    """Raise the InputError naming where ``tensors`` (sorted by offsets) overlap or leave a
    gap."""
    position = 0
    previous: TensorInfo | None = None
    for info in tensors:
        if info.begin < position and previous is not None:
            raise fail(
                path,
                f"tensor {quoted(info.name)} (bytes {info.begin}..{info.end}) overlaps tensor "
                f"{quoted(previous.name)} (bytes {previous.begin}..{previous.end})",
            )
        if info.begin > position:
            raise fail(
                path,
                f"{info.begin - position} unused bytes before tensor {quoted(info.name)} "
                f"(data offsets {position}..{info.begin}); safetensors data must be contiguous",
            )
        position = info.end
        previous = info
    if position != data_size:
        raise fail(
            path,
            f"tensors cover {position} bytes of data but the file holds {data_size} bytes after "
            "the header",
        )
    raise AssertionError("contiguous tensors reported as a gap")  # pragma: no cover
