"""The hostile-file corpus: safetensors files and trees built to break the readers.

Same table style as ``test_bad_inputs.py``: each case builds its input in ``tmp_path``, runs one
command through ``CliRunner`` and checks the error contract: the exit code; for exit 2 exactly
one ``error:`` line naming the problem and one ``hint:`` line (and nothing on stdout, unless
other files of the run were checked); for exit 0/1 nothing on stderr and the finding on stdout;
no traceback, no terminal escape byte anywhere, no line longer than :data:`LINE_LIMIT`, and a
bounded run time. Sizes the header declares must be bounded by what the file holds, and
allocations by memory: ``test_the_corpus_runs_in_bounded_memory`` reruns every case in one
child process and bounds its peak resident memory.

The causes (issue 13): sizes and counts declared in a header driving unbounded work; dtypes
without CPU kernels; failures not isolated per file; a dump reopened by path per tensor;
untrusted names and metadata echoed raw or whole.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mmcli import dump_encoder_outputs
from mmcli.cli.main import app
from mmcli.devices import available_bytes

runner = CliRunner()
#: Generous: a case that takes this long is hanging or allocating, not merely slow.
TIME_LIMIT_S = 10.0
#: No output line may be longer (a 1 MiB name must not be echoed whole).
LINE_LIMIT = 4000
#: Peak resident memory of the child that reruns the whole corpus.
MEMORY_LIMIT = 1 << 30
H = 4
META = {"format": "mm_dump", "format_version": "1"}
ITEM_DATA = struct.pack("<8f", *range(1, 9))

# -- raw safetensors bytes ------------------------------------------------------------------


def raw(header: Any, data: bytes = b"") -> bytes:
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(body)) + body + data


def entry(dtype: Any, shape: Any, begin: Any, end: Any) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def dump_header(meta: dict[str, Any] | None = None, **tensors: Any) -> dict[str, Any]:
    return {"__metadata__": {**META, **(meta or {})}, **tensors}


ITEM = entry("F32", [2, H], 0, 32)


def one_item(**tensors: Any) -> dict[str, Any]:
    return dump_header(**{"mm_embeddings.0": ITEM, **tensors})


def big(n: int) -> str:
    return "9" * n


# -- cases ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One command line and the outcome it must have."""

    build: Callable[[Path], list[str]]
    code: int
    message: str
    #: Other files of the run were checked: their reports are on stdout despite exit 2.
    partial: bool = False


def _write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def _check(content: bytes, *options: str, name: str = "dump.safetensors") -> Callable[..., Any]:
    return lambda tmp: [
        "check-embeddings",
        str(_write(tmp, name, content)),
        "--device",
        "cpu",
        *options,
    ]


def _inspect(content: bytes, *options: str) -> Callable[..., Any]:
    return lambda tmp: ["inspect", str(_write(tmp, "dump.safetensors", content)), *options]


def _good(tmp_path: Path, name: str = "good.safetensors") -> Path:
    items = [torch.arange(8, dtype=torch.float32).reshape(2, H) + 1]
    return dump_encoder_outputs(tmp_path / name, items, expected_num_items=1)


