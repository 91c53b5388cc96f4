"""Version-2 parts of a dump read back: its sequence context and merged-layout items."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch

from mmcli.dump.safetensors import Header, TensorInfo
from mmcli.dump.schema import int_metadata, token_ids
from mmcli.embeddings.context import SequenceContext, make_context
from mmcli.errors import InputError

#: ``read(header, info, device)`` reads one tensor (:func:`mmcli.dump.io.read_tensor`).
Reader = Callable[[Header, TensorInfo, torch.device], torch.Tensor]


def _int_tensor(header: Header, name: str, read: Reader) -> torch.Tensor | None:
    info = header.tensors.get(name)
    return None if info is None else read(header, info, torch.device("cpu"))


def read_context(header: Header, read: Reader) -> SequenceContext:
    """The dump's sequence context (empty for a version-1 dump)."""
    meta = header.metadata
    return make_context(
        input_ids=_int_tensor(header, "input_ids", read),
        placeholder_positions_=_int_tensor(header, "placeholder_positions", read),
        placeholder_token_ids=token_ids(header),
        placeholder_ranges=_int_tensor(header, "placeholder_ranges", read),
        row_width=int_metadata(header, "row_width", 1),
        deepstack_levels=int_metadata(header, "deepstack_levels", 0),
        tp_size=int_metadata(header, "tp_size", 1),
        tp_rank=int_metadata(header, "tp_rank", 0),
        return_type=meta.get("encoder_return_type") or None,
        engine_error=meta.get("engine_error") or None,
        hidden_size_source=meta.get("hidden_size_source") or None,
    )


def _rows(header: Header, read: Reader) -> tuple[list[int], list[int]]:
    counts = item_counts(header, read)
    return counts, merged_starts(counts)


def item_counts(header: Header, read: Reader) -> list[int]:
    """Rows per item of a merged dump, checked against the merged tensor's rows."""
    counts = _int_tensor(header, "item_counts", read)
    if counts is None:
        raise InputError(f"{header.path}: not a merged dump", hint="use embedding(i)")
    values = [int(c) for c in counts.tolist()]
    merged = header.tensors["mm_embeddings"].shape
    if any(c < 0 for c in values) or len(merged) != 2 or sum(values) != merged[0]:
        raise InputError(
            f"{header.path}: item_counts {values[:8]} do not split the merged mm_embeddings "
            f"{list(merged)} (their sum must be its rows)",
            hint="item_counts holds each item's row count of the 2-D merged tensor, in order",
        )
    return values


def merged_starts(counts: list[int]) -> list[int]:
    """The first merged row of each item (and, last, the total): prefix sums of ``counts``."""
    return list(itertools.accumulate(counts, initial=0))


def merged_item(
    header: Header,
    index: int,
    device: torch.device,
    read: Reader,
    rows: tuple[list[int], list[int]] | None = None,
) -> torch.Tensor:
    """Item ``index`` of a merged dump: its rows of the merged tensor, read now. ``rows`` is
    ``(item_counts, merged_starts)`` when the caller keeps them (reading them again, and
    summing the counts before ``index``, for every item made a dump of n items O(n²))."""
    counts, starts = rows if rows is not None else _rows(header, read)
    info = header.tensors["mm_embeddings"]
    width = info.shape[1]
    row_bytes = info.nbytes // max(info.shape[0], 1)
    start = starts[index] * row_bytes
    part: TensorInfo = info._replace(
        shape=(counts[index], width),
        begin=info.begin + start,
        end=info.begin + start + counts[index] * row_bytes,
    )
    return read(header, part, device)
