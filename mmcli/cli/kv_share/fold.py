"""Fold a long layer list into few rows: runs of like layers, and repeating patterns of runs.

Linear in the number of layers and cheap on a million of them: the passes over every layer
are C-level (``map``, ``zip``, ``itertools`` over parallel lists), and Python objects are
made per distinct kind of layer, per run and per row, never per layer.

How rows are made: a *run* is a stretch of consecutive layers of one class (attention kind,
spec and role) that, when they share a cache, all share the same target or all the same
distance back. Then, from each run on, the longest repetition of a pattern of up to
:data:`MAX_PERIOD` runs (each run matching in class and length, and in target or distance)
folds into one row per run of the pattern.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, count, islice, repeat
from operator import add, attrgetter, eq, gt, is_, mul, ne, or_, sub
from typing import cast

from mmcli.kv import KVCacheSpec, Layer, MambaSpec

#: The longest repeating pattern of runs that is folded (Gemma-like 4 sliding + 1 full is 2).
MAX_PERIOD = 4

_Spec = KVCacheSpec | MambaSpec | None
#: A layer's class: (kind, spec, role).
_Class = tuple[str, _Spec, str]


@dataclass(slots=True)
class Row:
    """Layers shown as one table row: same attention, spec and sharing pattern.

    The layers are ``len(starts)`` runs of ``run_length`` consecutive layers, the runs
    beginning at ``starts`` (ascending).
    """

    starts: list[int]
    run_length: int
    kind: str
    spec: _Spec
    role: str  # "owns", "shares" or "none"
    #: The one target every layer of the row shares with (a layer name), if there is one.
    target: str | None = None
    #: Otherwise the one distance back (layer i shares with i − offset) they all share with.
    offset: int | None = None
    groups: set[int] = field(default_factory=set)

    @property
    def size(self) -> int:
        """How many layers the row holds."""
        return len(self.starts) * self.run_length

    @property
    def first(self) -> int:
        """The row's first layer index."""
        return self.starts[0]

    @property
    def indices(self) -> list[int]:
        """The row's layer indices, ascending."""
        if self.run_length == 1:
            return list(self.starts)
        ends = map(add, self.starts, repeat(self.run_length))
        return list(chain.from_iterable(map(range, self.starts, ends)))


def first_index(names: Sequence[str], among: Collection[str] | None = None) -> dict[str, int]:
    """Each layer name's first index (a repeated name keeps its first); only of the names
    in ``among`` when given (a small dict is much quicker to make than a million-entry one).
    """
    n = len(names)
    if among is None:
        return dict(zip(reversed(names), range(n - 1, -1, -1), strict=True))
    found = list(compress(range(n), map(among.__contains__, names)))
    return dict(zip(map(names.__getitem__, reversed(found)), reversed(found), strict=True))


def _classes(
    layers: Sequence[Layer], specs: list[_Spec], targets: list[str | None], shares: bool
) -> tuple[list[int], list[_Class]]:
    """Each layer's class number, and the classes: few distinct ones, found at C level."""
    # A code per layer from its spec's identity (hashing a spec runs Python code) and, when
    # some layer shares, whether it owns: 2 × spec slot + 1 for an owner.
    ids = list(map(id, specs))
    spec_of = dict(zip(ids, specs, strict=True))
    slot = {key: k for k, key in enumerate(spec_of)}
    codes = list(map(slot.__getitem__, ids))
    if shares:
        codes = list(map(add, map(add, codes, codes), map(is_, targets, repeat(None))))
    slot_spec = list(spec_of.values())
    # A layer without a cache takes its kind from the config: then the kind joins the code.
    kinds = list(map(attrgetter("kind"), layers)) if id(None) in slot else None

    def raw() -> Iterator[int | tuple[int, str]]:
        return iter(codes) if kinds is None else zip(codes, kinds, strict=True)

    classes: list[_Class] = []
    number: dict[int | tuple[int, str], int] = {}
    for key in dict.fromkeys(raw()):
        code, kind = key if isinstance(key, tuple) else (key, "")
        owns = not shares or bool(code & 1)
        spec = slot_spec[code >> 1 if shares else code]
        cls = (
            (kind or "none") if spec is None else spec.attention,
            spec,
            ("none" if spec is None else "owns") if owns else "shares",
        )
        if cls not in classes:  # equal specs as distinct objects: one class
            classes.append(cls)
        number[key] = classes.index(cls)
    if kinds is None and all(number[key] == key for key in number):
        return codes, classes  # the codes already are the class numbers
    return list(map(number.__getitem__, raw())), classes


