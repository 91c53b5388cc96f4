"""What each step runs: the issue's sizes, or tiny ones for ``--quick``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sizes:
    """What each step runs: the issue's sizes, or tiny ones for ``--quick``."""

    placeholders: tuple[int, ...]
    hidden: int
    large: tuple[int, int]  # (placeholders, hidden)
    min_time: float | None  # None: the bench's own default (0.2 s per case and impl)
    sync_placeholders: tuple[int, ...]
    sync_hidden: int
    sync_min_time: float
    dump_items: int
    dump_rows: int  # a multiple of 64 (a break token after every 64 rows)
    dump_hidden: int
    repeat: int  # check_1gib: runs of each command (best wall time, highest RSS)
    bandwidth_min_elements: int  # the bandwidth target covers cases of at least this size
    compare: tuple[int, int, int]  # compare: (items, rows, hidden) of each bf16 dump

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


FULL = Sizes(
    placeholders=(576, 2304, 9216),
    hidden=4096,
    large=(32768, 8192),
    min_time=None,
    sync_placeholders=(576, 2304),
    sync_hidden=4096,
    sync_min_time=0.01,
    dump_items=64,
    dump_rows=2048,
    dump_hidden=4096,
    repeat=2,
    bandwidth_min_elements=9216 * 4096,
    compare=(64, 2048, 4096),
)
QUICK = Sizes(
    placeholders=(64, 256),
    hidden=256,
    large=(1024, 512),
    min_time=0.005,
    sync_placeholders=(64,),
    sync_hidden=256,
    sync_min_time=0.005,
    dump_items=4,
    dump_rows=128,
    dump_hidden=256,
    repeat=1,
    bandwidth_min_elements=256 * 256,
    compare=(2, 64, 128),
)
