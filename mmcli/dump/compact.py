"""A fast path for headers as the safetensors library (compact) or ``json.dumps`` (spaced)
writes them: one plain entry a tensor, keys in the usual order, at most one ``__metadata__``,
first or last.

:func:`parse_compact` reads such a header column by column, with the per-entry work done in
C (a regular-expression split, then ``map`` over the columns), and returns ``None`` the
moment anything is not plainly valid: an escape in a name, keys in another order, a
duplicate, an unknown dtype, offsets that do not add up. The general parser then reads the
header again and words the problem, so the fast path decides nothing on its own: whatever it
accepts, the general parser accepts with the same result (``tests/dump/test_compact.py``
checks both on generated headers).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from itertools import repeat
from math import prod
from operator import getitem, itemgetter, le, mul, sub
from typing import cast

from mmcli.dtypes import BY_CODE
from mmcli.dump.entries import MAX_SIZE, TensorInfo, make_info, parse_hook

#: JSON's whitespace (and nothing else: ``\s`` would take more).
_W = r"[ \t\n\r]*"
#: One entry: ``{`` before the first (``\\A`` never matches at a later search position),
#: ``,`` before the others, and the whitespace after it. Every attempt starts at a literal
#: (no whitespace before the ``,``: a run of blanks tried at every position would make the
#: scan quadratic). Names hold no quote, backslash or control character; numbers are JSON
#: integers of at most 18 digits (below 2^63 whatever they are).
_NUMBER = r"(?:0|[1-9][0-9]{0,17})"
_ENTRY = re.compile(
    rf'(?:\A{_W}\{{|,){_W}"([^"\\\x00-\x1f]*)"{_W}:{_W}\{{'
    rf'{_W}"dtype"{_W}:{_W}"([A-Z0-9_]{{1,16}})"{_W},'
    rf'{_W}"shape"{_W}:{_W}\[{_W}((?:{_NUMBER})(?:{_W},{_W}{_NUMBER})*)?{_W}\]{_W},'
    rf'{_W}"data_offsets"{_W}:{_W}\[{_W}({_NUMBER}){_W},{_W}({_NUMBER}){_W}\]{_W}\}}{_W}'
)
#: Where a chunk may be cut: after an entry's ``]}`` and the whitespace after it, where a
#: ``,`` and a quote follow. A name holds no quote and a metadata string none unescaped, so in
#: a header the fast path reads this is only ever the end of one entry and the start of the
#: next.
_CUT = re.compile(rf'\]{_W}\}}{_W}(?=,{_W}")')
_END = re.compile(rf"{_W}\}}{_W}\Z")
_METADATA_FIRST = re.compile(rf'{_W}\{{{_W}"__metadata__"{_W}:{_W}')
_METADATA_LAST = re.compile(rf',{_W}"__metadata__"{_W}:{_W}')
#: Characters of header split at a time (bounds the pieces alive at once).
_CHUNK = 1 << 22
#: Canonical dtype codes by themselves: one shared string per code, not one per tensor.
_CODES = {code: code for code in BY_CODE}
_BITS = {code: dtype.bits for code, dtype in BY_CODE.items()}

Columns = tuple[list[str], list[str | None], list[str | None], list[int], list[int]]


def parse_compact(text: str, data_size: int) -> tuple[list[TensorInfo], dict[str, str]] | None:
    """The tensors (in header order) and metadata of a compact header, each entry checked as
    :func:`mmcli.dump.entries.parse_hook` checks it; ``None`` when the header is not compact
    or anything is wrong (for the general parser to word)."""
    # ``{``, perhaps the metadata member, entries back to back (``,`` between members),
    # perhaps the metadata member (if it did not come first), ``}``; whitespace anywhere.
    metadata, pos = _metadata(text, 0, _METADATA_FIRST, data_size)
    if metadata is None:
        return None
    first = pos > 0
    columns: Columns = ([], [], [], [], [])
    pos = _scan(text, pos, columns)
    if pos < 0 or not columns[0]:
        return None  # not compact, or no entries (nothing to gain)
    if not first:
        metadata, pos = _metadata(text, pos, _METADATA_LAST, data_size)
        if metadata is None:
            return None
    if _END.fullmatch(text, pos) is None:
        return None
    tensors = _tensors(columns, data_size)
    return None if tensors is None else (tensors, metadata)


def _scan(text: str, pos: int, columns: Columns) -> int:
    """Append the entries that follow ``pos`` back to back to ``columns``; the position after
    the last of them, or -1 when something else comes between them.

    The text is split in C (``re.split`` gives ``[gap, name, dtype, shape, begin, end, gap,
    ...]``), a chunk at a time: every gap must be empty but the last, which is the rest of the
    header. Chunks are cut at :data:`_CUT`; a cut anywhere else would leave a gap, and the
    general parser would read the header instead."""
    names, dtypes, shapes, begins, ends = columns
    size = len(text)
    while True:
        cut = _CUT.search(text, min(pos + _CHUNK, size))
        stop = size if cut is None else cut.end()
        parts = _ENTRY.split(text[pos:stop])
        if any(parts[0:-1:6]) or (parts[-1] and stop < size):
            return -1
        names += parts[1::6]
        dtypes += map(_CODES.get, parts[2::6])  # None for an unknown code
        shapes += parts[3::6]
        begins += map(int, parts[4::6])
        ends += map(int, parts[5::6])
        if stop == size:
            return size - len(parts[-1])
        pos = stop


def _metadata(
    text: str, pos: int, key: re.Pattern[str], data_size: int
) -> tuple[dict[str, str] | None, int]:
    """The ``__metadata__`` member at ``pos`` (``key`` matches up to its value) if it maps
    strings to strings, and where it ends; ``({}, pos)`` when there is none there, ``None``
    for a value that is not plainly valid."""
    found = key.match(text, pos)
    if found is None:
        return {}, pos
    try:
        value, end = json.JSONDecoder(object_pairs_hook=parse_hook(data_size)).raw_decode(
            text, found.end()
        )
    except (ValueError, RecursionError):
        return None, pos
    if type(value) is not dict or not all(type(v) is str for v in value.values()):
        return None, pos
    return value, end


def _tensors(columns: Columns, data_size: int) -> list[TensorInfo] | None:
    names, found, texts, begins, ends = columns
    if None in found or len(set(names)) != len(names) or "__metadata__" in names:
        return None
    dtypes = cast(list[str], found)
    if max(ends) > data_size or not all(map(le, begins, ends)):
        return None
    known: dict[str | None, tuple[int, ...] | None] = {None: ()}
    for text in set(texts) - known.keys():
        known[text] = _shape(cast(str, text))
    dims = list(map(known.__getitem__, texts))
    if None in dims:
        return None
    shapes = cast(list[tuple[int, ...]], dims)
    numel = {text: prod(shape) for text, shape in known.items() if shape is not None}
    bits = map(mul, map(numel.__getitem__, texts), map(_BITS.__getitem__, dtypes))
    if list(bits) != list(map(mul, map(sub, ends, begins), repeat(8))):
        return None  # whole bytes, as many as the offsets span
    return list(map(make_info, zip(names, dtypes, shapes, begins, ends, strict=True)))


def _shape(text: str) -> tuple[int, ...] | None:
    """A shape's dimensions, or None when its non-zero dimensions multiply to 2^62 or more."""
    shape = tuple(map(int, text.split(",")))
    span = 1
    for d in shape:
        span *= d or 1
    return shape if span < MAX_SIZE else None


