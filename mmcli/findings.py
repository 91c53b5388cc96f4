"""The finding record shared by every check: a stable code, a severity, numbers and a hint."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Finding:
    """One problem found in the input, located by item index (or layer name) when it has one."""

    code: str
    severity: Severity
    message: str
    hint: str | None = None
    item: int | None = None
    layer: str | None = None

    def to_json(self, *, location: Literal["item", "layer"] = "item") -> dict[str, Any]:
        """The SPEC's JSON shape: ``item`` for embeddings, ``layer`` for KV sharing."""
        # Read field by field: asdict's deep copy costs seconds on a million-layer map.
        return {
            "code": self.code,
            "severity": self.severity,
            location: self.item if location == "item" else self.layer,
            "message": self.message,
            "hint": self.hint,
        }


def count(findings: Iterable[Finding], severity: Severity) -> int:
    """How many findings have the given severity."""
    return sum(1 for f in findings if f.severity == severity)