# Headers whose declared sizes, numbers or names are hostile: neither command may read them.
HEADER_CASES: dict[str, tuple[bytes, str]] = {
    "shape-zero-times-2^70": (
        raw(one_item(x=entry("F32", [0, 1 << 70], 32, 32)), ITEM_DATA),
        "whose element count overflows",
    ),
    "shape-2^63-times-zero": (
        raw(one_item(x=entry("F32", [1 << 63, 0], 32, 32)), ITEM_DATA),
        "whose element count overflows",
    ),
    "shape-2^62-bools": (
        raw(one_item(x=entry("BOOL", [1 << 62], 32, (1 << 62) + 32)), ITEM_DATA),
        "element count overflows",
    ),
    "shape-2^61-bools-past-end": (
        raw(one_item(x=entry("BOOL", [1 << 61], 32, (1 << 61) + 32)), ITEM_DATA),
        "past the end of the data (32 bytes after the header)",
    ),
    "shape-many-zero-dims-and-a-huge-one": (
        raw(one_item(x=entry("F32", [0] * 100 + [1 << 62], 32, 32)), ITEM_DATA),
        "element count overflows",
    ),
    "shape-5000-digit-dimension": (
        raw(
            b'{"x": {"dtype": "F32", "shape": ['
            + big(5000).encode()
            + b'], "data_offsets": [0, 0]}}'
        ),
        "header is not valid JSON: an integer with too many digits",
    ),
    "shape-4000-digit-dimension": (
        raw(one_item(x=entry("F32", [int(big(4000))], 32, 32)), ITEM_DATA),
        "element count overflows",
    ),
    "shape-nan": (
        raw(b'{"x": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 0]}}'),
        "has shape [NaN]; expected a list of non-negative integers",
    ),
    "shape-infinity-literal": (
        raw(b'{"x": {"dtype": "F32", "shape": [Infinity], "data_offsets": [0, 0]}}'),
        "has shape [Infinity]",
    ),
    "shape-1e400": (
        raw(b'{"x": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 0]}}'),
        "has shape [Infinity]",
    ),
    "shape-bool": (
        raw(one_item(x=entry("F32", [True], 32, 36)), ITEM_DATA + b"\0" * 4),
        "has shape [true]",
    ),
    "shape-million-element-list": (
        raw(one_item(x=entry("F32", [-1] * 1_000_000, 32, 32)), ITEM_DATA),
        "expected a list of non-negative integers",
    ),
    "offsets-end-2^64": (
        raw(one_item(x=entry("BOOL", [4], 32, 1 << 64)), ITEM_DATA),
        "past the end of the data",
    ),
    "offsets-both-2^70": (
        raw(one_item(x=entry("F32", [0], 1 << 70, 1 << 70)), ITEM_DATA),
        "past the end of the data",
    ),
    "offsets-4000-digit-end": (
        raw(one_item(x=entry("U8", [1], 32, int(big(4000)))), ITEM_DATA),
        "past the end of the data",
    ),
    "offsets-5000-digit-begin": (
        raw(
            b'{"x": {"dtype": "U8", "shape": [0], "data_offsets": ['
            + big(5000).encode()
            + b", 0]}}"
        ),
        "an integer with too many digits",
    ),
    "offsets-three-numbers": (
        raw(one_item(x={"dtype": "U8", "shape": [0], "data_offsets": [32, 32, 32]}), ITEM_DATA),
        "expected [begin, end]",
    ),
    "offsets-float": (
        raw(one_item(x=entry("U8", [0], 32.0, 32)), ITEM_DATA),
        "expected [begin, end]",
    ),
    "offsets-million-entries": (
        raw(one_item(x={"dtype": "U8", "shape": [0], "data_offsets": [0] * 1_000_000}), ITEM_DATA),
        "expected [begin, end]",
    ),
    "dtype-1mib-string": (
        raw(one_item(x=entry("F" * (1 << 20), [0], 32, 32)), ITEM_DATA),
        "has unknown dtype",
    ),
    "dtype-escape-sequence": (
        raw(one_item(x=entry("\x1b[2J", [0], 32, 32)), ITEM_DATA),
        'has unknown dtype "\\u001b[2J"',
    ),
    "dtype-nested-900-deep": (
        raw(
            b'{"x": {"dtype": '
            + b"[" * 900
            + b"]" * 900
            + b', "shape": [0], "data_offsets": [0, 0]}}'
        ),
        "has unknown dtype",
    ),
    "name-1mib-overlapping": (
        raw(
            dump_header(**{"x" * (1 << 20): ITEM, "mm_embeddings.0": entry("F32", [1, H], 16, 32)}),
            ITEM_DATA,
        ),
        "characters left out",
    ),
    "name-1mib-duplicated": (
        raw(b'{"' + b"y" * (1 << 20) + b'": 1, "' + b"y" * (1 << 20) + b'": 2}'),
        "duplicate key",
    ),
    "name-escape-sequence-gap": (
        raw(dump_header(**{"\x1b[2J\x1b]0;pwned\x07": entry("F32", [1, H], 16, 32)}), ITEM_DATA),
        "unused bytes before tensor '\\x1b[2J\\x1b]0;pwned\\x07'",
    ),
    "name-newline-not-an-object": (
        raw(dump_header(**{"a\nb": 5}), b""),
        "tensor 'a\\nb' is a JSON int",
    ),
    "name-lone-surrogate-not-an-object": (
        raw(b'{"\\udc80\\u202e": [1]}'),
        "tensor '\\udc80\\u202e' is a JSON list",
    ),
    "metadata-key-escape-value-int": (
        raw({"__metadata__": {"\x1b[31mred": 1}, "mm_embeddings.0": ITEM}, ITEM_DATA),
        "__metadata__['\\x1b[31mred'] is a JSON int (1)",
    ),
    "metadata-value-huge-list": (
        raw({"__metadata__": {"model": list(range(200_000))}, "mm_embeddings.0": ITEM}, ITEM_DATA),
        "characters left out",
    ),
    "metadata-value-nested-900-deep": (
        raw(b'{"__metadata__": {"m": ' + b"[" * 900 + b"]" * 900 + b"}}"),
        "expected a string",
    ),
    "metadata-looks-like-a-tensor": (
        raw({"__metadata__": entry("F32", [0], 0, 0)}),
        "__metadata__['shape'] is a JSON list ([0]), expected a string",
    ),
    "header-bom": (raw(b"\xef\xbb\xbf{}"), "header is not valid JSON"),
    "header-nul-bytes": (raw(b"{\x00}"), "header is not valid JSON"),
    "header-only-whitespace": (raw(b" " * 64), "header is not valid JSON"),
    "header-1mib-whitespace-then-garbage": (
        raw(b" " * (1 << 20) + b"x"),
        "header is not valid JSON",
    ),
}

