"""The benchmark engine behind ``mmcli bench``: workloads, correctness check, copy ceiling.

Every implementation is checked bit-for-bit against the reference before it is timed (the
timer is :mod:`mmcli.bench.timing`). The ceiling is a copy of a tensor the size of the op's output,
on the same device in the same run: the ops allocate and fill a new tensor, so ``clone()``
(allocate + copy) is the like-for-like bound.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from mmcli.bench.timing import Timing, count_host_syncs, sample, summarise
from mmcli.devices import available_bytes
from mmcli.dtypes import name_of
from mmcli.embeddings import ops
from mmcli.errors import InputError

OPS = ("scatter", "gather")
LAYOUTS = ("contiguous", "interleaved", "random")
IMPLS = ("reference", "fast")
SUITE = (576, 2304, 9216)
QUICK_SUITE = (576, 2304)
QUICK_MIN_TIME = 0.05
#: Share of embedding positions in the ``random`` layout (fixed seed: runs are comparable).
RANDOM_EMBED_FRACTION = 0.9
#: IQR over median above which a timing is reported as noisy (torch.utils.benchmark's bar).
SPREAD_WARNING = 0.10
#: Interleaved timing rounds per case (see :func:`run`).
ROUNDS = 3


# ------------------------------------------------------------------------------- options


def parse_choices(text: str, option: str, allowed: Sequence[str]) -> tuple[str, ...]:
    """``"a,b"`` → ``("a", "b")``, each one of ``allowed``, duplicates dropped."""
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    if not names:
        raise InputError(f"{option} is empty", hint=f"use one or more of: {', '.join(allowed)}")
    for name in names:
        if name not in allowed:
            raise InputError(
                f"{option}: unknown value {name!r}",
                hint=f"use one or more of: {', '.join(allowed)} (comma-separated)",
            )
    return tuple(dict.fromkeys(names))


def parse_sizes(text: str, option: str = "--placeholders") -> tuple[int, ...]:
    """``"576,2304"`` → ``(576, 2304)``; every entry a positive integer."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise InputError(f"{option} is empty", hint="give sizes such as 576,2304,9216")
    sizes = []
    for part in parts:
        if not part.isdigit() or int(part) < 1:
            raise InputError(
                f"{option}: {part!r} is not a positive integer",
                hint="give placeholder counts such as 576,2304,9216",
            )
        sizes.append(int(part))
    return tuple(dict.fromkeys(sizes))


# ----------------------------------------------------------------------------- workloads


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
    """The real embeddings and masks of a dump (SPEC §3); an item without a mask gets all-True.

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

    check_memory([footprint(i) for i in range(dump.num_items)], device)
    out = []
    for i in range(dump.num_items):
        embeds = dump.embedding(i)
        mask = dump.is_embed(i)
        if mask is None:
            mask = torch.ones(embeds.shape[0] if embeds.ndim else 0, dtype=torch.bool)
            mask = mask.to(device)
        if dtype is not None and embeds.is_floating_point():
            embeds = embeds.to(dtype)
        try:
            checked = ops.check_mask(mask)
            ops.check_scatter_inputs(embeds, checked)
            ops.check_count(embeds, checked)
        except InputError as exc:
            raise InputError(
                f"{dump.path}: item {i}: {exc.message}",
                hint="run `mmcli check-embeddings` on the dump to see every problem",
            ) from None
        out.append(Workload("dump", embeds, checked, item=i))
    if not out:
        raise InputError(f"{dump.path}: the dump has no items", hint="dump at least one item")
    return out


def check_memory(cases: Iterable[tuple[int, int, int]], device: torch.device) -> None:
    """Refuse, before allocating, a run whose largest case would not fit on the device.

    ``cases`` are ``(placeholder rows, embedding rows, bytes per row)``; a case holds its
    inputs, an output and a copy source of each size.
    """
    need = max(((p + e) * row * 3 for p, e, row in cases), default=0)
    available = available_bytes(device)
    if available is not None and need > available // 2:
        raise InputError(
            f"the largest case needs about {need / 2**30:.1f} GiB but {device} has "
            f"{available / 2**30:.1f} GiB available",
            hint="use smaller --placeholders or --hidden",
        )


# --------------------------------------------------------------------------------- cases


@dataclass
class BenchCase:
    """One op × implementation × workload, timed (SPEC §4's JSON case, plus the ceiling)."""

    op: str
    impl: str
    num_placeholders: int
    num_embeds: int
    hidden: int
    dtype: str
    layout: str
    median_us: float
    iqr_us: float
    gbps: float
    copy_fraction: float
    speedup_vs_reference: float | None
    host_syncs: int | None
    copy_us: float
    item: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        if self.item is None:
            del doc["item"]
        for key, digits in _ROUNDING.items():
            if doc[key] is not None:
                doc[key] = round(doc[key], digits)
        return doc


#: Digits kept in JSON: well below the noise of any timing.
_ROUNDING = {
    "median_us": 3,
    "iqr_us": 3,
    "copy_us": 3,
    "gbps": 4,
    "copy_fraction": 4,
    "speedup_vs_reference": 4,
}


@dataclass
class BenchResult:
    """Every timed case, plus warnings (noisy timings) and failures (wrong results)."""

    device: str
    torch_version: str
    threads: int | None = None
    cases: list[BenchCase] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> list[dict[str, Any]]:
        """Geometric means per op × implementation over the cases."""
        rows = []
        for op in OPS:
            for impl in dict.fromkeys(c.impl for c in self.cases):
                cases = [c for c in self.cases if c.op == op and c.impl == impl]
                if not cases:
                    continue
                speedups = [c.speedup_vs_reference for c in cases]
                known = [s for s in speedups if s is not None]
                rows.append(
                    {
                        "op": op,
                        "impl": impl,
                        "cases": len(cases),
                        "geomean_speedup_vs_reference": _geomean(known)
                        if len(known) == len(cases)
                        else None,
                        "geomean_time_vs_copy": _geomean(
                            [c.median_us / c.copy_us for c in cases if c.copy_us > 0]
                        ),
                        "geomean_copy_fraction": _geomean([c.copy_fraction for c in cases]),
                    }
                )
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "torch_version": self.torch_version,
            "threads": self.threads,
            "cases": [c.to_json() for c in self.cases],
            "summary": self.summary(),
            "warnings": list(self.warnings),
            "failures": list(self.failures),
        }


