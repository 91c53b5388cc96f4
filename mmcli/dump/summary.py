"""What ``mmcli inspect`` reports about a safetensors file, from its header alone (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmcli.dump.safetensors import Header, TensorInfo, read_header
from mmcli.dump.schema import KNOWN_METADATA, DumpLayout, check_schema
from mmcli.errors import InputError


@dataclass(frozen=True)
class FileSummary:
    """A safetensors file's tensors, metadata (known keys first) and dump-schema status."""

    header: Header
    metadata: dict[str, str]
    layout: DumpLayout | None
    problem: str | None  # why the file is not an mm_dump, when it is not

    @property
    def tensors(self) -> list[TensorInfo]:
        """The tensors in header order."""
        return list(self.header.tensors.values())

    def to_json(self) -> dict[str, Any]:
        """The ``inspect --format json`` document."""
        layout = self.layout
        return {
            "path": str(self.header.path),
            "file_size": self.header.file_size,
            "header_bytes": self.header.header_size,
            "data_bytes": self.header.data_bytes,
            "tensors": [
                {
                    "name": t.name,
                    "dtype": t.dtype_name,
                    "safetensors_dtype": t.dtype,
                    "shape": list(t.shape),
                    "bytes": t.nbytes,
                    "data_offsets": [t.begin, t.end],
                }
                for t in self.tensors
            ],
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


def summarize(path: Path) -> FileSummary:
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
        return FileSummary(header, metadata, None, exc.message.removeprefix(f"{header.path}: "))