CASES: dict[str, Case] = {}
for _name, (_content, _message) in HEADER_CASES.items():
    CASES[f"check-embeddings/{_name}"] = Case(_check(_content), 2, _message)
    CASES[f"inspect/{_name}"] = Case(_inspect(_content), 2, _message)


# Readable safetensors whose dump schema declares hostile counts: check-embeddings refuses them
# (exit 2); inspect reads them (exit 0) and says why they are not dumps.
SCHEMA_CASES: dict[str, tuple[bytes, str]] = {
    "item-index-10^9": (
        raw(dump_header(**{"mm_embeddings.1000000000": entry("F32", [0, H], 0, 0)})),
        "items must be numbered 0..1000000000 without gaps; missing mm_embeddings.0",
    ),
    "item-index-10^18-and-0": (
        raw(
            dump_header(
                **{"mm_embeddings.0": ITEM, f"mm_embeddings.{10**18}": entry("F32", [0], 32, 32)}
            ),
            ITEM_DATA,
        ),
        "missing mm_embeddings.1, mm_embeddings.2",
    ),
    "item-index-5000-digits": (
        raw(dump_header(**{"mm_embeddings.1" + "0" * 4999: entry("F32", [0, H], 0, 0)})),
        "an item index of 5,000 digits",
    ),
    "item-index-20-digits": (
        raw(dump_header(**{f"mm_embeddings.{10**19}": entry("F32", [0, H], 0, 0)})),
        "an item index of 20 digits",
    ),
    "mask-index-5000-digits": (
        raw(one_item(**{"is_embed.9" + "9" * 4999: entry("BOOL", [0], 32, 32)}), ITEM_DATA),
        "an item index of 5,000 digits",
    ),
    "mask-index-10^9": (
        raw(one_item(**{"is_embed.1000000000": entry("BOOL", [2], 32, 34)}), ITEM_DATA + b"\1\1"),
        "is_embed.1000000000 belongs to item 1000000000, but the dump has 1 item(s)",
    ),
    "placeholders-index-10^9": (
        raw(
            one_item(**{"placeholders.1000000000": entry("F32", [0, H], 32, 32)}),
            ITEM_DATA,
        ),
        "placeholders.1000000000 belongs to item 1000000000",
    ),
    "stacked-10^12-empty-items": (
        raw(dump_header(mm_embeddings=entry("F32", [10**12, 0, 64], 0, 0))),
        "declares 1000000000000 items of 0 bytes each",
    ),
    "stacked-2^61-empty-items": (
        raw(dump_header(mm_embeddings=entry("BF16", [1 << 61, 0], 0, 0))),
        f"declares {1 << 61} items of 0 bytes each",
    ),
    "item-100000-dimensions": (
        raw(dump_header(**{"mm_embeddings.0": entry("F32", [1] * 100_000, 0, 4)}), b"\0" * 4),
        "tensor 'mm_embeddings.0' has 100,000 dimensions; torch holds at most 64",
    ),
    "metadata-expected-items-5000-digits": (
        raw(
            dump_header({"expected_num_items": big(5000)}, **{"mm_embeddings.0": ITEM}),
            ITEM_DATA,
        ),
        "metadata expected_num_items='9999",
    ),
    "metadata-hidden-size-30-digits": (
        raw(dump_header({"hidden_size": big(30)}, **{"mm_embeddings.0": ITEM}), ITEM_DATA),
        "metadata hidden_size='999999999999999999999999999999' is not an integer >= 1",
    ),
    "metadata-hidden-size-fullwidth-digits": (
        raw(dump_header({"hidden_size": "\uff14"}, **{"mm_embeddings.0": ITEM}), ITEM_DATA),
        "metadata hidden_size='\uff14' is not an integer >= 1",
    ),
    "metadata-dtype-1mib": (
        raw(dump_header({"dtype": "b" * (1 << 20)}, **{"mm_embeddings.0": ITEM}), ITEM_DATA),
        "unknown model dtype 'bbbb",
    ),
    "metadata-format-escape-sequence": (
        raw({"__metadata__": {"format": "\x1b[2J"}, "mm_embeddings.0": ITEM}, ITEM_DATA),
        "metadata format='\\x1b[2J', expected 'mm_dump'",
    ),
    "metadata-format-version-1mib": (
        raw(
            dump_header({"format_version": "2" * (1 << 20)}, **{"mm_embeddings.0": ITEM}), ITEM_DATA
        ),
        "characters left out",
    ),
    "unexpected-keys-1mib-and-escapes": (
        raw({"z" * (1 << 20): ITEM, "\x1b[2J": entry("U8", [0], 32, 32)}, ITEM_DATA),
        "unexpected keys",
    ),
    "ten-thousand-unexpected-keys": (
        raw({f"w{i}": entry("U8", [0], 0, 0) for i in range(10_000)}),
        "… (9988 more)",
    ),
}
# placeholder_token_ids that int() or an int64 tensor cannot take (exit 3 before).
for _name, _ids in {"double-minus": "--5", "2^63": str(1 << 63), "negative": "9,-5"}.items():
    SCHEMA_CASES[f"token-ids-{_name}"] = (
        raw(
            dump_header(
                {"format_version": "2", "placeholder_token_ids": _ids}, **{"mm_embeddings.0": ITEM}
            ),
            ITEM_DATA,
        ),
        "is not a comma-separated list of token ids",
    )
