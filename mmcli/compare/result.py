"""The result of a comparison: per item pair, per file pair, and the whole run (with to_json)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mmcli._version import __version__
from mmcli.compare.metrics import ItemMetrics
from mmcli.compare.pairing import HOW
from mmcli.errors import EXIT_FINDINGS, EXIT_OK
from mmcli.findings import Finding, count


@dataclass
class ItemReport:
    """One item pair: shapes, dtypes, and the metrics when the shapes agree."""

    index: int
    ref_shape: tuple[int, ...]
    cand_shape: tuple[int, ...]
    ref_dtype: str
    cand_dtype: str
    metrics: ItemMetrics | None = None
    failed: bool = False

    def to_json(self) -> dict[str, Any]:
        """The item's shapes, dtypes, tolerance, status and metrics (null when not measured)."""
        return {
            "index": self.index,
            "ref_shape": list(self.ref_shape),
            "cand_shape": list(self.cand_shape),
            "ref_dtype": self.ref_dtype,
            "cand_dtype": self.cand_dtype,
            "status": "failed" if self.failed else "ok",
            "tolerance": None if self.metrics is None else self.metrics.tolerance.to_json(),
            "metrics": None if self.metrics is None else self.metrics.to_json(),
        }


@dataclass
class PairReport:
    """One REF file against one CAND file."""

    ref: str
    cand: str
    how: str
    ref_items: int = 0
    cand_items: int = 0
    items: list[ItemReport] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether any error finding was made."""
        return count(self.findings, "error") > 0

    def to_json(self) -> dict[str, Any]:
        """The pair's files, how they were paired, items and findings."""
        return {
            "ref": self.ref,
            "cand": self.cand,
            "paired_by": self.how,
            "status": "failed" if self.failed else "ok",
            "num_items": {"ref": self.ref_items, "cand": self.cand_items},
            "items": [i.to_json() for i in self.items],
            "findings": [f.to_json(location="item") for f in self.findings],
        }


@dataclass
class CompareReport:
    """A whole comparison: the profile, every pair, and what could not be paired."""

    ref: str
    cand: str
    profile: str
    device: str
    how: str
    pairs: list[PairReport] = field(default_factory=list)
    #: Findings about the run rather than one pair (``compare-unpaired``).
    findings: list[Finding] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def all_findings(self) -> list[Finding]:
        """The run's findings, then every pair's."""
        return [*self.findings, *(f for p in self.pairs for f in p.findings)]

    @property
    def exit_code(self) -> int:
        """0 when every pair is within tolerance, 1 when anything differs."""
        return EXIT_FINDINGS if count(self.all_findings(), "error") else EXIT_OK

    def summary(self) -> dict[str, int]:
        """Pairs, items compared, and findings by severity."""
        found = self.all_findings()
        return {
            "pairs": len(self.pairs),
            "items": sum(len(p.items) for p in self.pairs),
            "failed_items": sum(1 for p in self.pairs for i in p.items if i.failed),
            "errors": count(found, "error"),
            "warnings": count(found, "warning"),
            "infos": count(found, "info"),
        }

    def to_json(self) -> dict[str, Any]:
        """The one JSON document of the run."""
        return {
            "mmcli_version": __version__,
            "ref": self.ref,
            "cand": self.cand,
            "profile": self.profile,
            "device": self.device,
            "paired_by": self.how,
            "pairing": HOW.get(self.how, self.how),
            "pairs": [p.to_json() for p in self.pairs],
            "findings": [f.to_json(location="item") for f in self.findings],
            "skipped": self.skipped,
            "summary": self.summary(),
            "exit_code": self.exit_code,
        }