# -- helpers for the validated list ----------------------------------------------------------

_OFFSETS = itemgetter(3, 4)
_NAME, _BEGIN, _END_OFFSET = itemgetter(0), itemgetter(3), itemgetter(4)


def contiguous(tensors: list[TensorInfo], data_size: int) -> bool:
    """Whether ``tensors``, sorted by offsets, cover the data exactly, back to back."""
    if not tensors:
        return data_size == 0
    begins = list(map(_BEGIN, tensors))
    ends = list(map(_END_OFFSET, tensors))
    return begins[0] == 0 and begins[1:] == ends[:-1] and ends[-1] == data_size


def sort_by_offsets(tensors: list[TensorInfo]) -> None:
    """Sort ``tensors`` by ``(begin, end)``, in place (stable)."""
    tensors.sort(key=_OFFSETS)


_DIGITS = re.compile(r"\d+")


def _number(match: re.Match[str]) -> str:
    digits = match[0].lstrip("0") or "0"
    return "\0" + (chr(0x100 + len(digits)) if len(digits) < 0xFE00 else "\uffff") + digits


_ONE_NUMBER = re.compile(r"(\D*)0*(\d{1,60000})")


def natural_key(name: str) -> str:
    """Sort key that puts ``x.2`` before ``x.10``: each run of digits becomes a NUL (below any
    text at that position), a character for its length, then the digits without leading
    zeros, so plain string comparison (fast, in C) orders numbers by value."""
    match = _ONE_NUMBER.fullmatch(name)  # the common ``prefix.N``, without a callback
    if match is not None:
        digits = match[2]
        return f"{match[1]}\0{chr(0x100 + len(digits))}{digits}"
    return _DIGITS.sub(_number, name)


def in_natural_order(tensors: list[TensorInfo]) -> Iterator[TensorInfo]:
    """``tensors`` ordered by :func:`natural_key` of their names (stable). Names of one number
    each (most headers) are ordered by prefix, then number: the same order, without a key
    string per name."""
    names = list(map(_NAME, tensors))
    split = _prefix_and_number(names)
    if split is None:
        keys = list(map(natural_key, names))
        order = sorted(range(len(names)), key=keys.__getitem__)
    else:
        prefixes, numbers = split
        order = sorted(range(len(names)), key=numbers.__getitem__)
        order.sort(key=prefixes.__getitem__)  # stable: by number within a prefix
    return map(tensors.__getitem__, order)


_ASCII_DIGITS = "0123456789"
#: A digit of any script (a prefix holding one takes :func:`natural_key`), or a NUL (which
#: would order a prefix differently from its key).
_DIGIT_OR_NUL = re.compile(r"[\d\0]")


def _prefix_and_number(names: list[str]) -> tuple[list[str], list[int]] | None:
    """Each name's prefix and number when every name is a prefix without digits and an ASCII
    number of at most 200 digits; else None. Found in C: the prefix is the name with its
    trailing digits stripped, the number what was stripped; equal prefixes shared."""
    if not names:
        return None
    prefixes = list(map(sys.intern, map(str.rstrip, names, repeat(_ASCII_DIGITS))))
    if _DIGIT_OR_NUL.search("".join(prefixes)):
        return None
    digits: list[str] = list(map(getitem, names, map(slice, map(len, prefixes), repeat(None))))
    if not 0 < min(map(len, digits)) <= max(map(len, digits)) <= 200:
        return None
    return prefixes, list(map(int, digits))