# A merged mm_embeddings that is not 2-D (rows, hidden): 0-D gave an IndexError (exit 3).
for _name, _shape in {"0-d": [], "3-d": [1, 1, H]}.items():
    _bytes = 4 * (H if _shape else 1)
    SCHEMA_CASES[f"merged-{_name}"] = (
        raw(
            dump_header(
                {"format_version": "2", "layout": "merged"},
                mm_embeddings=entry("F32", _shape, 0, _bytes),
                item_counts=entry("I64", [1], _bytes, _bytes + 8),
            ),
            bytes(_bytes) + struct.pack("<q", 1),
        ),
        "layout=merged needs a 2-D mm_embeddings (rows, hidden)",
    )
for _name, (_content, _message) in SCHEMA_CASES.items():
    CASES[f"check-embeddings/{_name}"] = Case(_check(_content), 2, _message)
    CASES[f"inspect/{_name}"] = Case(_inspect(_content), 0, "not an mm_dump dump")


def _merged_empty_items(n: int) -> bytes:
    """A merged dump of ``n`` items of no rows: each item's rows were found by reading
    item_counts again and summing the counts before it (O(n²): minutes at 20,000)."""
    return raw(
        dump_header(
            {"format_version": "2", "layout": "merged"},
            mm_embeddings=entry("F32", [0, H], 0, 0),
            item_counts=entry("I64", [n], 0, 8 * n),
        ),
        bytes(8 * n),
    )


CASES["check-embeddings/merged-20000-empty-items"] = Case(
    _check(_merged_empty_items(20_000), "--format", "json"), 0, '"items": 20000'
)
CASES["inspect/merged-20000-empty-items"] = Case(
    _inspect(_merged_empty_items(20_000)), 0, "20000 items (one merged tensor"
)


# -- every dtype in every role: a finding or a clean refusal, never a missing kernel ---------
#: Bytes per element of each safetensors dtype a dump may hold.
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
    "C64": 8,
}
FLOATS = {"F8_E5M2", "F8_E4M3", "F16", "BF16", "F32", "F64"}


def _item_of(code: str) -> bytes:
    n = DTYPE_BYTES[code]
    values = bytes([0x3C] * n)  # non-zero, finite in every float format
    return raw(
        dump_header(
            **{
                "mm_embeddings.0": entry(code, [2, H], 0, 8 * n),
                "is_embed.0": entry("BOOL", [3], 8 * n, 8 * n + 3),
            }
        ),
        values * 8 + b"\1\0\1",
    )


def _mask_of(code: str) -> bytes:
    n = DTYPE_BYTES[code]
    one = (1).to_bytes(n, "little") if code not in FLOATS | {"C64"} else bytes([0x3C] * n)
    mask = one + bytes(n) + one
    return raw(one_item(**{"is_embed.0": entry(code, [3], 32, 32 + 3 * n)}), ITEM_DATA + mask)


def _stored_of(code: str) -> bytes:
    n = DTYPE_BYTES[code]
    return raw(
        one_item(**{"placeholders.0": entry(code, [2, H], 32, 32 + 8 * n)}),
        ITEM_DATA + bytes([0x3C] * n) * 8,
    )


for _code in DTYPE_BYTES:
    _expect = (
        (0, "1 file, 1 item, 0 errors")
        if _code in FLOATS
        else (1, "complex-dtype")
        if _code == "C64"
        else (1, "integer-dtype")
    )
    CASES[f"check-embeddings/item-dtype-{_code}"] = Case(_check(_item_of(_code)), *_expect)
    CASES[f"check-embeddings/mask-dtype-{_code}"] = Case(
        _check(_mask_of(_code)), *((0, "0 errors") if _code == "BOOL" else (1, "mask-dtype"))
    )
    CASES[f"check-embeddings/stored-dtype-{_code}"] = Case(
        _check(_stored_of(_code)), 1, "roundtrip"
    )
