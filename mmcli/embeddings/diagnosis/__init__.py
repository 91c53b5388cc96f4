"""Every problem with a model's encoder outputs, as findings.

:class:`Diagnosis` (:mod:`.state`) holds the options, the per-item figures and the findings;
the judgments are functions that return findings: per item as it arrives (:mod:`.per_item`),
the scatter/gather round trip (:mod:`.roundtrip`), and across items at the end
(:mod:`.across_items`).
"""

from __future__ import annotations

from mmcli.embeddings.diagnosis.roundtrip import Clock
from mmcli.embeddings.diagnosis.state import Diagnosis, ItemStats, Options

__all__ = ["Clock", "Diagnosis", "ItemStats", "Options"]
