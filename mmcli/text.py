"""How mmcli words numbers for people: shapes, index ranges ("0–3, 5–8"), byte sizes."""

from __future__ import annotations

from collections.abc import Sequence


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
    parts: list[str] = []
    start = prev = ordered[0]
    for k in ordered[1:]:
        if k == prev + 1:
            prev = k
            continue
        parts.append(str(start) if start == prev else f"{start}–{prev}")
        start = prev = k
    parts.append(str(start) if start == prev else f"{start}–{prev}")
    if limit is not None and len(parts) > limit:
        parts = [parts[0], parts[1], "…", parts[-1]]
    return ", ".join(parts)


def human_bytes(n: int) -> str:
    """``285212672`` → ``272.0 MiB``; under 1 KiB, exact bytes (``688 B``)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            break
        value /= 1024
    return f"{n:,} B" if unit == "B" else f"{value:,.1f} {unit}"