for _code in ("F8_E8M0", "F4", "F6_E2M3", "F6_E3M2"):
    _n = 8 if _code == "F4" else 12 if _code.startswith("F6") else 16
    CASES[f"check-embeddings/item-dtype-{_code}"] = Case(
        _check(raw(dump_header(**{"mm_embeddings.0": entry(_code, [2, 8], 0, _n)}), bytes(_n))),
        2,
        f"has dtype {_code}, which mmcli cannot load",
    )


# -- memory: items larger than the machine, as sparse files (nothing is written) -------------


def _sparse_dump(tmp_path: Path, header: dict[str, Any], size: int) -> Path:
    path = tmp_path / "huge.safetensors"
    body = json.dumps(header).encode()
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(body)) + body)
        f.truncate(8 + len(body) + size)
    return path


def _beyond_memory() -> int:
    """Rows of 16 KiB (4096 fp32) that together need more than the free memory, and >= 24 GiB."""
    free = available_bytes(torch.device("cpu")) or 0
    return max(free + (1 << 30), 24 << 30) // (4096 * 4) + 1


def _huge_item(tmp_path: Path) -> list[str]:
    rows = _beyond_memory()
    size = rows * 4096 * 4
    path = _sparse_dump(
        tmp_path, dump_header(**{"mm_embeddings.0": entry("F32", [rows, 4096], 0, size)}), size
    )
    return ["check-embeddings", str(path), "--device", "cpu"]


def _huge_stacked(tmp_path: Path) -> list[str]:
    rows = _beyond_memory()
    size = rows * 4096 * 4
    header = dump_header(mm_embeddings=entry("F32", [1, rows, 4096], 0, size))
    return ["check-embeddings", str(_sparse_dump(tmp_path, header, size)), "--device", "cpu"]


def _huge_mask(tmp_path: Path) -> list[str]:
    """A 4-row item whose 1-D mask has billions of positions: scattering it would need
    positions x rows bytes."""
    positions = max(_beyond_memory() * 4, 1 << 33) // 4
    header = dump_header(
        **{
            "mm_embeddings.0": entry("F32", [4, 4096], 0, 65536),
            "is_embed.0": entry("BOOL", [positions], 65536, 65536 + positions),
        }
    )
    return [
        "check-embeddings",
        str(_sparse_dump(tmp_path, header, 65536 + positions)),
        "--device",
        "cpu",
    ]


CASES.update(
    {
        "check-embeddings/item-beyond-memory": Case(_huge_item, 2, "but only"),
        "check-embeddings/stacked-item-beyond-memory": Case(_huge_stacked, 2, "but only"),
        "check-embeddings/mask-beyond-memory": Case(_huge_mask, 2, "but only"),
        "inspect/item-beyond-memory": Case(
            lambda tmp: ["inspect", _huge_item(tmp)[1]], 0, "mm_dump v1 dump: 1 item "
        ),
    }
)


# -- paths: FIFOs, devices, odd names, deep and broken trees ---------------------------------


def _fifo(tmp_path: Path, name: str = "fifo.safetensors") -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


def _tree(tmp_path: Path, depth: int, *, with_dump: bool) -> Path:
    root = here = tmp_path / "deep"
    root.mkdir()
    for _ in range(depth):  # one level at a time: pathlib's mkdir(parents=True) recurses
        here = here / "d"
        here.mkdir()
    if with_dump:
        _good(here)
    return root


def _dir_with(tmp_path: Path, make: Callable[[Path], object]) -> list[str]:
    root = tmp_path / "dumps"
    root.mkdir()
    _good(root, "a.safetensors")
    make(root)
    return ["check-embeddings", str(root), "--device", "cpu"]


def _named(name: str) -> Callable[[Path], list[str]]:
    def build(tmp_path: Path) -> list[str]:
        root = tmp_path / "dumps"
        root.mkdir()
        _good(root, name)
        return ["check-embeddings", str(root), "--device", "cpu"]

    return build


