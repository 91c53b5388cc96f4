"""``--sweep``: plan a model over a range of max_model_len or KV memory, as series.

``--sweep max-model-len=4K..128K`` plans each length at the given memory; ``--sweep
memory=8GiB..80GiB`` plans each memory at the given length. A range is ``START..STOP``, then
optionally ``:N`` (N evenly spaced points, ends included) or ``:xF`` (geometric: each point F
times the last, from START; STOP is always the last point). Without one, lengths double
(``:x2``) and memories take 8 even steps. Lengths take vLLM's suffixes: ``k``/``m`` are powers
of 1000 and ``K``/``M`` powers of 1024 (``128K`` = 131,072, ``128k`` = 128,000).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Final

from mmcli.errors import EXIT_FINDINGS, EXIT_OK, InputError
from mmcli.findings import Finding
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import PlanOptions, parse_size
from mmcli.kv.result import ENGINE_CODES, KVPlan, SidePlan
from mmcli.kv.reuse import across_points

PARAMETERS: Final = ("max-model-len", "memory")
#: At most this many points: each is a full plan.
MAX_POINTS: Final = 64
_HINT = (
    "write NAME=START..STOP[:N|:xF], e.g. max-model-len=4K..128K (doubling), "
    "max-model-len=1024..32768:8 or memory=8GiB..80GiB:x2"
)
_LENGTH = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*$")
_LENGTH_UNITS: Final = {
    "": 1,
    "k": 1000,
    "m": 10**6,
    "g": 10**9,
    "K": 1024,
    "M": 2**20,
    "G": 2**30,
}


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep: the parameter and the values, in order."""

    parameter: str
    values: tuple[int, ...]


def parse_length(text: str) -> int:
    """``32768``, ``32K`` (32,768) or ``32k`` (32,000), as vLLM reads ``--max-model-len``."""
    match = _LENGTH.match(text)
    if match is None:
        raise InputError(
            f"--sweep: cannot read {text!r} as a length",
            hint="a token count: 32768, 32K (= 32,768) or 32k (= 32,000)",
        )
    value = int(float(match.group(1)) * _LENGTH_UNITS[match.group(2)])
    if value <= 0:
        raise InputError(f"--sweep: length {text!r} is not positive", hint=_HINT)
    return value


def parse_sweep(text: str) -> SweepSpec:
    """``max-model-len=4K..128K``, ``memory=8GiB..80GiB:8``, ``max-model-len=1K..64K:x4``."""
    name, sep, rest = text.partition("=")
    name = name.strip().lower().replace("_", "-")
    if not sep or name not in PARAMETERS:
        raise InputError(f"--sweep: cannot read {text!r}", hint=_HINT)
    span, _, steps = rest.partition(":")
    start_text, dots, stop_text = span.partition("..")
    if not dots:
        raise InputError(f"--sweep: {text!r} has no START..STOP range", hint=_HINT)
    read = parse_length if name == "max-model-len" else parse_size
    start, stop = read(start_text), read(stop_text)
    if stop < start:
        raise InputError(f"--sweep: {text!r} ends below its start", hint=_HINT)
    default = "x2" if name == "max-model-len" else "8"
    return SweepSpec(name, _values(start, stop, steps.strip() or default, text))


def _values(start: int, stop: int, steps: str, text: str) -> tuple[int, ...]:
    if steps.lower().startswith("x"):
        try:
            factor = float(steps[1:])
        except ValueError:
            raise InputError(f"--sweep: cannot read the factor in {text!r}", hint=_HINT) from None
        if not math.isfinite(factor):  # NaN compares false with everything: no points
            raise InputError(f"--sweep: the factor in {text!r} is not a finite number", hint=_HINT)
        if factor <= 1:
            raise InputError(f"--sweep: the factor in {text!r} must be above 1", hint=_HINT)
        values = [start]
        while values[-1] * factor <= stop * (1 + 1e-9) and len(values) <= MAX_POINTS:
            values.append(round(values[-1] * factor))
        if values[-1] < stop:  # the range's end is always a point
            values.append(stop)
    else:
        if not (steps.isascii() and steps.isdigit()) or int(steps) < 1:
            raise InputError(f"--sweep: cannot read the step count in {text!r}", hint=_HINT)
        count = int(steps)
        if count > MAX_POINTS:  # checked before building the points
            raise InputError(
                f"--sweep: {text!r} asks for {count:,} points, more than {MAX_POINTS}",
                hint="use fewer steps or a larger factor",
            )
        if count == 1 or start == stop:
            values = [start]
        else:
            values = [round(start + (stop - start) * i / (count - 1)) for i in range(count)]
    unique = tuple(dict.fromkeys(values))
    if len(unique) > MAX_POINTS:
        raise InputError(
            f"--sweep: {text!r} gives {len(unique)} points, more than {MAX_POINTS}",
            hint="use fewer steps or a larger factor",
        )
    return unique


@dataclass(frozen=True)
class SidePoint:
    """One side's figures at one swept value (None: not computed)."""

    max_concurrency: float | None
    kv_tokens: int | None
    num_blocks: int | None
    #: Whether one request at max_model_len passes the engine's start-up check.
    fits: bool

    @classmethod
    def of(cls, side: SidePlan | None) -> SidePoint | None:
        if side is None:
            return None
        return cls(
            side.max_concurrency,
            side.max_tokens,
            side.num_blocks,
            side.largest_fitting_max_model_len is None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "max_concurrency": self.max_concurrency,
            "kv_tokens": self.kv_tokens,
            "num_blocks": self.num_blocks,
            "fits": self.fits,
        }


