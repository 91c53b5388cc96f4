"""The ``--gpu`` estimate as a panel: every term, under a title that says it is one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from mmcli.kv import Estimate


def estimate_panel(est: Estimate) -> Group:
    """Every term of the estimate, right-aligned, under a title that says it is one."""
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("")
    table.add_column("", justify="right")
    for label, value in est.terms():
        shown = "not estimated" if value is None else f"{abs(value) / 2**30:,.2f} GiB"
        table.add_row(label, shown)  # the label carries the sign
    panel = Panel(table, title="KV memory per GPU: an ESTIMATE", expand=False)
    notes = [Text(f"note: {note}") for note in est.notes]
    return Group(panel, Text(f"weights: {est.weights_source}"), *notes)
