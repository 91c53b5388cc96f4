"""The chunk arithmetic every release shares: which rows of a request's encoder output the
current prefill window ``[prefix, prefix + extend)`` holds (own code, same contract as
SGLang's ``get_embedding_chunk``)."""

from __future__ import annotations

import torch


def get_embedding_chunk(
    embedding: torch.Tensor,
    extend_prefix_len: int,
    extend_seq_len: int,
    items_offset: list[tuple[int, int]],
) -> tuple[torch.Tensor, int, int]:
    lo = hi = 0
    first, last = extend_prefix_len, extend_prefix_len + extend_seq_len
    for start, end in items_offset:
        n = end - start + 1
        lo += min(max(first - start, 0), n)
        hi += min(max(last - start, 0), n)
    flat = embedding.reshape(-1, embedding.shape[-1])
    return flat[lo:hi], lo, hi


def item_overlap(offsets: list[tuple[int, int]], chunk_start: int, chunk_end: int) -> int | None:
    """The item's token count when any of its runs meets the window, else None."""
    if any(end >= chunk_start and start < chunk_end for start, end in offsets):
        return sum(end - start + 1 for start, end in offsets)
    return None


def slice_item(
    emb: torch.Tensor, offsets: list[tuple[int, int]], start: int, length: int
) -> torch.Tensor:
    return get_embedding_chunk(emb, start, length, offsets)[0]