@dataclass
class Folded:
    """Folded rows: the first ones (up to a limit), how many there are, and the specs."""

    rows: list[Row]
    count: int
    #: Every distinct spec (by equality): each layer's spec equals one of these.
    specs: list[_Spec]
    #: The first index of every name a layer shares with (and maybe of others).
    index_of: dict[str, int]


def fold_layers(
    layers: Sequence[Layer],
    group_of: Sequence[int | None],
    *,
    expand: bool = False,
    index_of: dict[str, int] | None = None,
) -> list[Row]:
    """Rows for the layer table: one per layer with ``expand``, else folded. Linear time.

    ``index_of`` is :func:`first_index` of the layer names (at least of every target), when
    the caller has it.
    """
    if not expand:
        return fold_rows(layers, group_of, index_of=index_of).rows
    n = len(layers)
    cols = _columns(layers, index_of)
    offsets = cols.offs or repeat(-2 * n, n)
    return [
        Row([i], 1, *cols.classes[c], t, o if o > -n else None, set() if g is None else {g})
        for i, c, t, o, g in zip(range(n), cols.cls, cols.targets, offsets, group_of, strict=True)
    ]


def fold_rows(
    layers: Sequence[Layer],
    group_of: Sequence[int | None],
    *,
    index_of: dict[str, int] | None = None,
    limit: int | None = None,
) -> Folded:
    """The folded rows, only the first ``limit`` made (a table shows no more), and their
    number. Linear time; ``index_of`` as for :func:`fold_layers`."""
    if not layers:
        return Folded([], 0, [], {})
    cols = _columns(layers, index_of)
    rows, count = _Folder(_runs(cols), cols.classes, len(layers)).fold(limit)
    for row in rows:
        row.groups = _groups(row, group_of)
    return Folded(rows, count, [c[1] for c in cols.classes], cols.index_of)


def _groups(row: Row, group_of: Sequence[int | None]) -> set[int]:
    """The groups of a row's layers, from slices of ``group_of``."""
    a, length, reps = row.starts[0], row.run_length, len(row.starts)
    parts: Iterable[Sequence[int | None]]
    if reps == 1:
        parts = [group_of[a : a + length]]
    elif reps < length:
        parts = (group_of[b : b + length] for b in row.starts)
    else:
        # The runs of a row repeat a pattern: they start a fixed distance apart.
        step, end = row.starts[1] - a, row.starts[-1] + length
        parts = (group_of[a + t : end : step] for t in range(length))
    groups = set(chain.from_iterable(parts))
    groups.discard(None)
    return cast("set[int]", groups)


@dataclass
class _Columns:
    """Per-layer columns, each made in one C-level pass."""

    cls: list[int]
    classes: list[_Class]
    targets: list[str | None]
    #: Each layer's distance back to its target (empty when no layer shares). A layer that
    #: shares nothing, or whose target is not a layer, gets i − 2n: below −n, so it is told
    #: apart from every real distance (above −n), and unlike any other layer's.
    offs: list[int]
    index_of: dict[str, int]


