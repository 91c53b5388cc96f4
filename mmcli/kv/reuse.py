"""Work a sweep's points share, done once: the layers on a rank, the sharing map's findings,
the groups, which read neither the length nor the memory a sweep varies.

Outside :func:`across_points` every call does its work; inside, a result is kept by the
identity of the objects it was made from (kept alive with it, so an id stays theirs) and
the options it read. A million-layer model planned at 64 points so builds its layer table
once, not 64 times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import fields
from typing import Any, Final, TypeVar

from mmcli.kv.options import PlanOptions

T = TypeVar("T")

#: The options a sweep varies (and the batch, which follows the length); the reused work
#: reads none of them.
SWEPT: Final = frozenset({"max_model_len", "memory_bytes", "max_num_batched_tokens"})

_MEMO: ContextVar[dict[tuple[Any, ...], tuple[tuple[object, ...], Any]] | None] = ContextVar(
    "mmcli_plan_reuse", default=None
)


@contextmanager
def across_points() -> Iterator[None]:
    """Within this block, :func:`reuse` keeps what it made (dropped on leaving)."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def options_key(options: PlanOptions) -> tuple[object, ...]:
    """The options but the swept ones: what the reused work may read."""
    return tuple(getattr(options, f.name) for f in fields(options) if f.name not in SWEPT)


def reuse(
    what: str, made_from: tuple[object, ...], key: tuple[object, ...], make: Callable[[], T]
) -> T:
    """``make()``, or within :func:`across_points` what it gave for the same objects
    (``made_from``, by identity) and ``key`` (by value)."""
    memo = _MEMO.get()
    if memo is None:
        return make()
    slot = (what, tuple(map(id, made_from)), key)
    kept = memo.get(slot)
    if kept is None:
        kept = memo[slot] = (made_from, make())
    result: T = kept[1]
    return result
