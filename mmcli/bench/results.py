"""What a bench run found: one timed case per op × implementation × workload, their summary
statistics, and the JSON document ``mmcli bench --format json`` prints."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mmcli.bench.timing import Timing
from mmcli.bench.workloads import OPS, Workload
from mmcli.dtypes import name_of
from mmcli.errors import EXIT_FINDINGS

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
class BenchCase:
    """One op × implementation × workload, timed, with the copy ceiling of the same run.

    ``gbps`` counts the useful bytes (read the embedding rows, write the output);
    ``copy_fraction`` is that bandwidth as a share of a same-size copy's.
    """

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

    @classmethod
    def measured(
        cls,
        op: str,
        impl: str,
        w: Workload,
        timing: Timing,
        copy: Timing,
        host_syncs: int | None,
        reference: Timing | None = None,
    ) -> BenchCase:
        """The case of ``timing``, against the ``copy`` (and ``reference``) of the same run."""
        size = w.embeds.element_size() * w.hidden
        out_rows = w.num_placeholders if op == "scatter" else w.num_embeds
        useful = (w.num_embeds + out_rows) * size  # read the embedding rows, write the output
        copy_bytes = 2 * out_rows * size
        gbps = useful / timing.median / 1e9 if timing.median > 0 else 0.0
        copy_gbps = copy_bytes / copy.median / 1e9 if copy.median > 0 else 0.0
        speedup = (
            reference.median / timing.median
            if reference is not None and timing.median > 0
            else None
        )
        return cls(
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
            speedup_vs_reference=speedup,
            host_syncs=host_syncs,
            copy_us=copy.median * 1e6,
            item=w.item,
        )

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        if self.item is None:
            del doc["item"]
        for key, digits in _ROUNDING.items():
            if doc[key] is not None:
                doc[key] = round(doc[key], digits)
        return doc


@dataclass
class BenchResult:
    """Every timed case, plus warnings (noisy timings) and failures (wrong results)."""

    device: str
    torch_version: str
    threads: int | None = None
    cases: list[BenchCase] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 when an implementation disagreed with the reference, else 0."""
        return EXIT_FINDINGS if self.failures else 0

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
        """The document ``mmcli bench --format json`` prints."""
        return {
            "device": self.device,
            "torch_version": self.torch_version,
            "threads": self.threads,
            "cases": [c.to_json() for c in self.cases],
            "summary": self.summary(),
            "warnings": list(self.warnings),
            "failures": list(self.failures),
            "exit_code": self.exit_code,
        }


def _geomean(values: Sequence[float]) -> float | None:
    if not values or any(v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))