CASES.update(
    {
        "check-embeddings/fifo": Case(
            lambda tmp: ["check-embeddings", str(_fifo(tmp)), "--device", "cpu"],
            2,
            "fifo.safetensors: not a regular file",
        ),
        "inspect/fifo": Case(
            lambda tmp: ["inspect", str(_fifo(tmp))], 2, "fifo.safetensors: not a regular file"
        ),
        "check-embeddings/dev-zero": Case(
            lambda tmp: ["check-embeddings", "/dev/zero", "--device", "cpu"],
            2,
            "/dev/zero: not a regular file",
        ),
        "inspect/dev-urandom": Case(
            lambda tmp: ["inspect", "/dev/urandom"], 2, "/dev/urandom: not a regular file"
        ),
        "check-embeddings/fifo-in-a-directory": Case(
            lambda tmp: _dir_with(tmp, lambda d: _fifo(d, "z.safetensors")),
            2,
            "z.safetensors: not a regular file",
            partial=True,
        ),
        "check-embeddings/broken-link-in-a-directory": Case(
            lambda tmp: _dir_with(
                tmp, lambda d: (d / "z.safetensors").symlink_to(d / "gone.safetensors")
            ),
            2,
            "z.safetensors: no such file",
            partial=True,
        ),
        "check-embeddings/corrupt-file-in-a-directory": Case(
            lambda tmp: _dir_with(tmp, lambda d: _write(d, "z.safetensors", b"\0" * 3)),
            2,
            "z.safetensors: file is 3 bytes",
            partial=True,
        ),
        "check-embeddings/missing-path-next-to-a-good-one": Case(
            lambda tmp: [
                "check-embeddings",
                str(_good(tmp)),
                str(tmp / "nope.safetensors"),
                "--device",
                "cpu",
            ],
            2,
            "nope.safetensors: no such file or directory",
            partial=True,
        ),
        "check-embeddings/empty-path": Case(
            lambda tmp: ["check-embeddings", "", "--device", "cpu"], 2, "empty path ''"
        ),
        "check-embeddings/empty-path-next-to-a-good-one": Case(
            lambda tmp: ["check-embeddings", "", str(_good(tmp)), "--device", "cpu"],
            2,
            "empty path ''",
            partial=True,
        ),
        "inspect/empty-path": Case(lambda tmp: ["inspect", ""], 2, "empty path ''"),
        "check-embeddings/tree-1200-deep": Case(
            lambda tmp: [
                "check-embeddings",
                str(_tree(tmp, 1200, with_dump=True)),
                "--device",
                "cpu",
            ],
            0,
            "1 file, 1 item, 0 errors",
        ),
        "check-embeddings/tree-1200-deep-empty": Case(
            lambda tmp: [
                "check-embeddings",
                str(_tree(tmp, 1200, with_dump=False)),
                "--device",
                "cpu",
            ],
            2,
            "directory holds no *.safetensors files",
        ),
        "check-embeddings/directory-link-loop": Case(
            lambda tmp: _dir_with(tmp, lambda d: (d / "loop.safetensors").symlink_to(d)),
            0,
            "1 file, 1 item",
        ),
        "check-embeddings/file-name-with-newline": Case(
            _named("a\nb.safetensors"), 0, "a\\nb.safetensors  ok"
        ),
        "check-embeddings/file-name-with-escape-sequence": Case(
            _named("\x1b[2J\x1b]0;x\x07.safetensors"), 0, "\\x1b[2J\\x1b]0;x\\x07.safetensors  ok"
        ),
        "check-embeddings/file-name-not-utf8": Case(
            _named(os.fsdecode(b"\xff\xfe.safetensors")), 0, "\\udcff\\udcfe.safetensors  ok"
        ),
        "check-embeddings/file-name-with-bidi-override": Case(
            _named("\u202egnp.safetensors"), 0, "\\u202egnp.safetensors  ok"
        ),
        "check-embeddings/corrupt-file-named-with-escapes": Case(
            _check(b"\0", name="\x1b[31m.safetensors"), 2, "\\x1b[31m.safetensors: file is 1 bytes"
        ),
        "inspect/metadata-escape-sequences": Case(
            _inspect(
                raw(
                    dump_header({"model": "\x1b[2J\x1b[3J\x9b31m\r"}, **{"mm_embeddings.0": ITEM}),
                    ITEM_DATA,
                )
            ),
            0,
            "model = \\x1b[2J\\x1b[3J\\x9b31m\\r",
        ),
        "inspect/metadata-value-1mib": Case(
            _inspect(
                raw(dump_header({"model": "m" * (1 << 20)}, **{"mm_embeddings.0": ITEM}), ITEM_DATA)
            ),
            0,
            "characters left out",
        ),
        "inspect/tensor-name-escape-sequence": Case(
            _inspect(raw({"\x1b[2J": ITEM}, ITEM_DATA)), 0, "\\x1b[2J"
        ),
        "inspect/tensor-name-1mib": Case(
            _inspect(raw({"n" * (1 << 20): ITEM}, ITEM_DATA)), 0, "characters left out"
        ),
        "inspect/shape-64-dimensions": Case(
            _inspect(raw({"t": entry("F32", [1] * 64, 0, 4)}, b"\0" * 4)), 0, "[1, 1, 1"
        ),
        "inspect/20000-tensors-capped": Case(
            _inspect(raw({f"t.{i}": entry("U8", [0], 0, 0) for i in range(20_000)})),
            0,
            "… 19,000 more tensors not shown; --format json lists them all",
        ),
        "inspect/20000-metadata-keys-capped": Case(
            _inspect(raw({"__metadata__": {f"k{i}": "v" for i in range(20_000)}})),
            0,
            "… 19,000 more metadata keys not shown",
        ),
        "inspect/20000-tensors-json": Case(
            _inspect(
                raw({f"t.{i}": entry("U8", [0], 0, 0) for i in range(20_000)}), "--format", "json"
            ),
            0,
            '"name": "t.19999"',
        ),
    }
)


