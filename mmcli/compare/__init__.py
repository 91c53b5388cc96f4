"""``mmcli compare``: is CAND numerically REF? Pairing, alignment, metrics, tolerance, diagnosis.

:func:`compare_dumps` returns a :class:`CompareReport`; the CLI (``mmcli.cli.compare``) renders
it. See ``docs/compare.md``.
"""

from __future__ import annotations

from mmcli.compare.result import CompareReport, ItemReport, PairReport
from mmcli.compare.run import compare_dumps

__all__ = ["CompareReport", "ItemReport", "PairReport", "compare_dumps"]
