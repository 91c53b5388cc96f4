"""What ``mmcli inspect`` reports about a safetensors file, from its header alone (torch-free)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as quote
from operator import sub
from typing import Any, TextIO

from mmcli.dtypes import BY_CODE
from mmcli.dump.safetensors import Header, TensorInfo, read_header
from mmcli.dump.schema import KNOWN_METADATA, V1, DumpLayout, check_schema
from mmcli.errors import InputError
from mmcli.text import printable


@dataclass(frozen=True)
class FileSummary:
    """A safetensors file's tensors, metadata (known keys first) and dump-schema status."""

    header: Header
    metadata: dict[str, str]
    layout: DumpLayout | None
    problem: str | None  # why the file is not an mm_dump, when it is not

    @property
    def format_version(self) -> str | None:
        """The ``format_version`` the file declares (None when its metadata has none; the
        schema then reads a dump as version 1: see :attr:`read_as_version`)."""
        return self.metadata.get("format_version") or None

    @property
    def read_as_version(self) -> str:
        """The dump-format version the file is read as: the declared one, else ``1``."""
        return self.format_version or V1

    @property
    def tensors(self) -> list[TensorInfo]:
        """The tensors in header order."""
        return list(self.header.tensors.values())

    def to_json(self) -> dict[str, Any]:
        """The ``inspect --format json`` document (:meth:`write_json` streams it)."""
        return self._document(
            lambda: [
                {
                    "name": t.name,
                    "dtype": t.dtype_name,
                    "safetensors_dtype": t.dtype,
                    "shape": list(t.shape),
                    "bytes": t.nbytes,
                    "data_offsets": [t.begin, t.end],
                }
                for t in self.tensors
            ]
        )

    def _document(self, tensors: Callable[[], list[dict[str, Any]]]) -> dict[str, Any]:
        layout = self.layout
        return {
            "path": str(self.header.path),
            "file_size": self.header.file_size,
            "header_bytes": self.header.header_size,
            "data_bytes": self.header.data_bytes,
            "tensors": tensors(),
            "metadata": self.metadata,
            "dump": {
                "follows_schema": layout is not None,
                "problem": self.problem,
                "num_items": None if layout is None else layout.num_items,
                "stacked": None if layout is None else layout.stacked,
                "masks": None if layout is None else sorted(layout.masks),
                "placeholders": None if layout is None else sorted(layout.placeholders),
            },
            "exit_code": 0,
        }

    def write_json(self, out: TextIO) -> None:
        """Write :meth:`to_json` as ``json.dumps(..., indent=2)`` would, plus a newline, but
        a batch of tensors at a time, each formatted in C: a header of a million tensors
        needs no million-entry document in memory, nor the pure-Python indenting encoder."""
        doc = self.to_json_without_tensors()
        marker = "\u0000tensors\u0000"
        doc["tensors"] = marker
        head, tail = json.dumps(doc, indent=2).split(json.dumps(marker), 1)
        tensors = list(self.header.tensors.values())
        out.write(head + "[")
        for start in range(0, len(tensors), _BATCH):
            batch = tensors[start : start + _BATCH]
            out.write(("," if start else "") + ",".join(_tensor_objects(batch)))
        out.write(("\n  ]" if tensors else "]") + tail + "\n")
        out.flush()

    def to_json_without_tensors(self) -> dict[str, Any]:
        """:meth:`to_json` with an empty tensor list."""
        return {**self._document(lambda: []), "tensors": []}


#: Tensors formatted per batch.
_BATCH = 1 << 14
#: One tensor's object as ``json.dumps(indent=2)`` lays it out inside the document (each line
#: indented by 4 more spaces; lists one element a line).
_TENSOR = (
    '\n    {\n      "name": %s,\n      %s,\n      "shape": %s,\n      "bytes": %d,'
    '\n      "data_offsets": [\n        %d,\n        %d\n      ]\n    }'
)


def _tensor_objects(tensors: list[TensorInfo]) -> Iterator[str]:
    """Each tensor's JSON object (:data:`_TENSOR`), formatted in C: names quoted by the json
    module's own C function, each distinct dtype and shape laid out once."""
    names, codes, shapes, begins, ends = zip(*tensors, strict=True)
    dtypes = {
        code: f'"dtype": {quote(BY_CODE[code].name)},\n      "safetensors_dtype": {quote(code)}'
        for code in set(codes)
    }
    layouts = {
        shape: "[\n" + ",\n".join([f"        {d}" for d in shape]) + "\n      ]" if shape else "[]"
        for shape in set(shapes)
    }
    rows = zip(
        map(quote, names),
        map(dtypes.__getitem__, codes),
        map(layouts.__getitem__, shapes),
        map(sub, ends, begins),
        begins,
        ends,
        strict=True,
    )
    return map(_TENSOR.__mod__, rows)


def summarize(path: str | os.PathLike[str]) -> FileSummary:
    """Read ``path``'s header (InputError if it is not a valid safetensors file) and judge it."""
    header = read_header(path)
    # safetensors stores metadata in no particular order: known keys first, then the rest.
    rank = {key: i for i, key in enumerate(KNOWN_METADATA)}
    metadata = dict(
        sorted(header.metadata.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))
    )
    try:
        return FileSummary(header, metadata, check_schema(header), None)
    except InputError as exc:
        where = printable(str(header.path))
        return FileSummary(header, metadata, None, exc.message.removeprefix(f"{where}: "))
