"""The ``mm_dump`` file format: safetensors header reader, schema, and dump reader/writer.

``Dump``, ``load_dump``, ``dump_encoder_outputs`` and ``read_tensor`` (in :mod:`mmcli.dump.io`)
need torch and are imported on first use, so the header reader and the schema
(``mmcli.dump.safetensors``, ``mmcli.dump.schema``) stay torch-free for ``mmcli inspect``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mmcli.dump.schema import FORMAT, FORMAT_VERSION, DumpLayout, check_schema, schema_problem

if TYPE_CHECKING:
    from mmcli.dump.io import Dump, dump_encoder_outputs, load_dump, read_tensor

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Dump",
    "DumpLayout",
    "check_schema",
    "dump_encoder_outputs",
    "load_dump",
    "read_tensor",
    "schema_problem",
]

_TORCH_NAMES = {"Dump", "dump_encoder_outputs", "load_dump", "read_tensor"}


def __getattr__(name: str) -> Any:
    if name not in _TORCH_NAMES:
        raise AttributeError(f"module 'mmcli.dump' has no attribute {name!r}")
    value = getattr(importlib.import_module("mmcli.dump.io"), name)
    globals()[name] = value
    return value
