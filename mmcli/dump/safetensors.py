"""A strict, header-only safetensors reader: validates the header without touching tensor data.

A safetensors file is an 8-byte little-endian header length ``N``, ``N`` bytes of UTF-8 JSON
(an object mapping tensor names to ``{"dtype", "shape", "data_offsets"}`` plus an optional
``__metadata__`` object of strings), then the tensor bytes. Offsets are relative to the end
of the header. Every malformation is an :class:`~mmcli.errors.InputError` naming the file and
the problem, so no caller ever sees a traceback or allocates what a corrupt header declares.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmcli.dtypes import BY_CODE
from mmcli.errors import InputError

#: Headers larger than this are refused before reading them (the safetensors library's own cap).
MAX_HEADER_BYTES = 100_000_000
#: A declared header length at or above this is nonsense whatever the file size.
ABSURD_HEADER_BYTES = 1 << 40
#: Element counts or byte sizes at or above this cannot describe a real tensor.
_MAX_SIZE = 1 << 62

_HINT_CORRUPT = (
    "the file is truncated or not a safetensors file; re-create it, e.g. with "
    "safetensors.torch.save_file"
)


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's header entry: where its bytes lie, relative to the start of the data."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        """Bytes of data the tensor occupies."""
        return self.end - self.begin

    @property
    def numel(self) -> int:
        """Number of elements (1 for a scalar)."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def dtype_name(self) -> str:
        """The readable dtype name, e.g. ``bfloat16`` for ``BF16``."""
        return BY_CODE[self.dtype].name


@dataclass(frozen=True)
class Header:
    """A validated safetensors header: the tensors in name order, the metadata, the layout."""

    path: Path
    file_size: int
    header_size: int
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def data_start(self) -> int:
        """File offset of the first byte of tensor data."""
        return 8 + self.header_size

    @property
    def data_bytes(self) -> int:
        """Total bytes of tensor data."""
        return self.file_size - self.data_start


def natural_key(name: str) -> list[Any]:
    """Sort key that puts ``x.2`` before ``x.10``."""
    parts = re.split(r"(\d+)", name)
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts]


