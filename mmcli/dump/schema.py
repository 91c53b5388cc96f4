"""The ``mm_dump`` v1 schema, judged from a safetensors header alone (no torch needed).

Tensors: ``mm_embeddings.{i}`` for items 0..n-1 (or one stacked ``mm_embeddings``),
optional ``is_embed.{i}`` masks and ``placeholders.{i}`` scattered copies. Metadata (strings):
``format=mm_dump``, ``format_version=1``, optional ``expected_num_items``, ``hidden_size``,
``dtype``, ``modality``, ``model``; other keys are kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from mmcli.dtypes import model_dtype
from mmcli.dump.safetensors import Header
from mmcli.errors import InputError

FORMAT = "mm_dump"
FORMAT_VERSION = "1"
#: Metadata keys with a meaning; any other key is kept and shown.
KNOWN_METADATA = ("format", "format_version", "expected_num_items", "hidden_size", "dtype")

_KEY = re.compile(r"^(mm_embeddings|is_embed|placeholders)\.(0|[1-9][0-9]*)$")
_EXPECTED_KEYS = (
    "mm_embeddings.0 … mm_embeddings.{n-1} (or one stacked mm_embeddings), optionally "
    "is_embed.{i} and placeholders.{i}"
)
_SCHEMA_HINT = (
    "write dumps with mmcli.dump_encoder_outputs(path, mm_embeddings, is_embed=...); "
    "`mmcli inspect FILE` shows what the file holds"
)


@dataclass(frozen=True)
class DumpLayout:
    """Which tensors a dump holds, by item index."""

    num_items: int
    stacked: bool
    masks: frozenset[int] = field(default_factory=frozenset)
    placeholders: frozenset[int] = field(default_factory=frozenset)

    @property
    def num_masks(self) -> int:
        """One past the highest item index with a mask (0 without masks)."""
        return max(self.masks) + 1 if self.masks else 0


def _listing(names: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    more = f", … ({len(names) - limit} more)" if len(names) > limit else ""
    return f"[{shown}{more}]" if names else "none"


def int_metadata(header: Header, key: str, minimum: int) -> int | None:
    value = header.metadata.get(key)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise InputError(
            f"{header.path}: metadata {key}={value!r} is not an integer >= {minimum}",
            hint=f"write {key} as a decimal string, e.g. str(n)",
        )
    return number


def check_schema(header: Header) -> DumpLayout:
    """Check that ``header`` follows the dump schema; raise InputError listing what is wrong."""
    fmt = header.metadata.get("format")
    version = header.metadata.get("format_version")
    names = list(header.tensors)
    if fmt is not None and fmt != FORMAT:
        raise InputError(
            f"{header.path}: metadata format={fmt!r}, expected {FORMAT!r}; keys found: "
            f"{_listing(names)}",
            hint=_SCHEMA_HINT,
        )
    if version is not None and version != FORMAT_VERSION:
        raise InputError(
            f"{header.path}: {FORMAT} format_version {version!r} is not supported (this mmcli "
            f"reads version {FORMAT_VERSION})",
            hint="upgrade mmcli, or write the dump with this version's dump_encoder_outputs",
        )
    items: set[int] = set()
    masks: set[int] = set()
    kept: set[int] = set()
    unknown: list[str] = []
    stacked = "mm_embeddings" in header.tensors
    for name in names:
        match = _KEY.match(name)
        if name == "mm_embeddings":
            continue
        if match is None:
            unknown.append(name)
            continue
        {"mm_embeddings": items, "is_embed": masks, "placeholders": kept}[match.group(1)].add(
            int(match.group(2))
        )

    def fail(problem: str) -> InputError:
        return InputError(
            f"{header.path}: not an {FORMAT} file: {problem}; keys found: {_listing(names)}; "
            f"keys expected: {_EXPECTED_KEYS}",
            hint=_SCHEMA_HINT,
        )

    if unknown:
        raise fail(f"unexpected keys {_listing(unknown)}")
    if stacked and items:
        raise fail("both a stacked mm_embeddings and per-item mm_embeddings.{i}")
    if not stacked and not items and (names or fmt != FORMAT):
        raise fail("no mm_embeddings tensors")
    if stacked:
        shape = header.tensors["mm_embeddings"].shape
        num_items = shape[0] if shape else 0
    else:
        num_items = max(items) + 1 if items else 0
        missing = sorted(set(range(num_items)) - items)
        if missing:
            gaps = ", ".join(f"mm_embeddings.{i}" for i in missing[:8])
            raise fail(f"items must be numbered 0..{num_items - 1} without gaps; missing {gaps}")
    int_metadata(header, "expected_num_items", 0)
    int_metadata(header, "hidden_size", 1)
    if header.metadata.get("dtype"):
        try:
            model_dtype(header.metadata["dtype"])
        except InputError as exc:
            raise InputError(
                f"{header.path}: metadata dtype: {exc.message}", hint=exc.hint
            ) from None
    return DumpLayout(num_items, stacked, frozenset(masks), frozenset(kept))


def schema_problem(header: Header) -> str | None:
    """Why ``header`` is not a dump (None when it is one)."""
    try:
        check_schema(header)
    except InputError as exc:
        return exc.message.removeprefix(f"{header.path}: ")
    return None
