"""One engine's planned KV figures, each labelled with the engine, its release, and whether it
is exact or an estimate (the rows of ``kv-share plan --engine all``).

SGLang (:mod:`mmcli.kv.sglang`) and TensorRT-LLM (:mod:`mmcli.kv.trtllm`) return this; the
vLLM plan is turned into it for the side-by-side table. A figure is exact when it follows the
named release's arithmetic from exact inputs; it is an estimate when one input is not known
(a budget from ``--gpu`` rather than the engine's own measurement), and then says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

_Options = TypeVar("_Options", bound="PoolRequest")

#: The figures every engine reports, in table order, with their labels.
FIGURE_LABELS: dict[str, str] = {
    "bytes_per_token": "bytes per token",
    "allocated_bytes_per_token": "bytes allocated per token",
    "block_tokens": "tokens per block / page",
    "budget_bytes": "KV budget",
    "pool_tokens": "pool tokens",
    "swa_pool_tokens": "SWA pool tokens",
    "blocks": "blocks / pages",
    "max_concurrency": "max concurrency",
    "max_running_requests": "max running requests",
    "state_bytes_per_request": "state bytes per request",
    "state_slots": "state slots",
}


@dataclass(frozen=True)
class PoolRequest:
    """What every engine's pool is sized from, per rank (engine-neutral): the parallelism, the
    memory (the engine's own figure, or a GPU and the weights for an estimate), the cache
    dtype and the length. SGLang's and TensorRT-LLM's options extend it with their own."""

    tp: int = 1
    pp: int = 1
    #: The memory figure the engine logs (what ``--memory`` gives), in bytes.
    memory_bytes: int | None = None
    #: The GPU's total memory (CUDA's figure), its name, and the model's weights: an estimate.
    gpu_bytes: int | None = None
    gpu_name: str = ""
    weights_bytes: int | None = None
    kv_dtype: str = "auto"
    max_model_len: int | None = None

    @classmethod
    def from_request(cls: type[_Options], pool: PoolRequest, **own: Any) -> _Options:
        """These options for ``pool``, with the engine's own settings ``own``."""
        shared = {f.name: getattr(pool, f.name) for f in fields(PoolRequest)}
        return cls(**shared, **own)


@dataclass(frozen=True)
class Figure:
    """One number with where it comes from: exact, or an estimate with its reason."""

    value: int | float | None
    #: Why the value is an estimate; None: exact under the named release's rules.
    estimate: str | None = None


@dataclass
class EngineFigures:
    """What one engine release would allocate for one model, per GPU (per rank)."""

    engine: str
    release: str
    #: Each figure of :data:`FIGURE_LABELS` (missing: the engine has no such figure).
    figures: dict[str, Figure]
    #: What the budget is, in words ("--memory: the pool budget", "estimate from --gpu H100").
    budget_source: str
    #: What the engine keeps back before the pool (in words, with the release's figures).
    reserves: str
    #: The start-up lines the engine would print, as it prints them.
    log_lines: list[str] = field(default_factory=list)
    #: What was assumed or not applied, one sentence each.
    notes: list[str] = field(default_factory=list)
    #: Why the engine would not start with this budget (None: it starts).
    refusal: str | None = None
    #: What it keeps back, in a few words (the table's "kept back" row).
    kept_back: str = ""
    #: Why mmcli does not plan this model for this engine (``--engine all`` shows the column
    #: empty with this reason; a plan of that engine alone is refused with it). None: planned.
    not_planned: str | None = None

    @property
    def label(self) -> str:
        """``SGLang 0.5.4``-style name of the engine release."""
        names = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
        return f"{names.get(self.engine, self.engine)} {self.release}"

    def value(self, name: str) -> int | float | None:
        """A figure's value (None when absent or unknown)."""
        figure = self.figures.get(name)
        return None if figure is None else figure.value

    @property
    def estimates(self) -> list[str]:
        """Every reason a figure is an estimate, once each, in figure order."""
        reasons: list[str] = []
        for figure in self.figures.values():
            if figure.estimate is not None and figure.estimate not in reasons:
                reasons.append(figure.estimate)
        return reasons

    def to_json(self) -> dict[str, Any]:
        """Each figure names its engine and release, so a figure read alone says whose it is."""
        figures = {
            name: {
                "value": figure.value,
                "engine": self.engine,
                "release": self.release,
                "exact": figure.estimate is None,
                "estimate_reason": figure.estimate,
            }
            for name, figure in self.figures.items()
        }
        return {
            "engine": self.engine,
            "release": self.release,
            "figures": figures,
            "budget_source": self.budget_source,
            "reserves": self.reserves,
            "kept_back": self.kept_back,
            "log_lines": list(self.log_lines),
            "notes": list(self.notes),
            "refusal": self.refusal,
            "not_planned": self.not_planned,
        }


def max_concurrency(pool_tokens: int, max_model_len: int, unit: int) -> float:
    """Requests of ``max_model_len`` tokens the pool holds, each rounded up to whole ``unit``s
    (blocks or pages) as the engine allocates them."""
    per_request = -(-max_model_len // unit) * unit
    return pool_tokens / per_request
