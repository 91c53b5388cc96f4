"""Fold a long layer list into few rows: runs of like layers, and repeating patterns of runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mmcli.kv.spec import KVCacheSpec, Layer
from mmcli.kv.state import MambaSpec

#: The longest repeating pattern of runs that is folded (Gemma-like 4 sliding + 1 full is 2).
MAX_PERIOD = 4


@dataclass
class Row:
    """Layers shown as one table row: same attention, spec and sharing pattern."""

    indices: list[int]
    kind: str
    spec: KVCacheSpec | MambaSpec | None
    role: str  # "owns", "shares" or "none"
    #: The one target every layer of the row shares with (a layer name), if there is one.
    target: str | None = None
    #: Otherwise the one distance back (layer i shares with i − offset) they all share with.
    offset: int | None = None
    groups: set[int] = field(default_factory=set)

    def _key(self) -> tuple[object, ...]:
        return (self.kind, self.spec, self.role, len(self.indices))

    def compatible(self, other: Row) -> bool:
        """Whether ``other`` can be folded into this row."""
        if self._key() != other._key():
            return False
        if self.role != "shares":
            return True
        same_target = self.target is not None and self.target == other.target
        same_offset = self.offset is not None and self.offset == other.offset
        return same_target or same_offset

    def absorb(self, other: Row) -> None:
        """Fold ``other`` into this row (``compatible`` must hold)."""
        self.indices.extend(other.indices)
        if self.target != other.target:
            self.target = None
        if self.offset != other.offset:
            self.offset = None
        self.groups |= other.groups


def _layer_row(layers: Sequence[Layer], i: int, index_of: dict[str, int], group: int | None) -> Row:
    layer = layers[i]
    target = layer.kv_sharing_target
    role = "shares" if target is not None else "none" if layer.spec is None else "owns"
    j = index_of.get(target) if target is not None else None
    return Row(
        indices=[i],
        kind=layer.attention if layer.spec is not None else layer.kind or "none",
        spec=layer.spec,
        role=role,
        target=target,
        offset=None if j is None else i - j,
        groups=set() if group is None else {group},
    )


def _extends(run: Row, single: Row) -> bool:
    """Whether layer ``single`` continues ``run`` (same kind/spec/role, consistent target)."""
    if (run.kind, run.spec, run.role) != (single.kind, single.spec, single.role):
        return False
    if run.role != "shares":
        return True
    return (run.target is not None and run.target == single.target) or (
        run.offset is not None and run.offset == single.offset
    )


def fold_layers(
    layers: Sequence[Layer], group_of: Sequence[int | None], *, expand: bool = False
) -> list[Row]:
    """Rows for the layer table: one per layer with ``expand``, else folded. Linear time."""
    index_of: dict[str, int] = {}
    for i, layer in enumerate(layers):
        index_of.setdefault(layer.name, i)
    singles = [_layer_row(layers, i, index_of, group_of[i]) for i in range(len(layers))]
    if expand:
        return singles
    runs: list[Row] = []
    for row in singles:
        if runs and _extends(runs[-1], row):
            runs[-1].absorb(row)
        else:
            runs.append(row)
    out: list[Row] = []
    s = 0
    while s < len(runs):
        best_period, best_reps = 1, 1
        for period in range(1, MAX_PERIOD + 1):
            reps = _repetitions(runs, s, period)
            if reps >= 2 and reps * period > best_reps * best_period:
                best_period, best_reps = period, reps
        if best_reps == 1:
            out.append(runs[s])
            s += 1
            continue
        for j in range(best_period):
            row = runs[s + j]
            for k in range(1, best_reps):
                row.absorb(runs[s + k * best_period + j])
            out.append(row)
        s += best_period * best_reps
    return out


def _repetitions(runs: list[Row], s: int, period: int) -> int:
    """How many times the ``period`` runs starting at ``s`` repeat back to back."""
    if s + period > len(runs):
        return 0
    heads = [
        Row(list(r.indices), r.kind, r.spec, r.role, r.target, r.offset)
        for r in runs[s : s + period]
    ]
    reps = 1
    while s + (reps + 1) * period <= len(runs):
        block = runs[s + reps * period : s + (reps + 1) * period]
        if not all(h.compatible(b) for h, b in zip(heads, block, strict=True)):
            break
        for h, b in zip(heads, block, strict=True):
            h.absorb(b)
            h.indices = h.indices[: len(b.indices)]  # keep the length key comparable
        reps += 1
    return reps