def _geomean(values: Sequence[float]) -> float | None:
    if not values or any(v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _op_callable(op: str, impl: str, w: Workload, placeholders: torch.Tensor) -> Callable[[], Any]:
    """The call to time. ``reference`` is the engine's algorithm as it runs in the engine."""
    embeds, mask, rows = w.embeds, w.is_embed, w.num_embeds
    if impl == "reference":
        if op == "scatter":
            return lambda: ops.scatter_reference(embeds, mask)
        return lambda: ops.gather_reference(placeholders, mask)
    if op == "scatter":
        return lambda: ops.scatter_mm_placeholders(embeds, mask, impl="fast")
    # The row count given, as an engine has it from its placeholder range: without it a CUDA
    # gather must read the count back from the device.
    return lambda: ops.gather_mm_placeholders(placeholders, mask, impl="fast", num_embeds=rows)


def _label(op: str, impl: str, w: Workload) -> str:
    where = f"item {w.item}" if w.item is not None else w.layout
    return f"{op} {impl} {w.num_placeholders}×{w.hidden} {where}"


def count_steps(
    workloads: Sequence[Workload], op_names: Sequence[str], impls: Sequence[str]
) -> int:
    """How many timings :func:`run` makes (for a progress bar): the impls plus the copy."""
    return len(workloads) * len(op_names) * (len(impls) + 1) * ROUNDS


def run(
    workloads: Sequence[Workload],
    *,
    op_names: Sequence[str],
    impls: Sequence[str],
    device: torch.device,
    min_time: float,
    threads: int = 1,
    on_step: Callable[[str], None] | None = None,
) -> BenchResult:
    """Check each implementation against the reference, then time it and the copy ceiling.

    The copy and the implementations of one case are timed in ``ROUNDS`` interleaved rounds
    (``min_time / ROUNDS`` each) and their samples pooled, so that a busy spell on a shared
    machine lands on all of them alike rather than on whichever ran at the time.
    """
    result = BenchResult(
        device=str(device),
        torch_version=torch.__version__,
        threads=threads if device.type == "cpu" else None,
    )
    step = on_step or (lambda _label: None)
    for w in workloads:
        placeholders = ops.scatter_reference(w.embeds, w.is_embed)
        for op in op_names:
            expected = (
                placeholders if op == "scatter" else ops.gather_reference(placeholders, w.is_embed)
            )
            source = torch.empty_like(expected).normal_()
            contenders: dict[str, Callable[[], Any]] = {"copy": source.clone}
            for impl in impls:
                fn = _op_callable(op, impl, w, placeholders)
                if ops.same_bits(fn(), expected):
                    contenders[impl] = fn
                else:
                    label = _label(op, impl, w)
                    result.failures.append(f"{label}: result differs from the reference")
                    for _ in range(ROUNDS):
                        step(label)
            samples: dict[str, list[float]] = {name: [] for name in contenders}
            for _ in range(ROUNDS):
                for name, fn in contenders.items():
                    samples[name] += sample(fn, device, min_time / ROUNDS, threads=threads)
                    step(_label(op, name, w))
            del source
            timings = {name: summarise(times) for name, times in samples.items()}
            reference = timings.get("reference")
            for impl in impls:
                if impl not in timings:
                    continue
                timing = timings[impl]
                syncs = count_host_syncs(contenders[impl], device)
                case = _case(op, impl, w, timing, timings["copy"], syncs)
                if reference is not None and timing.median > 0:
                    case.speedup_vs_reference = reference.median / timing.median
                result.cases.append(case)
                if timing.spread > SPREAD_WARNING:
                    result.warnings.append(
                        f"{_label(op, impl, w)}: IQR {timing.spread:.0%} of the median (a busy "
                        "machine? rerun, or raise --min-time)"
                    )
    return result


def _case(
    op: str,
    impl: str,
    w: Workload,
    timing: Timing,
    copy: Timing,
    host_syncs: int | None,
) -> BenchCase:
    size = w.embeds.element_size() * w.hidden
    out_rows = w.num_placeholders if op == "scatter" else w.num_embeds
    useful = (w.num_embeds + out_rows) * size  # read the embedding rows, write the output
    copy_bytes = 2 * out_rows * size
    gbps = useful / timing.median / 1e9 if timing.median > 0 else 0.0
    copy_gbps = copy_bytes / copy.median / 1e9 if copy.median > 0 else 0.0
    return BenchCase(
        op=op,
        impl=impl,
        num_placeholders=w.num_placeholders,
        num_embeds=w.num_embeds,
        hidden=w.hidden,
        dtype=name_of(w.embeds.dtype),
        layout=w.layout,
        median_us=timing.median * 1e6,
        iqr_us=timing.iqr * 1e6,
        gbps=gbps,
        copy_fraction=gbps / copy_gbps if copy_gbps > 0 else 0.0,
        speedup_vs_reference=None,  # filled in once the reference is timed
        host_syncs=host_syncs,
        copy_us=copy.median * 1e6,
        item=w.item,
    )
