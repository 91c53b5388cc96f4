"""Capacity: the pool's block count and the start-up check, on one GPU or per pipeline stage.

One GPU holding every layer is one pool. With pipeline stages each stage sizes its own pool
from its own bytes per block, the engine takes the smallest block count, and the start-up
check runs per stage (or, in 0.14–0.16, once for the whole model): see
:mod:`mmcli.kv.engine.pipeline`. Every stage is given the same memory (``--memory`` is per GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from mmcli.kv.engine.layout import Layout, largest_max_model_len
from mmcli.kv.engine.pipeline import Stages, StageShare, stage_request_bytes
from mmcli.kv.releases import EngineRules
from mmcli.kv.result import StagePlan


@dataclass(frozen=True)
class _Pool:
    """A pool the engine sizes, and the request it checks against it."""

    bytes_per_block: int
    request: Callable[[int], int]


@dataclass(frozen=True)
class Capacity:
    """The pool's figures for one side of a plan."""

    num_blocks: int
    #: The binding start-up check: what one request needs, and the memory it is held against.
    request_bytes: int
    check_memory_bytes: int
    #: The largest max_model_len that passes every check (None: the one asked for passes).
    largest_fitting_max_model_len: int | None
    stages: tuple[StagePlan, ...] = ()


def capacity(
    layout: Layout,
    shares: list[StageShare] | None,
    stages: Stages | None,
    rules: EngineRules,
    *,
    memory: int | None,
    override: int | None,
    max_model_len: int,
    reserve: int,
) -> Capacity | None:
    """Blocks, the start-up check and the largest length that fits (None: no memory given)."""

    def whole(length: int) -> int:
        return layout.request_bytes(length, reserve, rules)

    def staged(share: StageShare) -> Callable[[int], int]:
        return lambda length: stage_request_bytes(layout, share, length, reserve, rules)

    one_gpu = _Pool(layout.bytes_per_block, whole)
    pools = [one_gpu] if shares is None else [_Pool(s.bytes_per_block, staged(s)) for s in shares]
    checked = [one_gpu] if shares is not None and rules.pp_whole_model_check else pools
    if memory is None and override is None:
        return None

    def memory_of(pool: _Pool) -> int:
        return memory if memory is not None else (override or 0) * pool.bytes_per_block

    blocks = [
        override if override is not None else memory_of(p) // p.bytes_per_block for p in pools
    ]
    checks = []
    for pool in checked:
        held_back = pool.bytes_per_block if rules.null_block else 0
        available = memory_of(pool) - held_back
        need = pool.request(max_model_len)
        fits = None
        if need > available:
            fits = largest_max_model_len(pool.request, available, max_model_len)
        checks.append((need, available, fits))
    # The binding check: the least headroom (the first such stage, as the engine checks).
    need, available, _ = min(checks, key=lambda c: c[1] - c[0])
    failing = [c[2] for c in checks if c[2] is not None]
    plans: tuple[StagePlan, ...] = ()
    if shares is not None and stages is not None:
        # Each stage's own check, or none when the release checks the whole model once.
        own: list[tuple[int | None, int | None]] = (
            [(None, None)] * len(blocks)
            if rules.pp_whole_model_check
            else [(c[0], c[1]) for c in checks]
        )
        plans = tuple(
            replace(plan, num_blocks=n, request_bytes=need_i, check_memory_bytes=have_i)
            for plan, n, (need_i, have_i) in zip(
                stage_plans(shares, stages), blocks, own, strict=True
            )
        )
    return Capacity(
        num_blocks=min(blocks),
        request_bytes=need,
        check_memory_bytes=available,
        largest_fitting_max_model_len=min(failing) if failing else None,
        stages=plans,
    )


def stage_plans(shares: list[StageShare], stages: Stages) -> tuple[StagePlan, ...]:
    """The stages' fixed figures, for a plan without memory (no blocks, no check)."""
    return tuple(
        StagePlan(
            index=s.stage,
            first_layer=(span := stages.layer_range(s.stage))[0],
            last_layer=span[1],
            owners=s.owners,
            bytes_per_block=s.bytes_per_block,
        )
        for s in shares
    )
