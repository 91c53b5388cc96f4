"""The fast placeholder scatter/gather: bit-for-bit equal to the reference, sync-free on CUDA.

Two algorithms, chosen by device, because what is fast differs:

* **CPU**: the mask lives in host memory, so reading it costs nothing. It is run-length
  encoded, and the rows move as a few large slice copies (one run: the usual single image),
  one strided copy when the runs form a regular grid (patch rows separated by image-break
  tokens), or ``index_select`` with precomputed indices otherwise. Only the rows that are not
  embeddings are written with NaN: the reference fills the whole output with NaN first and
  then overwrites most of it through boolean indexing, which is far slower than a copy.
  Below ``SMALL_BYTES`` of output the reference's two kernels are cheaper than any analysis
  and are used as they are (after the eager count check).
* **CUDA (any non-CPU device)**: nothing may read device data on the host. The positions of
  the embedding rows and of the others come from ``nonzero_static`` (an output size fixed on
  the host, so no read of the count); where a torch build lacks it for the device, from
  ``cumsum`` ranks turned into a permutation (as SGLang does), which costs some ten more small
  kernels, and at the sizes engines use the launches, not the bytes, set the time.
  ``index_copy_`` / ``index_fill_`` / ``index_select`` move the rows. No ``nonzero``,
  ``.item()``, boolean indexing or branch on tensor values. The rows are moved as 8-byte words
  where the layout allows, so the kernels handle 4 bf16 values per element.

Callers (``mmcli.embeddings.ops``) have already checked everything that needs no tensor data;
this module builds on :mod:`mmcli.embeddings.reference` only.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch

from mmcli.embeddings.reference import check_count, gather_reference, scatter_reference
from mmcli.errors import InputError

#: Up to this many irregular runs of embedding rows, slice copies beat index kernels on
#: CPU (each slice copy costs a few microseconds of dispatch; measured on a 2-core CPU).
MAX_SLICE_RUNS = 8
#: Up to this many output bytes the reference's two kernels beat the run analysis on CPU
#: (its fixed cost is some 20-40 µs; measured crossover near 128 KiB on a 2-core CPU).
SMALL_BYTES = 128 * 1024

_NAN = math.nan
_WORD = torch.int64


# --------------------------------------------------------------------------------- public


def scatter(embeds: torch.Tensor, is_embed: torch.Tensor) -> torch.Tensor:
    """``(num_embeds, hidden)`` rows into a new ``(num_placeholders, hidden)``, NaN elsewhere."""
    if embeds.is_cpu:
        return _scatter_cpu(embeds, is_embed)
    return scatter_sync_free(embeds, is_embed)


def gather(
    placeholders: torch.Tensor, is_embed: torch.Tensor, *, num_embeds: int | None = None
) -> torch.Tensor:
    """The rows of ``placeholders`` where ``is_embed`` is True, in order (a new tensor).

    The result has as many rows as the mask has True values, so on CUDA its shape can only
    be known on the host by reading the count: pass ``num_embeds`` (which an engine knows
    from its placeholder range) to run without any host synchronisation. Without it, CUDA
    reads that one number (one synchronisation, the only one).
    """
    if placeholders.is_cpu:
        return _gather_cpu(placeholders, is_embed, num_embeds)
    if num_embeds is None:
        # The single unavoidable read: the output's row count is data-dependent.
        num_embeds = int(is_embed.sum())
    return gather_sync_free(placeholders, is_embed, num_embeds)


def _check_num_embeds(num_true: int, num_embeds: int, *, at_most: bool = False) -> None:
    if num_true != num_embeds:
        counted = "positions" if at_most else "True positions"
        raise InputError(
            f"is_embed has {num_true} {counted} but num_embeds is {num_embeds}",
            hint="num_embeds must be the True count of is_embed (the item's embedding rows)",
        )


# ------------------------------------------------------------------------------------ CPU


def true_runs(is_embed: torch.Tensor) -> list[tuple[int, int]]:
    """``(start, stop)`` of each run of True in a CPU bool mask, in order.

    Through numpy (a view of the mask's memory): about 5x cheaper than the same few torch
    ops, which matters next to a 200 µs copy.
    """
    flags = is_embed.numpy()
    padded = np.zeros(flags.shape[0] + 2, dtype=np.bool_)
    padded[1:-1] = flags
    edges = np.flatnonzero(padded[1:] != padded[:-1]).tolist()
    return list(zip(edges[0::2], edges[1::2], strict=True))


def _positions(is_embed: torch.Tensor) -> torch.Tensor:
    """Indices of the True values of a CPU bool mask (int64)."""
    return torch.from_numpy(np.flatnonzero(is_embed.numpy()))


def regular_grid(runs: list[tuple[int, int]]) -> tuple[int, int, int, int] | None:
    """``(first, length, stride, count)`` when all runs have one length and one spacing."""
    if len(runs) < 2:
        return None
    first, stop = runs[0]
    length = stop - first
    stride = runs[1][0] - first
    for k, (start, end) in enumerate(runs):
        if end - start != length or start != first + k * stride:
            return None
    return first, length, stride, len(runs)


def _scatter_cpu(embeds: torch.Tensor, is_embed: torch.Tensor) -> torch.Tensor:
    if is_embed.shape[0] * embeds.shape[1] * embeds.element_size() <= SMALL_BYTES:
        if np.count_nonzero(is_embed.numpy()) != embeds.shape[0]:  # cheaper than a torch sum
            check_count(embeds, is_embed)  # raises, naming both numbers
        return scatter_reference(embeds, is_embed)
    return scatter_runs(embeds, is_embed)


def _gather_cpu(
    placeholders: torch.Tensor, is_embed: torch.Tensor, num_embeds: int | None
) -> torch.Tensor:
    if num_embeds is not None:
        _check_num_embeds(int(np.count_nonzero(is_embed.numpy())), num_embeds)
    if placeholders.shape[0] * placeholders.shape[1] * placeholders.element_size() <= SMALL_BYTES:
        return gather_reference(placeholders, is_embed)
    return gather_runs(placeholders, is_embed)


def _one_value(embeds: torch.Tensor) -> bool:
    """Whether the engine's CPU assignment writes ``embeds`` as one scalar: index_put with a
    boolean mask and a one-element value fills through a Python float, so a NaN's payload
    becomes the canonical NaN (found by the bit-equality test: 0xFFDD in, 0x7FC0 out). Such
    a scatter is the reference's own, so its bits are the engine's."""
    return embeds.numel() == 1 and embeds.device.type == "cpu"


def scatter_runs(embeds: torch.Tensor, is_embed: torch.Tensor) -> torch.Tensor:
    """Scatter by runs of the (CPU) mask: only the non-embedding rows are written with NaN."""
    runs = true_runs(is_embed)
    if sum(stop - start for start, stop in runs) != embeds.shape[0]:
        check_count(embeds, is_embed)  # raises, naming both numbers
    if _one_value(embeds):
        return scatter_reference(embeds, is_embed)
    num_placeholders, hidden = is_embed.shape[0], embeds.shape[1]
    out = embeds.new_empty((num_placeholders, hidden))
    grid = regular_grid(runs)
    if not runs:
        out.fill_(_NAN)
    elif grid is not None:
        # One strided copy for all the runs, one strided fill for the gaps between them.
        first, length, stride, count = grid
        step = stride * hidden
        out.as_strided((count, length, hidden), (step, hidden, 1), first * hidden).copy_(
            embeds.reshape(count, length, hidden)  # a view: only dim 0 is split
        )
        gap = stride - length
        if gap:
            rows = out.as_strided(
                (count - 1, gap, hidden), (step, hidden, 1), (first + length) * hidden
            )
            rows.fill_(_NAN)
        out[:first].fill_(_NAN)
        out[first + (count - 1) * stride + length :].fill_(_NAN)
    elif len(runs) <= MAX_SLICE_RUNS:
        done = previous = 0
        for start, stop in runs:
            out[previous:start].fill_(_NAN)
            out[start:stop].copy_(embeds[done : done + stop - start])
            done += stop - start
            previous = stop
        out[previous:].fill_(_NAN)
    else:
        # Many irregular runs: read each output row from its source row (clamped for the
        # non-embedding rows), then overwrite only those rows with NaN.
        source = torch.cumsum(is_embed, 0).sub_(1).clamp_(min=0)
        torch.index_select(embeds, 0, source, out=out)
        out.index_fill_(0, _positions(~is_embed), _NAN)
    return out


def gather_runs(placeholders: torch.Tensor, is_embed: torch.Tensor) -> torch.Tensor:
    """Gather by runs of the (CPU) mask: one slice copy, or ``index_select``."""
    runs = true_runs(is_embed)
    if len(runs) == 1:
        start, stop = runs[0]
        return placeholders[start:stop].clone(memory_format=torch.contiguous_format)
    if not runs:
        return placeholders.new_empty((0, placeholders.shape[1]))
    return torch.index_select(placeholders, 0, _positions(is_embed))


# ---------------------------------------------------------------------------- sync-free


def _assert_count(is_embed: torch.Tensor, ranks: torch.Tensor, num_embeds: int) -> None:
    """Fail when the mask's True count is not ``num_embeds``, without a host sync.

    Reading the count on the host would be the very synchronisation this path exists to
    avoid, and skipping the check would let a short mask silently drop rows (SGLang's and
    vLLM's sync-free merges accept that). A device-side assert keeps the check and the
    asynchrony: on CUDA a mismatch surfaces as a device-side assertion at the next
    synchronisation (and, as with any device assert, the CUDA context is then unusable).
    On the CPU it raises at once; the CPU path above raises a readable InputError first.
    """
    if is_embed.shape[0] == 0:
        _check_num_embeds(0, num_embeds)  # shapes only: known on the host
        return
    torch._assert_async(ranks[-1] == num_embeds)


#: Device types whose torch build has no ``nonzero_static`` kernel (found on first use).
_NO_STATIC: set[str] = set()


def split_positions(
    is_embed: torch.Tensor, num_embeds: int, *, others: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The positions of the ``num_embeds`` True values, in order, and (with ``others``) of the
    False ones; no host synchronisation.

    A count that differs from ``num_embeds`` fails a device-side assert either way: with
    ``nonzero_static`` the count is asserted (:func:`_assert_true_count`), and a list it had
    to pad holds the out-of-range index ``len(is_embed)`` besides, which the index kernel
    that uses it rejects; the permutation fallback asserts the count on its ranks.
    """
    n = is_embed.shape[0]
    if is_embed.device.type not in _NO_STATIC and hasattr(torch, "nonzero_static"):
        try:
            embed = torch.nonzero_static(is_embed, size=num_embeds, fill_value=n).view(-1)
            _assert_true_count(is_embed, num_embeds)
            rest = None
            if others:
                rest = torch.nonzero_static(~is_embed, size=n - num_embeds, fill_value=n)
                rest = rest.view(-1)
            return embed, rest
        except NotImplementedError:  # a build without the kernel for this device
            _NO_STATIC.add(is_embed.device.type)
    order = permutation(is_embed, num_embeds)
    return order[:num_embeds], order[num_embeds:]


def _assert_true_count(is_embed: torch.Tensor, num_embeds: int) -> None:
    """A device-side assert that ``is_embed`` has ``num_embeds`` True values (no host read)."""
    if is_embed.shape[0]:
        torch._assert_async(is_embed.sum() == num_embeds)


def permutation(is_embed: torch.Tensor, num_embeds: int) -> torch.Tensor:
    """Placeholder positions reordered: the ``num_embeds`` True ones first, then the rest.

    ``cumsum`` gives each True position its rank among the Trues; a False position's rank
    among the Falses is its index minus the Trues before it. Scattering the positions to
    those slots needs no host read. The count is asserted on the device.
    """
    positions = torch.arange(is_embed.shape[0], device=is_embed.device)
    ranks = torch.cumsum(is_embed, 0)
    _assert_count(is_embed, ranks, num_embeds)
    slots = torch.where(is_embed, ranks - 1, positions - ranks + num_embeds)
    return torch.empty_like(positions).scatter_(0, slots, positions)


@cache
def _word_ratio(dtype: torch.dtype) -> int:
    size = torch.empty((), dtype=dtype).element_size()
    return 8 // size if size <= 8 and 8 % size == 0 else 0


def as_words(t: torch.Tensor) -> torch.Tensor:
    """``t`` viewed as 8-byte words along rows when its strides allow (same bytes), else ``t``.

    Decided from shapes and strides only. Moving 8 bytes per element instead of 2 lets the
    indexing kernels reach copy-like bandwidth; the bits are untouched.
    """
    ratio = _word_ratio(t.dtype)
    if (
        ratio <= 1
        or t.shape[1] % ratio
        or t.stride(1) != 1
        or t.stride(0) % ratio
        or t.storage_offset() % ratio
    ):
        return t
    return t.view(_WORD)


def scatter_sync_free(embeds: torch.Tensor, is_embed: torch.Tensor) -> torch.Tensor:
    """Scatter with no host synchronisation (runs on any device; used for CUDA)."""
    num_embeds, hidden = embeds.shape
    if is_embed.shape[0] == 0:
        _check_num_embeds(0, num_embeds)  # shapes only: known on the host
    if _one_value(embeds):
        check_count(embeds, is_embed)  # on the CPU: nothing to sync
        return scatter_reference(embeds, is_embed)
    out = embeds.new_empty((is_embed.shape[0], hidden))
    embed, rest = split_positions(is_embed, num_embeds)
    assert rest is not None
    words, source = as_words(out), as_words(embeds)
    if words.dtype != source.dtype:
        words, source = out, embeds
    words.index_copy_(0, embed, source)
    # The NaN fill in the tensor's own dtype, so its bits are those the reference's
    # ``new_full(nan)`` writes on the same device.
    out.index_fill_(0, rest, _NAN)
    return out


def gather_sync_free(
    placeholders: torch.Tensor, is_embed: torch.Tensor, num_embeds: int
) -> torch.Tensor:
    """Gather ``num_embeds`` rows with no host synchronisation (any device; used for CUDA)."""
    if not 0 <= num_embeds <= is_embed.shape[0]:
        _check_num_embeds(is_embed.shape[0], num_embeds, at_most=True)
    embed, _ = split_positions(is_embed, num_embeds, others=False)
    source = as_words(placeholders)
    return torch.index_select(source, 0, embed).view(placeholders.dtype)
