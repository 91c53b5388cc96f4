"""Checking one tensor entry of a safetensors header: its dtype, shape and data offsets.

:func:`parse_hook` checks well-formed entries while the JSON is parsed (a header may hold a
million), turning each into a compact :class:`TensorInfo`; :func:`tensor_info` words the
problem of any other. Every name or value quoted back is printable and cut short.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from mmcli.dtypes import BY_CODE
from mmcli.errors import InputError
from mmcli.text import printable, quoted

_HINT_CORRUPT = (
    "the file is truncated or not a safetensors file; re-create it, e.g. with "
    "safetensors.torch.save_file"
)


#: Element counts or byte sizes at or above this cannot describe a real tensor; neither can a
#: shape whose dimensions, zeros left out, multiply to this or more (``[0, 2**70]``).
MAX_SIZE = 1 << 62


class TensorInfo(NamedTuple):
    """One tensor's header entry: where its bytes lie, relative to the start of the data.

    A named tuple, so that a header of a million entries is built in C (:data:`make_info`)."""

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


#: ``make_info((name, dtype, shape, begin, end))``: a TensorInfo from checked fields, without
#: the Python-level ``__new__`` (``map(make_info, rows)`` runs in C).
make_info: Callable[[tuple[str, str, tuple[int, ...], int, int]], TensorInfo] = partial(
    tuple.__new__, TensorInfo
)


def fail(path: Path, problem: str, hint: str = _HINT_CORRUPT) -> InputError:
    """The InputError for a malformed file: its printable path, then the problem."""
    return InputError(f"{printable(str(path))}: {problem}", hint=hint)


def snippet(value: Any, limit: int = 80) -> str:
    """A JSON value as a short printable excerpt, whatever its size or depth."""
    try:
        text = json.dumps(value)
    except (ValueError, TypeError, RecursionError):
        text = f"<a JSON {type(value).__name__}>"
    return printable(text, limit)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_hook(data_size: int) -> Any:
    """The ``object_pairs_hook``: refuses duplicate keys, and turns each well-formed tensor
    entry into a :class:`TensorInfo` (named later) as soon as it is parsed: a header may hold
    a million of them. Anything not plainly valid stays a dict, for :func:`_tensor_info` to
    word the problem."""
    codes = BY_CODE

    def entry(dtype: Any, shape: Any, offsets: Any) -> TensorInfo | None:
        found = codes.get(dtype) if type(dtype) is str else None
        if found is None or type(shape) is not list or type(offsets) is not list:
            return None
        if len(offsets) != 2:
            return None
        begin, end = offsets
        if type(begin) is not int or type(end) is not int or not 0 <= begin <= end <= data_size:
            return None
        numel = span = 1
        for d in shape:
            if type(d) is not int or d < 0:
                return None
            numel *= d
            if d:
                span *= d
                if span >= MAX_SIZE:
                    return None
        bits = numel * found.bits
        if bits % 8 or bits // 8 != end - begin:
            return None
        return make_info(("", found.code, tuple(shape), begin, end))

    def hook(pairs: list[tuple[str, Any]]) -> Any:
        if len(pairs) == 3:
            (k0, v0), (k1, v1), (k2, v2) = pairs
            if k0 == "dtype" and k1 == "shape" and k2 == "data_offsets":
                info = entry(v0, v1, v2)
                if info is not None:
                    return info
        result = dict(pairs)
        if len(result) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise ValueError(f"duplicate key {quoted(key)}")
                seen.add(key)
        if len(result) == 3 and result.keys() == _ENTRY_KEYS:
            info = entry(result["dtype"], result["shape"], result["data_offsets"])
            if info is not None:
                return info
        return result

    return hook


_ENTRY_KEYS = frozenset(("dtype", "shape", "data_offsets"))


def tensor_info(path: Path, name: str, entry: Any, data_size: int) -> TensorInfo:
    where = f"tensor {quoted(name)}"
    if not isinstance(entry, dict):
        raise fail(path, f"{where} is a JSON {type(entry).__name__}, expected an object")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in entry]
    if missing:
        raise fail(path, f"{where} lacks {', '.join(missing)}")
    dtype = entry["dtype"]
    if not isinstance(dtype, str) or dtype not in BY_CODE:
        raise fail(
            path,
            f"{where} has unknown dtype {snippet(dtype)}",
            f"known dtypes: {', '.join(BY_CODE)}",
        )
    shape = entry["shape"]
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise fail(
            path,
            f"{where} has shape {snippet(shape)}; expected a list of non-negative integers",
        )
    numel = span = 1
    for d in shape:
        numel *= d
        span *= max(d, 1)
        if span >= MAX_SIZE:
            raise fail(
                path,
                f"{where} has shape {snippet(shape)} whose element count overflows (its "
                "non-zero dimensions multiply to 2^62 or more)",
            )
    offsets = entry["data_offsets"]
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_int(o) and o >= 0 for o in offsets)
    ):
        raise fail(
            path,
            f"{where} has data_offsets {snippet(offsets)}; expected [begin, end], two "
            "non-negative integers",
        )
    begin, end = offsets
    if end < begin:
        raise fail(path, f"{where} has data_offsets [{begin}, {end}]: end before begin")
    if end > data_size:
        raise fail(
            path,
            f"{where} has data_offsets [{snippet(begin, 30)}, {snippet(end, 30)}] past the "
            f"end of the data ({data_size} bytes after the header)",
        )
    bits = numel * BY_CODE[dtype].bits
    if bits % 8:
        raise fail(path, f"{where}: {numel} elements of {dtype} do not fill whole bytes")
    if bits // 8 != end - begin:
        raise fail(
            path,
            f"{where} has shape {snippet(shape)} of {dtype} ({bits // 8} bytes) but "
            f"data_offsets [{begin}, {end}] span {end - begin} bytes",
        )
    return TensorInfo(name=name, dtype=dtype, shape=tuple(shape), begin=begin, end=end)


def as_dict(info: TensorInfo) -> dict[str, Any]:
    """An entry back as the JSON object it was parsed from."""
    return {"dtype": info.dtype, "shape": list(info.shape), "data_offsets": [info.begin, info.end]}