@dataclass(frozen=True)
class SweepPoint:
    value: int
    with_sharing: SidePoint | None
    without_sharing: SidePoint | None


@dataclass(frozen=True)
class Sweep:
    """A swept plan: one point per value, with and without sharing."""

    model: str
    parameter: str
    points: tuple[SweepPoint, ...]
    #: The fixed figure of the other parameter (max_model_len or memory bytes).
    fixed: int
    #: Which side the engine runs ("with_sharing" or "without_sharing").
    engine_side: str
    #: Whether sharing changes anything (False: both series are the same).
    shares: bool
    #: The errors of the model and its map (the same at every point; a point whose request
    #: does not fit is its own ``fits``, not one of these).
    errors: tuple[Finding, ...] = ()

    @property
    def none_fits(self) -> bool:
        """Whether no point's engine side passes the start-up check."""
        sides = [getattr(p, self.engine_side) for p in self.points]
        planned = [s for s in sides if s is not None]  # a side a broken map leaves unplanned
        return bool(planned) and not any(s.fits for s in planned)

    @property
    def exit_code(self) -> int:
        """1 when the map has errors or the engine would start at no point, else 0."""
        return EXIT_FINDINGS if self.errors or self.none_fits else EXIT_OK

    @property
    def unit(self) -> str:
        return "tokens" if self.parameter == "max-model-len" else "bytes"

    def series(self, side: str, figure: str) -> list[float | None]:
        """One series: ``side`` "with_sharing"/"without_sharing", ``figure`` a SidePoint field."""
        out: list[float | None] = []
        for point in self.points:
            got = getattr(point, side)
            out.append(None if got is None else getattr(got, figure))
        return out

    def to_json(self) -> dict[str, Any]:
        fixed = "memory_bytes" if self.parameter == "max-model-len" else "max_model_len"
        return {
            "model": self.model,
            "parameter": self.parameter,
            "unit": self.unit,
            fixed: self.fixed,
            "engine_side": self.engine_side,
            "shares": self.shares,
            "values": [p.value for p in self.points],
            "errors": [f.to_json(location="layer") for f in self.errors],
            "none_fits": self.none_fits,
            "series": {
                side: {
                    figure: self.series(side, figure)
                    for figure in ("max_concurrency", "kv_tokens", "num_blocks", "fits")
                }
                for side in ("with_sharing", "without_sharing")
            },
        }


def run_sweep(
    config: ModelConfig,
    options: PlanOptions,
    spec: SweepSpec,
    extra_findings: list[Finding] | None = None,
) -> Sweep:
    """Plan ``config`` at each value of ``spec`` (the rest of ``options`` fixed);
    ``extra_findings`` (those of a ``--map``) join each plan's, as in a plain plan."""
    from mmcli.kv.engine.max_len import model_max_len
    from mmcli.kv.plan import plan_kv_cache

    if spec.parameter == "max-model-len":
        if options.memory_bytes is None and options.num_gpu_blocks_override is None:
            raise InputError(
                "--sweep max-model-len needs the KV memory",
                hint="pass --memory (or --gpu and --weights for an estimate)",
            )
        fixed = options.memory_bytes or 0
        # The engine refuses a length above the model's maximum: refuse the sweep's end
        # before planning any point (named as the sweep's, not as --max-model-len).
        top = replace(options, max_model_len=max(spec.values))
        try:
            model_max_len(
                config, top.rules, top.max_model_len, allow_long=top.allow_long_max_model_len
            )
        except InputError as error:
            raise InputError(
                str(error).replace("--max-model-len", "--sweep max-model-len up to", 1),
                hint="end the sweep at the model's maximum, or pass --allow-long-max-model-len "
                "(vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1) for a what-if beyond it",
            ) from None
    else:
        length = model_max_len(
            config,
            options.rules,
            options.max_model_len,
            allow_long=options.allow_long_max_model_len,
        )
        if length is None:
            raise InputError(
                "--sweep memory needs a max_model_len",
                hint="pass --max-model-len or set max_position_embeddings in the config",
            )
        options = replace(options, max_model_len=length)
        fixed = length
    points = []
    plan: KVPlan | None = None
    with across_points():  # the layer work (ranks, map, groups) done once, not per point
        for value in spec.values:
            if spec.parameter == "max-model-len":
                changed = replace(options, max_model_len=value)
            else:
                changed = replace(options, memory_bytes=value)
            plan = plan_kv_cache(config, changed, extra_findings=extra_findings)
            with_side, without = plan.with_sharing, plan.without_sharing
            points.append(SweepPoint(value, SidePoint.of(with_side), SidePoint.of(without)))
    assert plan is not None  # a spec has at least one value
    shares = any(p.with_sharing != p.without_sharing for p in points) and any(
        p.with_sharing is not None for p in points
    )
    errors = tuple(f for f in plan.findings if f.severity == "error" and f.code not in ENGINE_CODES)
    return Sweep(
        config.name, spec.parameter, tuple(points), fixed, plan.engine_side, shares, errors
    )
