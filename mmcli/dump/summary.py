"""What ``mmcli inspect`` reports about a safetensors file, from its header alone (torch-free)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Any, TextIO

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
        tensor by tensor: a header of a million tensors needs no million-entry document in
        memory, nor the pure-Python indenting encoder's time."""
        doc = self.to_json_without_tensors()
        marker = "\u0000tensors\u0000"
        doc["tensors"] = marker
        head, tail = json.dumps(doc, indent=2).split(json.dumps(marker), 1)
        out.write(head + "[")
        batch: list[str] = []
        first = True
        for chunk in self._tensor_chunks():
            if not first:
                batch.append(",")
            batch.append(chunk)
            first = False
            if len(batch) >= 8192:
                out.write("".join(batch))
                batch.clear()
        out.write("".join(batch) + ("\n  ]" if not first else "]") + tail + "\n")
        out.flush()

    def to_json_without_tensors(self) -> dict[str, Any]:
        """:meth:`to_json` with an empty tensor list."""
        return {**self._document(lambda: []), "tensors": []}

    def _tensor_chunks(self) -> Iterator[str]:
        """Each tensor's object as ``json.dumps(indent=2)`` lays it out inside the document
        (each line indented by 4 more spaces; lists one element a line)."""
        quote = encode_basestring_ascii  # json.dumps of a str, without its per-call overhead
        codes: dict[str, str] = {}
        for t in self.header.tensors.values():
            dtype = codes.get(t.dtype)
            if dtype is None:
                dtype = codes[t.dtype] = (
                    f'"dtype": {quote(t.dtype_name)},\n      "safetensors_dtype": {quote(t.dtype)}'
                )
            shape = (
                "[\n" + ",\n".join([f"        {d}" for d in t.shape]) + "\n      ]"
                if t.shape
                else "[]"
            )
            yield (
                f'\n    {{\n      "name": {quote(t.name)},\n      {dtype},\n      "shape": {shape},'
                f'\n      "bytes": {t.end - t.begin},\n      "data_offsets": [\n        {t.begin},'
                f"\n        {t.end}\n      ]\n    }}"
            )


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