def _columns(layers: Sequence[Layer], index_of: dict[str, int] | None) -> _Columns:
    n = len(layers)
    specs: list[_Spec] = list(map(attrgetter("spec"), layers))
    targets: list[str | None] = list(map(attrgetter("kv_sharing_target"), layers))
    shares = targets.count(None) < n
    cls, classes = _classes(layers, specs, targets, shares)
    offs: list[int] = []
    if index_of is None:
        wanted = set(targets) if shares else set()
        wanted.discard(None)
        names = list(map(attrgetter("name"), layers)) if wanted else []
        index_of = first_index(names, cast("set[str]", wanted))
    if shares:
        position = cast("Callable[[str | None, int], int]", index_of.get)  # None: not a name
        offs = list(map(sub, range(n), map(position, targets, repeat(2 * n))))
    return _Columns(cls, classes, targets, offs, index_of)


@dataclass
class _Runs:
    """Runs of like layers as parallel lists, one entry per run."""

    starts: list[int]
    lengths: list[int]
    classes: list[int]
    #: The run's common target, or (none in common) its first layer's index: an int, which
    #: never equals a name nor another run's. None when no layer shares.
    targets: list[str | int | None] | None
    #: The run's common distance back, or (none in common) first index − 2n, as above.
    offsets: list[int] | None


def _runs(cols: _Columns) -> _Runs:
    """Split the layers into runs (see the module docstring)."""
    cls, n = cols.cls, len(cols.cls)
    changes = map(ne, islice(cls, 1, None), cls)
    if not cols.offs:  # nothing shares: a run is a stretch of one class
        starts = [0, *compress(range(1, n), changes)]
        if len(starts) == n:
            return _Runs(starts, [1] * n, cls, None, None)
        lengths = list(map(sub, [*starts[1:], n], starts))
        return _Runs(starts, lengths, list(map(cls.__getitem__, starts)), None, None)
    targets, offs = cols.targets, cols.offs
    # Pair k is layers k and k + 1: same target, same distance back. Never both: the same
    # target is a different distance back from the next layer, and the reverse.
    same_t = list(map(eq, islice(targets, 1, None), targets))
    same_o = map(eq, islice(offs, 1, None), offs)
    # A stretch breaks where the class changes, or where neither target nor distance holds.
    starts = [0, *compress(range(1, n), map(or_, changes, map(eq, same_t, same_o)))]
    if len(starts) == n:  # every layer a run of its own
        return _Runs(starts, [1] * n, cls, list(targets), offs)
    lengths = list(map(sub, [*starts[1:], n], starts))
    run_targets: list[str | int | None] = list(map(targets.__getitem__, starts))
    run_offsets = list(map(offs.__getitem__, starts))
    # Each pair inside a stretch keeps the target or the distance (a layer that shares
    # nothing: its target, None). The stretch is a run when all keep the same one.
    mixed = False
    for r in compress(range(len(starts)), map(gt, lengths, repeat(1))):
        a = starts[r]
        keeps_target = same_t[a]
        if keeps_target:
            run_offsets[r] = a - 2 * n
        else:
            run_targets[r] = a
        mixed = mixed or (not keeps_target) in same_t[a : a + lengths[r] - 1]
    if mixed:
        return _split_mixed(cls, targets, offs, same_t, starts)
    return _Runs(starts, lengths, list(map(cls.__getitem__, starts)), run_targets, run_offsets)


def _split_mixed(
    cls: list[int],
    targets: list[str | None],
    offs: list[int],
    same_t: list[bool],
    starts: list[int],
) -> _Runs:
    """Runs layer by layer: some stretch keeps the target in one place and the distance in
    another, and a run keeps one of them from its start (rare)."""
    n = len(cls)
    out = _Runs([], [], [], [], [])
    assert out.targets is not None and out.offsets is not None
    for a, b in zip(starts, [*starts[1:], n], strict=True):
        i = a
        while i < b:
            # Inside a stretch, a pair that does not keep the target keeps the distance.
            keeps_t = keeps_o = True
            j = i + 1
            while j < b and (keeps_t and same_t[j - 1] or keeps_o and not same_t[j - 1]):
                keeps_t, keeps_o = keeps_t and same_t[j - 1], keeps_o and not same_t[j - 1]
                j += 1
            out.starts.append(i)
            out.lengths.append(j - i)
            out.classes.append(cls[i])
            out.targets.append(targets[i] if keeps_t else i)
            out.offsets.append(offs[i] if keeps_o else i - 2 * n)
            i = j
    return out


