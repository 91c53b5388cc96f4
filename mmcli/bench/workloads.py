"""What the bench times: the ops, the standard mask layouts and sizes, and the workloads built
from them or read from an encoder-output dump."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from mmcli.devices import available_bytes
from mmcli.dtypes import BENCH_DTYPES, name_of
from mmcli.embeddings import ops
from mmcli.errors import InputError

OPS = ("scatter", "gather")
LAYOUTS = ("contiguous", "interleaved", "random")
SUITE = (576, 2304, 9216)
QUICK_SUITE = (576, 2304)
#: Share of embedding positions in the ``random`` layout (fixed seed: runs are comparable).
RANDOM_EMBED_FRACTION = 0.9


@dataclass(frozen=True)
class Workload:
    """One mask and its embeddings: the inputs of one scatter and one gather."""

    layout: str
    embeds: torch.Tensor
    is_embed: torch.Tensor
    item: int | None = None

    @property
    def num_placeholders(self) -> int:
        return int(self.is_embed.shape[0])

    @property
    def num_embeds(self) -> int:
        return int(self.embeds.shape[0])

    @property
    def hidden(self) -> int:
        return int(self.embeds.shape[1])

    def label(self, op: str, impl: str) -> str:
        """``"scatter fast 576×4096 interleaved"``: how warnings and failures name a case."""
        where = f"item {self.item}" if self.item is not None else self.layout
        return f"{op} {impl} {self.num_placeholders}×{self.hidden} {where}"


def make_mask(num_placeholders: int, layout: str) -> torch.Tensor:
    """A CPU bool mask of a standard layout.

    ``contiguous``: one run of embeddings between a start and an end marker token.
    ``interleaved``: a square-ish grid of patch rows, one non-embedding (image-break) token
    after each row. ``random``: each position an embedding with probability 0.9, seeded.
    """
    n = num_placeholders
    if layout == "contiguous":
        mask = torch.ones(n, dtype=torch.bool)
        if n >= 3:
            mask[0] = mask[-1] = False
        return mask
    if layout == "interleaved":
        period = max(2, math.isqrt(n))
        return (torch.arange(n) + 1) % period != 0
    if layout == "random":
        gen = torch.Generator().manual_seed(n)
        return torch.rand(n, generator=gen) < RANDOM_EMBED_FRACTION
    raise InputError(f"unknown layout {layout!r}", hint=f"use one of: {', '.join(LAYOUTS)}")


def synthetic_workloads(
    sizes: Sequence[int],
    layouts: Sequence[str],
    hidden: int,
    dtype: torch.dtype,
    device: torch.device,
) -> list[Workload]:
    """Random embeddings for every size × layout, on ``device``."""
    row = hidden * torch.empty((), dtype=dtype).element_size()
    check_memory([(n, n, row) for n in sizes], device)
    gen = torch.Generator().manual_seed(0)
    out = []
    for layout in layouts:
        for size in sizes:
            mask = make_mask(size, layout)
            rows = int(mask.sum())
            embeds = torch.randn(rows, hidden, generator=gen).to(dtype=dtype, device=device)
            out.append(Workload(layout, embeds, mask.to(device)))
    return out


def dump_workloads(
    path: str | os.PathLike[str], device: torch.device, dtype: torch.dtype | None
) -> list[Workload]:
    """The real embeddings and masks of an encoder-output dump, one workload per item; an item
    stored without an ``is_embed`` mask gets an all-True one.

    Every item must be a valid scatter input (2-D floating point, a 1-D bool mask with as many
    True values as rows): otherwise an InputError names the item.
    """
    from mmcli.dump.io import load_dump

    dump = load_dump(path, device=device)

    def footprint(i: int) -> tuple[int, int, int]:
        shape = dump.item_shape(i)
        rows = shape[0] if shape else 0
        mask = dump.header.tensors.get(f"is_embed.{i}")
        length = mask.shape[0] if mask is not None and mask.shape else rows
        return length, rows, 8 * math.prod(shape[1:])  # 8 bytes: an upper bound per value

    check_memory(
        [footprint(i) for i in range(dump.num_items)],
        device,
        hint="--from times the dump's items as they are: bench a dump with smaller items, "
        "or on a device with more memory",
    )
    out = []
    for i in range(dump.num_items):
        embeds = dump.embedding(i)
        mask = dump.is_embed(i)
        if mask is None:
            mask = torch.ones(embeds.shape[0] if embeds.ndim else 0, dtype=torch.bool)
            mask = mask.to(device)
        if dtype is not None and embeds.is_floating_point():
            embeds = embeds.to(dtype)
        elif embeds.is_floating_point() and name_of(embeds.dtype) not in BENCH_DTYPES:
            # float8 and float64 have no fill kernel the timed ops need on every device.
            raise InputError(
                f"{dump.path}: item {i} is {name_of(embeds.dtype)}; the bench times bfloat16, "
                "float16 and float32",
                hint="pass --dtype bf16 (or fp16, fp32) to convert the dump's items",
            )
        try:
            # The public op runs every input check, in the order the engine meets them.
            ops.scatter_mm_placeholders(embeds, mask, impl="reference")
        except InputError as exc:
            raise InputError(
                f"{dump.path}: item {i}: {exc.message}",
                hint="run `mmcli check-embeddings` on the dump to see every problem",
            ) from None
        out.append(Workload("dump", embeds, mask, item=i))
    if not out:
        raise InputError(f"{dump.path}: the dump has no items", hint="dump at least one item")
    return out


def check_memory(
    cases: Iterable[tuple[int, int, int]],
    device: torch.device,
    *,
    hint: str = "use smaller --placeholders or --hidden",
) -> None:
    """Refuse, before allocating, a run whose largest case would not fit on the device.

    ``cases`` are ``(placeholder rows, embedding rows, bytes per row)``; a case holds its
    inputs, an output and a copy source of each size. ``hint`` says what the user can change.
    """
    need = max(((p + e) * row * 3 for p, e, row in cases), default=0)
    available = available_bytes(device)
    if available is not None and need > available // 2:
        raise InputError(
            f"the largest case needs about {_gib(need)} but {device} has "
            f"{_gib(available)} available",
            hint=hint,
        )


def _gib(n: int) -> str:
    """Bytes as GiB for a message; exact integers, so no size is too large to print."""
    tenths = (n * 10 + 2**29) // 2**30
    if tenths >= 10**12:
        return f"over {10**11:,} GiB"
    return f"{tenths // 10:,}.{tenths % 10} GiB"