def _million(tmp_path: Path) -> Path:
    parts = [
        f'"mm_embeddings.{i}":{{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}}'
        for i in range(1_000_000)
    ]
    return _write(tmp_path, "million.safetensors", raw(("{" + ",".join(parts) + "}").encode()))


#: Cases that take seconds: run only with the slow tests (and in the memory-bound child).
SLOW_CASES: dict[str, Case] = {
    "inspect/million-tensors": Case(
        lambda tmp: ["inspect", str(_million(tmp))], 0, "… 999,000 more tensors not shown"
    ),
    "inspect/million-tensors-json": Case(
        lambda tmp: ["inspect", str(_million(tmp)), "--format", "json"],
        0,
        '"name": "mm_embeddings.999999"',
    ),
}


# -- the contract ---------------------------------------------------------------------------


def remove_deep_trees(tmp_path: Path) -> None:
    """Remove the 1,200-level trees bottom-up without recursion (``shutil.rmtree``, which
    pytest cleans up with, recurses once a level and would raise RecursionError)."""
    root = tmp_path / "deep"
    if not root.is_dir():
        return
    order, stack = [], [str(root)]
    while stack:
        directory = stack.pop()
        order.append(directory)
        with os.scandir(directory) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    os.unlink(e.path)
    for directory in reversed(order):
        os.rmdir(directory)


def run_case(case: Case, tmp_path: Path) -> tuple[int, str, str, float]:
    try:
        args = case.build(tmp_path)
        start = time.monotonic()
        result = runner.invoke(app, args, catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr, time.monotonic() - start
    finally:
        remove_deep_trees(tmp_path)


def check_contract(name: str, case: Case, code: int, out: str, err: str, elapsed: float) -> None:
    assert "Traceback" not in out + err
    assert elapsed < TIME_LIMIT_S, f"{name} took {elapsed:.1f} s"
    assert code == case.code, (name, out[-2000:], err[-2000:])
    for stream in (out, err):
        assert "\x1b" not in stream and "\x9b" not in stream, "a raw escape sequence was printed"
        longest = max((len(line) for line in stream.splitlines()), default=0)
        assert longest <= LINE_LIMIT, f"{name}: a line of {longest} characters"
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 2, err
        assert lines[0].startswith("error: "), err
        assert lines[1].startswith("hint: ") and len(lines[1]) > len("hint: "), err
        assert case.message in lines[0], err
        if not case.partial:
            assert out == "", out
        else:
            assert "good" in out or "a.safetensors" in out, out
    else:
        assert err == "", err
        assert case.message in out, out[-2000:]


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_file(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    check_contract(name, case, *run_case(case, tmp_path))


def run_process(
    measured_within: Any, args: list[str], tmp_path: Path
) -> tuple[int, str, str, float, float, int]:
    """``python -m mmcli ARGS`` with stdout to a file: exit code, the last 2 MB of stdout,
    stderr, wall seconds, CPU seconds, and the process's peak resident memory in bytes."""
    out_path = tmp_path / "stdout.txt"
    usage, done = measured_within(
        [sys.executable, "-m", "mmcli", *args],
        cpu_limit=TIME_LIMIT_S,
        stdout_path=out_path,
        stderr=subprocess.PIPE,
    )
    err = done.stderr.decode(errors="replace")
    with out_path.open("rb") as f:
        f.seek(max(out_path.stat().st_size - (2 << 20), 0))
        tail = f.read().decode(errors="replace")
    return usage.code, tail, err, usage.elapsed, usage.cpu, usage.peak


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW_CASES))
def test_hostile_file_slow(measured_within: Any, tmp_path: Path, name: str) -> None:
    """A million tensors, in a real process: < 10 s of CPU (startup included; the wall clock
    of a loaded test machine only guards against a hang) and < 1 GiB resident."""
    case = SLOW_CASES[name]
    args = case.build(tmp_path)
    code, out, err, elapsed, cpu, peak = run_process(measured_within, args, tmp_path)
    assert elapsed < 6 * TIME_LIMIT_S, f"{name}: {elapsed:.1f} s"
    check_contract(name, case, code, out, err, cpu)
    assert peak < MEMORY_LIMIT, f"{name}: peak resident memory {peak >> 20} MiB"


def test_the_corpus_is_large() -> None:
    assert len(CASES) + len(SLOW_CASES) >= 150


