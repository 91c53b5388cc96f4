"""The ``mm_dump`` schema (versions 1 and 2), judged from a safetensors header alone (no torch).

Tensors: ``mm_embeddings.{i}`` for items 0..n-1 (or one stacked ``mm_embeddings``),
optional ``is_embed.{i}`` masks and ``placeholders.{i}`` scattered copies. Metadata (strings):
``format=mm_dump``, ``format_version``, optional ``expected_num_items``, ``hidden_size``,
``dtype``, ``modality``, ``model``; other keys are kept.

Version 2 adds sequence context tensors (``input_ids``, ``placeholder_positions``,
``placeholder_ranges``), a merged layout (one 2-D ``mm_embeddings`` + ``item_counts``,
``layout=merged``), a record of a non-tensor encoder return (``encoder_return_type``, no
items) and the metadata in :data:`V2_METADATA`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, methodcaller

from mmcli.dtypes import model_dtype
from mmcli.dump.safetensors import Header
from mmcli.errors import InputError
from mmcli.text import printable, quoted

FORMAT = "mm_dump"
V1, V2 = "1", "2"
#: The newest version (the one a dump using any version-2 key is written as).
FORMAT_VERSION = V2
VERSIONS = (V1, V2)
#: Version-2 tensors of sequence context (int64), and the merged layout's rows per item.
CONTEXT_TENSORS = ("input_ids", "placeholder_positions", "placeholder_ranges", "item_counts")
#: Version-2 metadata keys (``version_<library>`` keys are version 2 as well).
V2_METADATA = (
    "layout",
    "encoder_return_type",
    "placeholder_token_ids",
    "row_width",
    "deepstack_levels",
    "tp_size",
    "tp_rank",
    "phase",
    "engine",
    "engine_error",
    "capture_reason",
    "hidden_size_source",
)
#: Metadata keys with a meaning; any other key is kept and shown.
KNOWN_METADATA = (
    "format",
    "format_version",
    "expected_num_items",
    "hidden_size",
    "dtype",
    *V2_METADATA,
)

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
    #: Version 2: one merged 2-D ``mm_embeddings`` split by ``item_counts``.
    merged: bool = False
    #: Version 2: the context tensors present (names from :data:`CONTEXT_TENSORS`).
    context: frozenset[str] = field(default_factory=frozenset)

    @property
    def num_masks(self) -> int:
        """One past the highest item index with a mask (0 without masks)."""
        return max(self.masks) + 1 if self.masks else 0


def _listing(names: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(printable(name, 60) for name in names[:limit])
    more = f", … ({len(names) - limit} more)" if len(names) > limit else ""
    return f"[{shown}{more}]" if names else "none"


def int_metadata(header: Header, key: str, minimum: int) -> int | None:
    value = header.metadata.get(key)
    if value is None or value == "":
        return None
    try:
        number = int(value) if len(value) <= _MAX_DIGITS and value.isascii() else minimum - 1
    except ValueError:
        number = minimum - 1
    if not minimum <= number < _MAX_INT:
        too_large = " below 2^63" if number >= _MAX_INT else ""
        raise InputError(
            f"{_where(header)}: metadata {key}={quoted(value, 60)} is not an integer >= "
            f"{minimum}{too_large}",
            hint=f"write {key} as a decimal string, e.g. str(n)",
        )
    return number


#: Item indices and integer metadata longer than this are refused unread (``int()`` of a
#: 5,000-digit string is an error, and of a 4,000-digit one slow).
_MAX_DIGITS = 19
#: The most dimensions a torch tensor may have.
MAX_NDIM = 64
_MAX_INT = 1 << 63


def _where(header: Header) -> str:
    return printable(str(header.path))


def _huge_index(header: Header, name: str, digits: str) -> int:
    """Refuse an item index with more digits than any count can have (unread: ``int()`` of
    a 5,000-digit string is an error)."""
    raise InputError(
        f"{_where(header)}: {printable(name, 60)}: an item index of {len(digits):,} digits; "
        "items are numbered 0..n-1",
        hint=_SCHEMA_HINT,
    )


def _missing(indices: set[int], limit: int = 8) -> list[int]:
    """The first ``limit`` numbers absent from ``indices`` below its maximum (work bounded by
    the number of indices, not by their values)."""
    missing: list[int] = []
    expect = 0
    for k in sorted(indices):
        while expect < k and len(missing) < limit:
            missing.append(expect)
            expect += 1
        if len(missing) >= limit:
            break
        expect = k + 1
    return missing


_SHAPE = attrgetter("shape")
_INDEX = methodcaller("group", 1)
#: Each indexed key alone, its index of at most 19 digits (longer ones take the slow path).
_INDEXED = tuple(
    re.compile(rf"{kind}\.(0|[1-9][0-9]{{0,18}})")
    for kind in ("mm_embeddings", "is_embed", "placeholders")
)


def _classify(
    header: Header, names: list[str], v2: bool
) -> tuple[set[int], set[int], set[int], set[str], list[str]]:
    """Item indices of the per-item embeddings, masks and stored placeholders, the version-2
    context tensors present, and the names that are none of these: three scans in C (a
    header may hold a million names), then name by name only when a name is left over."""
    items, masks, kept = (
        set(map(int, map(_INDEX, filter(None, map(rx.fullmatch, names))))) for rx in _INDEXED
    )
    context = {name for name in CONTEXT_TENSORS if name in header.tensors} if v2 else set()
    known = len(items) + len(masks) + len(kept) + len(context) + ("mm_embeddings" in header.tensors)
    if known == len(names):
        return items, masks, kept, context, []
    items, masks, kept = set(), set(), set()
    unknown: list[str] = []
    for name in names:
        match = _KEY.match(name)
        if name == "mm_embeddings":
            continue
        if v2 and name in CONTEXT_TENSORS:
            context.add(name)
            continue
        if match is None:
            unknown.append(name)
            continue
        digits = match.group(2)
        index = int(digits) if len(digits) <= _MAX_DIGITS else _huge_index(header, name, digits)
        {"mm_embeddings": items, "is_embed": masks, "placeholders": kept}[match.group(1)].add(index)

    return items, masks, kept, context, unknown


def check_schema(header: Header) -> DumpLayout:
    """Check that ``header`` follows the dump schema; raise InputError listing what is wrong."""
    fmt = header.metadata.get("format")
    version = header.metadata.get("format_version")
    names = list(header.tensors)
    if fmt is not None and fmt != FORMAT:
        raise InputError(
            f"{_where(header)}: metadata format={quoted(fmt, 60)}, expected {FORMAT!r}; keys "
            f"found: {_listing(names)}",
            hint=_SCHEMA_HINT,
        )
    if version is not None and version not in VERSIONS:
        raise InputError(
            f"{_where(header)}: {FORMAT} format_version {quoted(version, 60)} is not supported "
            "(this mmcli "
            f"reads versions {', '.join(VERSIONS)})",
            hint="upgrade mmcli, or write the dump with this version's dump_encoder_outputs",
        )
    v2 = version == V2
    stacked = "mm_embeddings" in header.tensors
    items, masks, kept, context, unknown = _classify(header, names, v2)

    def fail(problem: str) -> InputError:
        return InputError(
            f"{_where(header)}: not an {FORMAT} file: {problem}; keys found: {_listing(names)}; "
            f"keys expected: {_EXPECTED_KEYS}",
            hint=_SCHEMA_HINT,
        )

    if unknown:
        raise fail(f"unexpected keys {_listing(unknown)}")
    if header.tensors and max(map(len, map(_SHAPE, header.tensors.values()))) > MAX_NDIM:
        deep = next(t for t in header.tensors.values() if len(t.shape) > MAX_NDIM)
        raise fail(
            f"tensor {quoted(deep.name, 60)} has {len(deep.shape):,} dimensions; torch holds "
            f"at most {MAX_NDIM}"
        )
    if stacked and items:
        raise fail("both a stacked mm_embeddings and per-item mm_embeddings.{i}")
    merged = header.metadata.get("layout") == "merged"
    if merged and not v2:  # the merged layout (and its item_counts) is version 2's
        raise fail(f"layout=merged needs format_version {V2}")
    if v2:
        _check_v2(header, stacked, merged, context, fail)
    returned = v2 and bool(header.metadata.get("encoder_return_type"))
    # Zero items: a file that says it is a dump (format=mm_dump) and holds no mm_embeddings;
    # its masks, stored placeholders and ranges are then the slots of items that never came.
    if not stacked and not items and fmt != FORMAT and not returned:
        raise fail("no mm_embeddings tensors")
    if merged:
        shape = header.tensors["item_counts"].shape
        num_items = shape[0]
    elif stacked:
        shape = header.tensors["mm_embeddings"].shape
        num_items = shape[0] if shape else 0
        # Items of no bytes cost nothing to declare: bound their count by the file's size.
        if num_items > max(header.data_bytes, header.file_size):
            raise fail(
                f"the stacked mm_embeddings {list(shape)} declares {num_items} items of 0 bytes "
                f"each, more than a file of {header.file_size} bytes can describe"
            )
    else:
        num_items = max(items) + 1 if items else 0
        missing = _missing(items) if len(items) != num_items else []
        if missing:
            gaps = ", ".join(f"mm_embeddings.{i}" for i in missing[:8])
            raise fail(f"items must be numbered 0..{num_items - 1} without gaps; missing {gaps}")
    for kind, found in (("is_embed", masks), ("placeholders", kept)):
        # One per item; those beyond the items are evidence of missing items, but no more
        # of them than there are.
        beyond = max(found, default=-1)
        if beyond >= num_items + len(found):
            raise fail(
                f"{kind}.{beyond} belongs to item {beyond}, but the dump has {num_items} "
                f"item(s) and {len(found)} {kind} tensor(s)"
            )
    int_metadata(header, "expected_num_items", 0)
    int_metadata(header, "hidden_size", 1)
    if header.metadata.get("dtype"):
        try:
            value = header.metadata["dtype"]
            if len(value) > 40:
                raise InputError(
                    f"unknown model dtype {quoted(value, 40)}",
                    hint="use bf16, fp16 or fp32 (or bfloat16, float16, float32)",
                )
            model_dtype(value)
        except InputError as exc:
            raise InputError(
                f"{_where(header)}: metadata dtype: {exc.message}", hint=exc.hint
            ) from None
    for key in ("row_width", "tp_size"):
        int_metadata(header, key, 1)
    for key in ("tp_rank", "deepstack_levels"):  # deepstack_levels=0: known to have none
        int_metadata(header, key, 0)
    return DumpLayout(
        num_items,
        stacked and not merged,
        frozenset(masks),
        frozenset(kept),
        merged,
        frozenset(context),
    )


def _check_v2(
    header: Header,
    stacked: bool,
    merged: bool,
    context: set[str],
    fail: Callable[[str], InputError],
) -> None:
    """The version-2 rules: context tensor shapes, the merged layout, token id lists."""
    tensors = header.tensors
    for name in context:
        info = tensors[name]
        want = 2 if name == "placeholder_ranges" else 1
        if (
            info.dtype not in ("I64", "I32")
            or len(info.shape) != want
            or (want == 2 and info.shape[1] != 2)
        ):
            shape = "(items, 2) (offset, length)" if want == 2 else "1-D"
            raise fail(f"{name} must be {shape} int64, got {info.dtype} {list(info.shape)}")
    layout = header.metadata.get("layout")
    if layout not in (None, "", "merged"):
        raise fail(f"layout {quoted(layout, 60)} is not 'merged'")
    if merged != ("item_counts" in context):
        raise fail("layout=merged and an item_counts tensor go together")
    if merged and not stacked:
        raise fail("layout=merged needs one mm_embeddings tensor")
    if merged and len(dims := tensors["mm_embeddings"].shape) != 2:
        raise fail(f"layout=merged needs a 2-D mm_embeddings (rows, hidden), got {list(dims)}")
    ids = header.metadata.get("placeholder_token_ids")
    if ids and not all(map(_is_token_id, ids.split(","))):
        raise fail(
            f"placeholder_token_ids {quoted(ids, 60)} is not a comma-separated list of "
            "token ids (integers from 0 below 2^63)"
        )


def _is_token_id(part: str) -> bool:
    """A token id as int64 holds it: ASCII digits (no sign: ``--5`` and ``-5`` are no ids),
    below 2^63 (a larger one overflowed when the ids became a tensor)."""
    digits = part.strip()
    return (
        digits.isascii() and digits.isdigit() and len(digits) <= _MAX_DIGITS
        and int(digits) < _MAX_INT
    )  # fmt: skip


def token_ids(header: Header) -> tuple[int, ...]:
    """``placeholder_token_ids`` from the metadata (empty when absent)."""
    ids = header.metadata.get("placeholder_token_ids") or ""
    return tuple(int(part) for part in ids.split(",") if part.strip())


def schema_problem(header: Header) -> str | None:
    """Why ``header`` is not a dump (None when it is one)."""
    try:
        check_schema(header)
    except InputError as exc:
        return exc.message.removeprefix(f"{_where(header)}: ")
    return None
