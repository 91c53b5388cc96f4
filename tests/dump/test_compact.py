"""The compact-header fast path decides nothing on its own: for any header, reading it with the
fast path gives exactly what the general parser gives (the same tensors in the same order, the
same metadata, or the same error), and the fast path is taken for what the safetensors library
writes."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from mmcli.dtypes import BY_CODE
from mmcli.dump import compact
from mmcli.dump.safetensors import natural_key, read_header
from mmcli.errors import InputError

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def write(path: Path, header: str | dict[str, Any], data: bytes = b"") -> Path:
    text = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    raw = text.encode("utf-8")
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def outcome(path: Path) -> Any:
    """What reading ``path`` gives: the header's tensors and metadata in order, or the error."""
    try:
        header = read_header(path)
    except InputError as exc:
        return ("error", exc.message, exc.hint)
    return (list(header.tensors.items()), list(header.metadata.items()), header.header_size)


def both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, bool]:
    """``outcome`` with the fast path and with the general parser alone; whether the fast path
    accepted the header."""
    taken: list[bool] = []
    real = compact.parse_compact

    def spy(text: str, data_size: int) -> Any:
        result = real(text, data_size)
        taken.append(result is not None)
        return result

    with monkeypatch.context() as m:
        m.setattr("mmcli.dump.safetensors.parse_compact", spy)
        fast = outcome(path)
    with monkeypatch.context() as m:
        m.setattr("mmcli.dump.safetensors.parse_compact", lambda text, size: None)
        general = outcome(path)
    return fast, general, any(taken)


# -- headers as the library writes them: the fast path is taken ------------------------------


def test_a_library_written_file_takes_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tensors = {f"mm_embeddings.{i}": torch.zeros(i % 3 + 1, 4) for i in range(12)}
    tensors |= {f"is_embed.{i}": torch.ones(i % 3 + 1, dtype=torch.bool) for i in range(12)}
    tensors["scalar"] = torch.tensor(1.5, dtype=torch.bfloat16)
    path = tmp_path / "lib.safetensors"
    save_file(tensors, str(path), metadata={"format": "mm_dump", "hidden_size": "4"})
    fast, general, taken = both(path, monkeypatch)
    assert taken
    assert fast == general
    names = [name for name, _ in fast[0]]
    assert names == sorted(tensors, key=natural_key)
    assert names[:3] == ["is_embed.0", "is_embed.1", "is_embed.2"]


@pytest.mark.parametrize("where", ["first", "last", "none"])
def test_metadata_first_or_last_takes_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    entries = {
        f"t.{i}": {"dtype": "F32", "shape": [2], "data_offsets": [8 * i, 8 * i + 8]}
        for i in range(5)
    }
    meta = {"__metadata__": {"format": "mm_dump", "note": "a, b"}}
    header = {**meta, **entries} if where == "first" else entries
    if where == "last":
        header = {**entries, **meta}
    fast, general, taken = both(write(tmp_path / "m.safetensors", header, bytes(40)), monkeypatch)
    assert taken and fast == general
    assert fast[1] == ([] if where == "none" else [("format", "mm_dump"), ("note", "a, b")])


@pytest.mark.parametrize("indent", [None, 2, "\t"])
def test_headers_written_by_json_dumps_take_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indent: int | str | None
) -> None:
    entries = {
        f"t.{i}": {"dtype": "F16", "shape": [i, 3], "data_offsets": [6 * i * (i - 1) // 2, 0]}
        for i in range(6)
    }
    for i, entry in enumerate(entries.values()):
        entry["data_offsets"][1] = entry["data_offsets"][0] + 6 * i
    header = {"__metadata__": {"format": "mm_dump"}, **entries}
    text = " " + json.dumps(header, indent=indent) + "\n  "
    path = write(tmp_path / "s.safetensors", text, bytes(6 * 15))
    fast, general, taken = both(path, monkeypatch)
    assert taken and fast == general
    assert [name for name, _ in fast[0]] == list(entries)


@pytest.mark.parametrize(
    "text",
    [
        # metadata between entries, an escape in a name, keys in another order
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"__metadata__":{},'
        '"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}',
        '{"a\\u0041":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
        '{"a":{"shape":[1],"dtype":"U8","data_offsets":[0,1]}}',
    ],
)
def test_other_layouts_take_the_general_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    data = bytes(2 if '"b"' in text else 1)
    fast, general, _ = both(write(tmp_path / "o.safetensors", text, data), monkeypatch)
    assert fast == general
    assert fast[0] != "error"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
            '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
            "duplicate key",
        ),
        ('{"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}}', "unknown dtype"),
        ('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', "span 4 bytes"),
        (
            '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
            '"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}',
            "unused bytes",
        ),
        ('{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}', "end before begin"),
        (
            '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"__metadata__":{"k":1}}',
            "expected a string",
        ),
        (
            '{"__metadata__":{},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
            '"__metadata__":{}}',
            "duplicate key",
        ),
        (
            '{"__metadata__":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
            '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
            "expected a string",
        ),
        ('{"a":{"dtype":"BOOL","shape":[4611686018427387904],"data_offsets":[0,0]}}', "overflows"),
    ],
)
def test_problems_are_worded_by_the_general_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    fast, general, _ = both(write(tmp_path / "p.safetensors", text, bytes(12)), monkeypatch)
    assert fast == general
    assert fast[0] == "error" and message in fast[1], fast


