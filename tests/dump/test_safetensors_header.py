"""The strict header-only safetensors reader: every malformation is a clean InputError."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from mmcli.dump.safetensors import read_header
from mmcli.errors import InputError


def raw(path: Path, header: Any, data: bytes = b"", *, length: int | None = None) -> Path:
    """Write a safetensors-like file with an arbitrary header (object, str or bytes)."""
    if isinstance(header, bytes):
        body = header
    elif isinstance(header, str):
        body = header.encode()
    else:
        body = json.dumps(header).encode()
    n = len(body) if length is None else length
    path.write_bytes(struct.pack("<Q", n) + body + data)
    return path


def entry(dtype: str = "F32", shape: list[Any] | None = None, offsets: Any = None) -> Any:
    return {"dtype": dtype, "shape": [2] if shape is None else shape,
            "data_offsets": [0, 8] if offsets is None else offsets}  # fmt: skip


def test_reads_a_file_written_by_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "ok.safetensors"
    save_file(
        {"b.10": torch.ones(2), "b.2": torch.zeros(3, 4, dtype=torch.bfloat16)},
        str(path),
        metadata={"format": "mm_dump"},
    )
    header = read_header(path)
    assert list(header.tensors) == ["b.2", "b.10"]
    info = header.tensors["b.2"]
    assert (info.dtype, info.shape, info.nbytes, info.dtype_name) == (
        "BF16",
        (3, 4),
        24,
        "bfloat16",
    )
    assert header.metadata == {"format": "mm_dump"}
    assert header.data_start + header.data_bytes == header.file_size == path.stat().st_size


def test_empty_header_object_is_valid(tmp_path: Path) -> None:
    header = read_header(raw(tmp_path / "e.safetensors", {}))
    assert header.tensors == {} and header.metadata == {}


def problem(path: Path) -> str:
    with pytest.raises(InputError) as info:
        read_header(path)
    assert info.value.hint
    message = info.value.message
    assert message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


def test_too_short(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    path.write_bytes(b"\x01\x02")
    assert problem(path) == (
        "file is 2 bytes, too short for the 8-byte header length of a safetensors file"
    )


def test_zero_length(tmp_path: Path) -> None:
    path = raw(tmp_path / "z.safetensors", b"", length=0)
    assert problem(path) == "header length is 0; a safetensors header is at least `{}`"


def test_length_past_end(tmp_path: Path) -> None:
    path = raw(tmp_path / "p.safetensors", b"{}", length=100)
    assert (
        problem(path)
        == "header declares 100 bytes but the file has only 2 bytes after the length field"
    )


def test_absurd_length(tmp_path: Path) -> None:
    path = raw(tmp_path / "a.safetensors", b"{}", length=2**63)
    assert problem(path) == f"header declares an absurd length of {2**63} bytes (>= 2^40)"


def test_not_utf8(tmp_path: Path) -> None:
    assert problem(raw(tmp_path / "u.safetensors", b'{"\xff": 1}')) == (
        "header is not UTF-8 (invalid byte at offset 10)"
    )


def test_not_json(tmp_path: Path) -> None:
    assert problem(raw(tmp_path / "j.safetensors", "{nope")).startswith("header is not valid JSON")


def test_not_an_object(tmp_path: Path) -> None:
    assert (
        problem(raw(tmp_path / "o.safetensors", [1, 2])) == "header is a JSON list, not an object"
    )


def test_duplicate_keys(tmp_path: Path) -> None:
    text = '{"a": 1, "a": 2}'
    assert problem(raw(tmp_path / "d.safetensors", text)) == (
        "header is not valid JSON: duplicate key 'a'"
    )


def test_unknown_dtype(tmp_path: Path) -> None:
    path = raw(tmp_path / "x.safetensors", {"t": entry("F12")}, b"\0" * 8)
    assert problem(path) == "tensor 't' has unknown dtype \"F12\""


@pytest.mark.parametrize("shape", [[-1], [2.0], "2", [True], None])
def test_bad_shape(tmp_path: Path, shape: Any) -> None:
    e = entry()
    e["shape"] = shape
    path = raw(tmp_path / "s.safetensors", {"t": e}, b"\0" * 8)
    assert problem(path) == (
        f"tensor 't' has shape {json.dumps(shape)}; expected a list of non-negative integers"
    )


def test_overflowing_shape(tmp_path: Path) -> None:
    path = raw(tmp_path / "s.safetensors", {"t": entry(shape=[2**40, 2**40])}, b"\0" * 8)
    assert problem(path).startswith(
        f"tensor 't' has shape {[2**40, 2**40]} whose element count overflows"
    )


@pytest.mark.parametrize("offsets", [[0], [0, 8, 9], "0,8", [0, -8], [0.0, 8]])
def test_bad_offsets(tmp_path: Path, offsets: Any) -> None:
    path = raw(tmp_path / "o.safetensors", {"t": entry(offsets=offsets)}, b"\0" * 8)
    assert problem(path) == (
        f"tensor 't' has data_offsets {json.dumps(offsets)}; expected [begin, end], two "
        "non-negative integers"
    )


def test_offsets_past_end(tmp_path: Path) -> None:
    path = raw(tmp_path / "o.safetensors", {"t": entry(shape=[4], offsets=[0, 16])}, b"\0" * 8)
    assert problem(path) == (
        "tensor 't' has data_offsets [0, 16] past the end of the data (8 bytes after the header)"
    )


def test_offsets_inconsistent_with_shape(tmp_path: Path) -> None:
    path = raw(tmp_path / "o.safetensors", {"t": entry(shape=[3])}, b"\0" * 8)
    assert problem(path) == (
        "tensor 't' has shape [3] of F32 (12 bytes) but data_offsets [0, 8] span 8 bytes"
    )


def test_overlap(tmp_path: Path) -> None:
    header = {"a": entry(offsets=[0, 8]), "b": entry(offsets=[4, 12])}
    path = raw(tmp_path / "o.safetensors", header, b"\0" * 12)
    assert problem(path) == "tensor 'b' (bytes 4..12) overlaps tensor 'a' (bytes 0..8)"


def test_gap_and_trailing_bytes(tmp_path: Path) -> None:
    path = raw(tmp_path / "g.safetensors", {"t": entry(offsets=[4, 12])}, b"\0" * 12)
    assert problem(path).startswith("4 unused bytes before tensor 't'")
    path = raw(tmp_path / "t.safetensors", {"t": entry()}, b"\0" * 10)
    assert problem(path) == (
        "tensors cover 8 bytes of data but the file holds 10 bytes after the header"
    )


def test_metadata_types(tmp_path: Path) -> None:
    path = raw(tmp_path / "m.safetensors", {"__metadata__": ["x"]})
    assert problem(path) == "__metadata__ is a JSON list, expected an object of strings"
    path = raw(tmp_path / "n.safetensors", {"__metadata__": {"hidden_size": 4096}})
    assert problem(path) == "__metadata__['hidden_size'] is a JSON int (4096), expected a string"


def test_directory_and_missing(tmp_path: Path) -> None:
    directory = tmp_path / "d.safetensors"
    directory.mkdir()
    assert problem(directory) == "is a directory, not a safetensors file"
    assert problem(tmp_path / "missing.safetensors") == "no such file"


def test_printable_escapes_and_elides() -> None:
    from mmcli.text import printable, quoted

    assert printable("a\x1b[2Jb\nc\r\t\x9b\u202e\u2028\udcff é") == (
        "a\\x1b[2Jb\\nc\\r\\t\\x9b\\u202e\\u2028\\udcff é"
    )
    long = printable("x" * (1 << 20), 60)
    assert len(long) < 100 and "characters left out" in long
    assert quoted("mm_embeddings.0") == "'mm_embeddings.0'"
    assert printable("plain", None) == "plain"
    printable("\udcff" * 10).encode("ascii")  # always encodable


def test_natural_key_orders_numbers_by_value() -> None:
    from mmcli.dump.safetensors import natural_key

    names = ["x.10.w", "x.2.w", "a10", "a2", "a01", "a1", "a", "ab", "a1b", "x" + "9" * 70_000]
    assert sorted(names, key=natural_key) == [
        "a",
        "a01",
        "a1",
        "a1b",
        "a2",
        "a10",
        "ab",
        "x" + "9" * 70_000,
        "x.2.w",
        "x.10.w",
    ]
