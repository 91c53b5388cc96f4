"""What the command line can choose about a bench run, parsed and checked in one place."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mmcli.bench.workloads import (
    LAYOUTS,
    OPS,
    QUICK_SUITE,
    SUITE,
    Workload,
    dump_workloads,
    synthetic_workloads,
)
from mmcli.devices import resolve_device
from mmcli.dtypes import bench_dtype
from mmcli.embeddings import ops
from mmcli.errors import InputError

DEFAULT_HIDDEN = 4096
DEFAULT_DTYPE = "bf16"
DEFAULT_LAYOUT = "interleaved"
DEFAULT_MIN_TIME = 0.2
QUICK_MIN_TIME = 0.05
#: Longest ``--min-time``: one timing of a minute already makes a run of tens of minutes.
MAX_MIN_TIME = 60.0
#: Largest ``--placeholders`` entry and ``--hidden``: an int32 index, as engines use; what
#: fits in memory is checked later, before anything is allocated.
MAX_SIZE = 2**31 - 1
#: Most ``--placeholders`` entries in one run.
MAX_SIZES = 64


def _shown(value: int) -> str:
    """An integer for an error line: whole when short, its digit count when absurd."""
    text = str(value)
    return text if len(text) <= 24 else f"a {len(text)}-digit number"


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_choices(text: str, option: str, allowed: Sequence[str]) -> tuple[str, ...]:
    """``"a,b"`` → ``("a", "b")``, each one of ``allowed``, duplicates dropped."""
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    if not names:
        raise InputError(f"{option} is empty", hint=f"use one or more of: {', '.join(allowed)}")
    for name in names:
        if name not in allowed:
            shown = repr(name) if len(name) <= 40 else f"{name[:40]!r}… ({len(name)} characters)"
            raise InputError(
                f"{option}: unknown value {shown}",
                hint=f"use one or more of: {', '.join(allowed)} (comma-separated)",
            )
    return tuple(dict.fromkeys(names))


def parse_sizes(text: str, option: str = "--placeholders") -> tuple[int, ...]:
    """``"576,2304"`` → ``(576, 2304)``; every entry a positive integer in ASCII digits (not
    ``²`` or ``١``, which ``str.isdigit`` accepts), at most :data:`MAX_SIZE`; at most
    :data:`MAX_SIZES` entries."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise InputError(f"{option} is empty", hint="give sizes such as 576,2304,9216")
    if len(parts) > MAX_SIZES:
        raise InputError(
            f"{option}: {len(parts)} sizes; at most {MAX_SIZES} are timed in one run",
            hint="give a few sizes such as 576,2304,9216",
        )
    sizes = []
    for part in parts:
        shown = repr(part) if len(part) <= 24 else f"a {len(part)}-character value"
        if not (part.isascii() and part.isdigit()):
            raise InputError(
                f"{option}: {shown} is not a positive integer",
                hint="give placeholder counts such as 576,2304,9216",
            )
        if len(part.lstrip("0")) > len(str(MAX_SIZE)) or int(part) > MAX_SIZE:
            raise InputError(
                f"{option}: {shown} is too large (at most {MAX_SIZE:,})",
                hint="give placeholder counts such as 576,2304,9216",
            )
        if int(part) < 1:
            raise InputError(
                f"{option}: {shown} is not a positive integer",
                hint="give placeholder counts such as 576,2304,9216",
            )
        sizes.append(int(part))
    return tuple(dict.fromkeys(sizes))


