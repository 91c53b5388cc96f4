"""How mmcli words numbers for people: shapes, index ranges ("0–3, 5–8"), byte sizes."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice, repeat
from operator import indexOf, ne, sub


def shape_text(shape: Sequence[int]) -> str:
    """A shape as ``(1, 576, 4096)``."""
    return "(" + ", ".join(str(d) for d in shape) + (",)" if len(shape) == 1 else ")")


def items_text(indices: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` → ``items 0–2, 5``; ``[3]`` → ``item 3``."""
    ordered = sorted(set(indices))
    if len(ordered) == 1:
        return f"item {ordered[0]}"
    return "items " + index_ranges(ordered, limit=None)


def index_ranges(indices: Sequence[int], *, limit: int | None = 4) -> str:
    """``[0, 1, 2, 3, 5, 6]`` → ``0–3, 5–6``; more than ``limit`` ranges are elided."""
    ordered = sorted(indices)
    if not ordered:
        return ""
    if limit is None:
        return ", ".join(_every_range(ordered))
    # Where a range starts (past the first): wherever an index is not the one before plus 1.
    # Found at C level and lazily: of a million indices, only the first ranges and the last
    # are shown.
    starts = map(ne, map(sub, islice(ordered, 1, None), ordered), repeat(1))
    cuts: list[int] = []
    for _ in range(max(limit, 2)):
        try:
            cuts.append((cuts[-1] if cuts else 0) + 1 + indexOf(starts, True))
        except ValueError:
            break
    m = len(ordered)
    if len(cuts) < limit:  # every range
        bounds = [0, *cuts, m]
        return ", ".join(map(_span, repeat(ordered), bounds, islice(bounds, 1, None)))
    first = _span(ordered, 0, cuts[0])
    second = _span(ordered, cuts[0], cuts[1] if len(cuts) > 1 else m)
    # The last range starts at the last cut: the first one seen from the end.
    back = map(ne, map(sub, reversed(ordered), islice(reversed(ordered), 1, None)), repeat(1))
    last = _span(ordered, m - 1 - indexOf(back, True), m)
    return ", ".join([first, second, "…", last])


def _every_range(ordered: list[int]) -> list[str]:
    parts: list[str] = []
    start = prev = ordered[0]
    for k in ordered[1:]:
        if k == prev + 1:
            prev = k
            continue
        parts.append(str(start) if start == prev else f"{start}–{prev}")
        start = prev = k
    parts.append(str(start) if start == prev else f"{start}–{prev}")
    return parts


def _span(ordered: list[int], a: int, b: int) -> str:
    """``ordered[a:b]`` (consecutive indices) as ``3`` or ``3–7``."""
    start, end = ordered[a], ordered[b - 1]
    return str(start) if start == end else f"{start}–{end}"


def human_bytes(n: int) -> str:
    """``285212672`` → ``272.0 MiB``; under 1 KiB, exact bytes (``688 B``)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            break
        value /= 1024
    return f"{n:,} B" if unit == "B" else f"{value:,.1f} {unit}"


#: How many characters of untrusted text :func:`printable` keeps by default.
PRINTABLE_LIMIT = 200


def printable(text: str, limit: int | None = PRINTABLE_LIMIT) -> str:
    """Untrusted text (a file name, a tensor name, a metadata value) made safe for one line
    of a terminal: whatever ``str.isprintable`` rejects (control characters such as ESC and
    newline, C1 controls, bidi overrides, line separators, lone surrogates) becomes a Python
    escape (``\\x1b``, ``\\n``, ``\\u202e``, ``\\udcff``), and text over ``limit`` characters
    is cut in the middle with a count of what was left out. The result is always encodable
    (it is ASCII wherever the input was not printable) and never spans lines.
    """
    if limit is not None and len(text) > limit:
        head = text[: max(limit * 2 // 3, 1)]
        tail = text[len(text) - max(limit // 3 - 1, 0) :] if limit >= 3 else ""
        left_out = len(text) - len(head) - len(tail)
        text = f"{head}…[{left_out:,} characters left out]…{tail}"
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def quoted(text: str, limit: int | None = PRINTABLE_LIMIT) -> str:
    """:func:`printable` text in single quotes, as error messages name things: ``'x.0'``."""
    return f"'{printable(text, limit)}'"


def plural(n: int, word: str) -> str:
    """``1 error``, ``2 errors``, ``0 warnings`` (regular plurals only)."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