def _fail(path: Path, problem: str, hint: str = _HINT_CORRUPT) -> InputError:
    return InputError(f"{path}: {problem}", hint=hint)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def read_header(path: str | os.PathLike[str]) -> Header:
    """Read and validate the header of the safetensors file at ``path``; no tensor data is read."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file", hint="check the path") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(
            f"{path}: is a directory, not a safetensors file",
            hint="give the path of a .safetensors file",
        )
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: not a regular file", hint="give the path of a .safetensors file")
    file_size = st.st_size
    with path.open("rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise _fail(
                path,
                f"file is {file_size} bytes, too short for the 8-byte header length of a "
                "safetensors file",
            )
        n = int.from_bytes(prefix, "little")
        if n == 0:
            raise _fail(path, "header length is 0; a safetensors header is at least `{}`")
        if n >= ABSURD_HEADER_BYTES:
            raise _fail(path, f"header declares an absurd length of {n} bytes (>= 2^40)")
        if 8 + n > file_size:
            raise _fail(
                path,
                f"header declares {n} bytes but the file has only {file_size - 8} bytes after the "
                "length field",
            )
        if n > MAX_HEADER_BYTES:
            raise _fail(
                path,
                f"header declares {n} bytes, more than the {MAX_HEADER_BYTES}-byte limit for "
                "safetensors headers",
            )
        raw = f.read(n)
    if len(raw) < n:
        raise _fail(path, f"header declares {n} bytes but only {len(raw)} could be read")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(path, f"header is not UTF-8 (invalid byte at offset {8 + exc.start})") from None
    try:
        doc = json.loads(text, object_pairs_hook=_reject_duplicates)
    except json.JSONDecodeError as exc:
        raise _fail(
            path, f"header is not valid JSON: {exc.msg} at header offset {exc.pos}"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise _fail(path, f"header is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _fail(path, f"header is a JSON {type(doc).__name__}, not an object")
    return _validate(path, file_size, n, doc)


def _validate(path: Path, file_size: int, header_size: int, doc: dict[str, Any]) -> Header:
    data_size = file_size - 8 - header_size
    metadata: dict[str, str] = {}
    raw_meta = doc.pop("__metadata__", None)
    if raw_meta is not None:
        if not isinstance(raw_meta, dict):
            raise _fail(
                path,
                f"__metadata__ is a JSON {type(raw_meta).__name__}, expected an object of strings",
                "safetensors metadata maps strings to strings; convert values with str()",
            )
        for key, value in raw_meta.items():
            if not isinstance(value, str):
                raise _fail(
                    path,
                    f"__metadata__[{key!r}] is a JSON {type(value).__name__} "
                    f"({json.dumps(value)}), expected a string",
                    "safetensors metadata maps strings to strings; convert values with str()",
                )
            metadata[key] = value
    tensors: dict[str, TensorInfo] = {}
    for name, entry in doc.items():
        tensors[name] = _tensor_info(path, name, entry, data_size)
    ordered = sorted(tensors.values(), key=lambda t: (t.begin, t.end))
    position = 0
    previous: TensorInfo | None = None
    for info in ordered:
        if info.begin < position and previous is not None:
            raise _fail(
                path,
                f"tensor {info.name!r} (bytes {info.begin}..{info.end}) overlaps tensor "
                f"{previous.name!r} (bytes {previous.begin}..{previous.end})",
            )
        if info.begin > position:
            raise _fail(
                path,
                f"{info.begin - position} unused bytes before tensor {info.name!r} "
                f"(data offsets {position}..{info.begin}); safetensors data must be contiguous",
            )
        position = info.end
        previous = info
    if position != data_size:
        raise _fail(
            path,
            f"tensors cover {position} bytes of data but the file holds {data_size} bytes after "
            "the header",
        )
    return Header(
        path=path,
        file_size=file_size,
        header_size=header_size,
        tensors=dict(sorted(tensors.items(), key=lambda kv: natural_key(kv[0]))),
        metadata=metadata,
    )


def _tensor_info(path: Path, name: str, entry: Any, data_size: int) -> TensorInfo:
    where = f"tensor {name!r}"
    if not isinstance(entry, dict):
        raise _fail(path, f"{where} is a JSON {type(entry).__name__}, expected an object")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in entry]
    if missing:
        raise _fail(path, f"{where} lacks {', '.join(missing)}")
    dtype = entry["dtype"]
    if not isinstance(dtype, str) or dtype not in BY_CODE:
        raise _fail(
            path,
            f"{where} has unknown dtype {json.dumps(dtype)}",
            f"known dtypes: {', '.join(BY_CODE)}",
        )
    shape = entry["shape"]
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise _fail(
            path, f"{where} has shape {json.dumps(shape)}; expected a list of non-negative integers"
        )
    numel = 1
    for d in shape:
        numel *= d
        if numel >= _MAX_SIZE:
            raise _fail(path, f"{where} has shape {shape} whose element count overflows")
    offsets = entry["data_offsets"]
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_int(o) and o >= 0 for o in offsets)
    ):
        raise _fail(
            path,
            f"{where} has data_offsets {json.dumps(offsets)}; expected [begin, end], two "
            "non-negative integers",
        )
    begin, end = offsets
    if end < begin:
        raise _fail(path, f"{where} has data_offsets [{begin}, {end}]: end before begin")
    if end > data_size:
        raise _fail(
            path,
            f"{where} has data_offsets [{begin}, {end}] past the end of the data "
            f"({data_size} bytes after the header)",
        )
    bits = numel * BY_CODE[dtype].bits
    if bits % 8:
        raise _fail(path, f"{where}: {numel} elements of {dtype} do not fill whole bytes")
    if bits // 8 != end - begin:
        raise _fail(
            path,
            f"{where} has shape {shape} of {dtype} ({bits // 8} bytes) but data_offsets "
            f"[{begin}, {end}] span {end - begin} bytes",
        )
    return TensorInfo(name=name, dtype=dtype, shape=tuple(shape), begin=begin, end=end)