@dataclass(frozen=True)
class BenchOptions:
    """A checked bench run: what to time, where, and for how long.

    Build it with :meth:`parse` from the command line's text; errors name the option they
    come from. With ``from_dump`` the workloads are the dump's items (``sizes``, ``layouts``
    and ``hidden`` are then unused) and ``dtype=None`` keeps each item's own dtype; without
    it, ``dtype=None`` is bf16.
    """

    device: torch.device
    impls: tuple[str, ...] = ops.IMPLS
    op_names: tuple[str, ...] = OPS
    min_time: float = DEFAULT_MIN_TIME
    threads: int = 1
    dtype: torch.dtype | None = None
    from_dump: str | os.PathLike[str] | None = None
    sizes: tuple[int, ...] = SUITE
    layouts: tuple[str, ...] = (DEFAULT_LAYOUT,)
    hidden: int = DEFAULT_HIDDEN

    @classmethod
    def parse(
        cls,
        *,
        device: str = "auto",
        dtype: str | None = None,
        hidden: int | None = None,
        placeholders: str | None = None,
        layout: str | None = None,
        impl: str = "reference,fast",
        op: str = "scatter,gather",
        from_dump: str | os.PathLike[str] | None = None,
        min_time: float | None = None,
        threads: int = 1,
        quick: bool = False,
    ) -> BenchOptions:
        """Check every option, in the order the errors are reported; ``None`` is "not given".

        ``quick`` is a short run: placeholders 576,2304 and a ``min_time`` of 0.05 s, unless
        those are given.
        """
        impls = parse_choices(impl, "--impl", ops.IMPLS)
        op_names = parse_choices(op, "--op", OPS)
        if hidden is not None and hidden < 1:
            raise InputError(
                f"--hidden must be at least 1, got {_shown(hidden)}", hint="e.g. --hidden 4096"
            )
        if hidden is not None and hidden > MAX_SIZE:
            raise InputError(
                f"--hidden must be at most {MAX_SIZE:,}, got {_shown(hidden)}",
                hint="e.g. --hidden 4096",
            )
        if threads < 1:
            raise InputError(
                f"--threads must be at least 1, got {_shown(threads)}", hint="e.g. --threads 1"
            )
        cpus = usable_cpus()
        if threads > cpus:
            raise InputError(
                f"--threads must be at most {cpus} (the CPUs this process may use), "
                f"got {_shown(threads)}",
                hint=f"e.g. --threads 1 (the default), or up to {cpus}",
            )
        if min_time is not None and not min_time > 0:
            raise InputError(
                f"--min-time must be a positive number of seconds, got {min_time}",
                hint="e.g. --min-time 0.2",
            )
        if min_time is not None and not (math.isfinite(min_time) and min_time <= MAX_MIN_TIME):
            raise InputError(
                f"--min-time must be at most {MAX_MIN_TIME:g} seconds, got {min_time}",
                hint="it is the time spent on each timing; e.g. --min-time 1 for steadier figures",
            )
        if min_time is None:
            min_time = QUICK_MIN_TIME if quick else DEFAULT_MIN_TIME
        torch_dtype = bench_dtype(dtype) if dtype is not None else None
        target = resolve_device(device)
        sizes: tuple[int, ...] = SUITE
        layouts: tuple[str, ...] = (DEFAULT_LAYOUT,)
        if from_dump is not None:
            given = [
                name
                for name, value in (
                    ("--placeholders", placeholders),
                    ("--layout", layout),
                    ("--hidden", hidden),
                )
                if value is not None
            ]
            if given:
                raise InputError(
                    f"{', '.join(given)} cannot be combined with --from",
                    hint="--from takes the shapes and masks from the dump",
                )
        else:
            default_sizes = QUICK_SUITE if quick else SUITE
            sizes = parse_sizes(placeholders) if placeholders is not None else default_sizes
            layouts = parse_choices(
                layout if layout is not None else DEFAULT_LAYOUT, "--layout", LAYOUTS
            )
        return cls(
            device=target,
            impls=impls,
            op_names=op_names,
            min_time=min_time,
            threads=threads,
            dtype=torch_dtype,
            from_dump=from_dump,
            sizes=sizes,
            layouts=layouts,
            hidden=hidden if hidden is not None else DEFAULT_HIDDEN,
        )

    def workloads(self) -> list[Workload]:
        """The inputs to time: the dump's items, or every size × layout of random rows."""
        if self.from_dump is not None:
            return dump_workloads(self.from_dump, self.device, self.dtype)
        dtype = self.dtype if self.dtype is not None else bench_dtype(DEFAULT_DTYPE)
        return synthetic_workloads(self.sizes, self.layouts, self.hidden, dtype, self.device)