# -- memory: the whole corpus in one child, its peak resident memory bounded ------------------

_CHILD = """
import json, sys, tempfile, time, resource
from pathlib import Path
sys.path.insert(0, {here!r})
import test_hostile_files as t
results = {{}}
for name, case in t.CASES.items():
    with tempfile.TemporaryDirectory() as tmp:
        code, out, err, elapsed = t.run_case(case, Path(tmp))
        results[name] = [code, elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]
print(json.dumps(results))
"""


@pytest.mark.slow
def test_the_corpus_runs_in_bounded_memory(measured: Any) -> None:
    """Every case, one after the other in one process: the peak resident memory of that
    process (torch included) stays under 1 GiB, so no case allocated what a header declared
    (the million-tensor cases bound their own process in ``test_hostile_file_slow``)."""
    here = str(Path(__file__).parent)
    usage, done = measured(
        [sys.executable, "-c", _CHILD.format(here=here)], capture_output=True, text=True
    )
    assert usage.code == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.splitlines()[-1])
    peak_kib = max(rss for _, _, rss in results.values())
    assert peak_kib * 1024 < MEMORY_LIMIT, f"peak resident memory {peak_kib / 1024:.0f} MiB"
    slow = {name: r[1] for name, r in results.items() if r[1] >= TIME_LIMIT_S}
    assert not slow, slow
    assert len(results) == len(CASES)


# -- a hypothesis fuzz of headers through both commands ---------------------------------------

_DTYPES = [*DTYPE_BYTES, "F8_E8M0", "F4", "F6_E2M3", "X", ""]
_NAMES = st.one_of(
    st.sampled_from(
        ["mm_embeddings", "mm_embeddings.0", "mm_embeddings.1", "is_embed.0", "placeholders.0"]
    ),
    st.builds(lambda n: f"mm_embeddings.{n}", st.integers(0, 10**30)),
    st.builds(lambda n: f"is_embed.{n}", st.integers(0, 10**6)),
    st.text(max_size=12),
)
_INTS = st.one_of(
    st.integers(0, 64),
    st.integers(-(1 << 70), 1 << 70),
    st.sampled_from([1 << 62, 1 << 63, 1 << 64]),
)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    )


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 70), 1 << 70)
    | st.floats()
    | st.text(max_size=8),
    _containers,
    max_leaves=12,
)
_ENTRY = st.one_of(
    st.fixed_dictionaries(
        {
            "dtype": st.sampled_from(_DTYPES),
            "shape": st.lists(_INTS, max_size=4),
            "data_offsets": st.lists(_INTS, min_size=2, max_size=2),
        }
    ),
    _JSON,
)
_META = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "format": st.sampled_from(["mm_dump", "x"]),
            "format_version": st.sampled_from(["1", "2", "9"]),
        },
        optional={
            "expected_num_items": st.text(alphabet="0123456789-x", max_size=25),
            "hidden_size": st.text(alphabet="0123456789", max_size=25),
            "dtype": st.sampled_from(["bf16", "fp32", "int7", "\x1b"]),
            "layout": st.sampled_from(["merged", "x"]),
        },
    ),
    _JSON,
)


@st.composite
def headers(draw: st.DrawFn) -> bytes:
    doc: dict[str, Any] = {}
    meta = draw(_META)
    if meta is not None:
        doc["__metadata__"] = meta
    for _ in range(draw(st.integers(0, 4))):
        doc[draw(_NAMES)] = draw(_ENTRY)
    ends = [
        e["data_offsets"][1]
        for e in doc.values()
        if isinstance(e, dict)
        and isinstance(e.get("data_offsets"), list)
        and len(e["data_offsets"]) == 2
    ]
    sizes = [e for e in ends if isinstance(e, int) and 0 <= e <= 4096]
    size = draw(st.sampled_from([0, max(sizes, default=0), draw(st.integers(0, 256))]))
    return raw(json.dumps(doc).encode(), draw(st.binary(min_size=size, max_size=size)))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=headers())
def test_fuzzed_headers_keep_the_contract(tmp_path: Path, content: bytes) -> None:
    """Random headers through inspect and check-embeddings: exit 0, 1 or 2, never 3, never a
    traceback, exit 2 always exactly an error line and a hint line."""
    path = _write(tmp_path, "fuzz.safetensors", content)
    for args in (["inspect", str(path)], ["check-embeddings", str(path), "--device", "cpu"]):
        start = time.monotonic()
        result = runner.invoke(app, args, catch_exceptions=False)
        assert time.monotonic() - start < TIME_LIMIT_S
        assert result.exit_code in (0, 1, 2), (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
        if result.exit_code == 2:
            lines = result.stderr.splitlines()
            assert len(lines) == 2 and lines[0].startswith("error: "), result.stderr
            assert lines[1].startswith("hint: "), result.stderr