def test_chunks_give_the_same_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut into chunks of an entry or two, the header reads the same; a name holding ``]},``
    is no place to cut (the cut is at ``]},"``, which no name holds)."""
    entries = {
        (f"x]}},.{i}" if i % 2 else f"layer.{i}"): {
            "dtype": "BF16",
            "shape": [i % 4, 2],
            "data_offsets": [0, 0],
        }
        for i in range(300)
    }
    offset = 0
    for entry in entries.values():
        size = entry["shape"][0] * 4
        entry["data_offsets"] = [offset, offset + size]
        offset += size
    path = write(tmp_path / "c.safetensors", {"__metadata__": {"k": "v"}, **entries}, bytes(offset))
    whole = outcome(path)
    for chunk in (61, 97, 113):  # cuts every entry or two, at all sorts of places
        monkeypatch.setattr(compact, "_CHUNK", chunk)
        fast, general, taken = both(path, monkeypatch)
        assert taken and fast == general == whole


# -- generated headers: whatever the fast path accepts, the general parser gives the same ----

NAME_CHARS = st.sampled_from(list("ab._-0123456789é ") * 3 + ["]},", "١", "\\", '"', "\x00"])
NAMES = st.lists(NAME_CHARS, min_size=0, max_size=8).map("".join)


@st.composite
def headers(draw: st.DrawFn) -> tuple[str, int]:
    """A header's text (compact or not, valid or slightly off) and the data size it claims."""
    n = draw(st.integers(0, 6))
    names = draw(st.lists(NAMES, min_size=n, max_size=n, unique=True))
    if names and draw(st.sampled_from([False] * 9 + [True])):
        names.append(names[0])  # a duplicate
    entries: list[tuple[str, Any]] = []
    offset = 0
    for name in names:
        code = draw(st.sampled_from([*list(BY_CODE)[:6], "BOOL", "F8_E4M3"] * 4 + ["Q9"]))
        shape = draw(st.lists(st.integers(0, 3), max_size=3))
        bits = BY_CODE[code].bits if code in BY_CODE else 8
        size = (bits * (shape[0] if shape else 1) * (shape[1] if len(shape) > 1 else 1)) // 8
        for d in shape[2:]:
            size *= d
        size += draw(st.sampled_from([0] * 15 + [1]))  # now and then, offsets that do not fit
        entries.append(
            (name, {"dtype": code, "shape": shape, "data_offsets": [offset, offset + size]})
        )
        offset += size
    meta = draw(st.sampled_from([None, "first", "last"] * 3 + ["middle"]))
    if meta is not None:
        value = draw(st.sampled_from([{}, {"format": "mm_dump"}] * 4 + [{"k": 1}]))
        at = {"first": 0, "last": len(entries), "middle": len(entries) // 2}[meta]
        entries.insert(at, ("__metadata__", value))
    layout = draw(st.sampled_from(["compact"] * 3 + ["spaced", "indented"]))
    separators = (",", ":") if layout == "compact" else (", ", ": ")
    indent = 2 if layout == "indented" else None
    raw = draw(st.booleans())  # names as they are, or \u-escaped
    body = separators[0].join(
        json.dumps(k, ensure_ascii=not raw)
        + separators[1]
        + json.dumps(v, separators=separators, indent=indent)
        for k, v in entries
    )
    text = "{" + body + "}" + draw(st.sampled_from(["", " ", "   \n"]))
    return text, offset + draw(st.sampled_from([0] * 15 + [2]))


@SETTINGS
@given(case=headers())
def test_generated_headers_read_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: tuple[str, int]
) -> None:
    text, data_size = case
    path = write(tmp_path / "g.safetensors", text, bytes(data_size))
    fast, general, taken = both(path, monkeypatch)
    assert fast == general
    event("fast path" if taken else "general parser")
    event("read" if fast[0] != "error" else "refused")


# -- natural order --------------------------------------------------------------------------


@SETTINGS
@given(names=st.lists(NAMES, max_size=40, unique=True))
def test_natural_order_is_natural_key_order(names: list[str]) -> None:
    from mmcli.dump.entries import make_info

    tensors = [make_info((name, "F32", (), 0, 0)) for name in names]
    ordered = [t.name for t in compact.in_natural_order(tensors)]
    assert ordered == sorted(names, key=natural_key)


@pytest.mark.parametrize(
    "names",
    [
        ["x.10", "x.9", "x.09", "x.1", "y.0", "x.0"],  # the prefix-and-number path
        ["a1", "a\x00b1", "ab1"],  # a NUL: keys
        ["x١", "x1", "x2"],  # a digit of another script: keys
        ["x." + "9" * 250, "x.1"],  # a long number: keys
        ["layers.1.w", "layers.10.w", "layers.2.w"],  # two numbers: keys
    ],
)
def test_natural_order_examples(names: list[str]) -> None:
    from mmcli.dump.entries import make_info

    tensors = [make_info((name, "F32", (), 0, 0)) for name in names]
    assert [t.name for t in compact.in_natural_order(tensors)] == sorted(names, key=natural_key)


# -- no input makes the scan quadratic -------------------------------------------------------

WHITESPACE_BOMBS = {
    "blanks": " " * (1 << 20),
    "braces around blanks": "{" + " " * (1 << 20) + "}",
    "comma, then blanks": '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},' + " " * (1 << 20),
    "a shape never closed": '{"a":{"dtype":"U8","shape":[0' + ", 0" * 200_000,
    "entry ends, then blanks": ("]} " + " " * 1000) * 1000,
    "metadata, then blanks": '{"__metadata__":{}' + "\n" * (1 << 20) + "}",
}


@pytest.mark.parametrize("name", sorted(WHITESPACE_BOMBS))
def test_long_runs_are_scanned_once(name: str) -> None:
    """A hang guard (not a benchmark): a scan that tried a run of blanks at every position of
    it would take hours on these."""
    start = time.monotonic()
    assert compact.parse_compact(WHITESPACE_BOMBS[name], 0) is None
    assert time.monotonic() - start < 5