class _Folder:
    """Folds runs into rows: from each run on, the longest-covering repetition of a pattern."""

    def __init__(self, runs: _Runs, classes: list[_Class], n: int) -> None:
        self.runs, self.classes, self.n = runs, classes, n
        # Runs match on class and length: one int key per run.
        lengths = runs.lengths
        if lengths.count(lengths[0]) == len(lengths):
            self.keys = runs.classes
        else:
            self.keys = list(map(add, map(mul, runs.classes, repeat(n + 1)), lengths))
        self.shares = [c[2] == "shares" for c in classes]
        self._breaks: dict[tuple[str, int, int], list[int]] = {}

    def _steps(self, what: str, r: int, p: int) -> int:
        """How many of runs r + p, r + 2p, … in a row keep run r's key ("k"), target ("t")
        or distance back ("o"). Each chain's breaks are found once, at C level."""
        c = 0 if what == "k" else r % p
        breaks = self._breaks.get((what, p, c))
        if breaks is None:
            values = {"k": self.keys, "t": self.runs.targets, "o": self.runs.offsets}[what]
            assert values is not None
            if what != "k":
                values = values[c::p]
            shift = p if what == "k" else 1
            # Where a value differs from the one ``shift`` on, and a last stop never reached.
            changes = map(ne, values, islice(values, shift, None))
            breaks = [*compress(count(), changes), len(values) - shift]
            self._breaks[what, p, c] = breaks
        if what == "k":
            return (breaks[bisect_left(breaks, r)] - r) // p
        u = r // p
        return breaks[bisect_left(breaks, u)] - u

    def _repetitions(self, s: int, p: int) -> int:
        """How many times the ``p`` runs from run ``s`` repeat back to back."""
        steps = self._steps("k", s, p)
        for r in range(s, s + p):
            if steps and self.shares[self.runs.classes[r]]:
                steps = min(steps, max(self._steps("t", r, p), self._steps("o", r, p)))
        return steps + 1

    def fold(self, limit: int | None) -> tuple[list[Row], int]:
        """The first ``limit`` rows (all with None), and how many rows there are."""
        keys, count_runs = self.keys, len(self.keys)
        periods = range(1, MAX_PERIOD + 1)
        rows: list[Row] = []
        count_rows = s = 0
        while s < count_runs:
            best_period = best_reps = 1
            key = keys[s]
            for period in periods:
                block = s + period
                if block + period > count_runs:
                    break
                if keys[block] != key or keys[s:block] != keys[block : block + period]:
                    continue
                reps = self._repetitions(s, period)
                if reps >= 2 and reps * period > best_reps * best_period:
                    best_period, best_reps = period, reps
            if limit is None or count_rows < limit:
                rows.extend(self._row(s + j, best_period, best_reps) for j in range(best_period))
            count_rows += best_period
            s += best_period * best_reps
        return rows[:limit], count_rows

    def _row(self, r: int, p: int, reps: int) -> Row:
        """The row of runs r, r + p, …: ``reps`` of them."""
        runs, n = self.runs, self.n
        kind, spec, role = self.classes[runs.classes[r]]
        target = offset = None
        if role == "shares":
            assert runs.targets is not None and runs.offsets is not None
            t, o = runs.targets[r], runs.offsets[r]
            if isinstance(t, str) and (reps == 1 or self._steps("t", r, p) >= reps - 1):
                target = t
            if o > -n and (reps == 1 or self._steps("o", r, p) >= reps - 1):
                offset = o
        starts = runs.starts[r : r + reps * p : p]
        return Row(starts, runs.lengths[r], kind, spec, role, target, offset)
