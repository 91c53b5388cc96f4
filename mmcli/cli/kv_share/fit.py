"""Fit a table to the console's width: its wrapping columns narrowed, none below its minimum.

Rich narrows the widest wrapping columns until a table fits, then widens each back to its
``min_width``: the table comes out wider than the console, its lines running past the edge
in a pipe and cropped at a terminal (the last columns lost), as the layer table of a config
with layer names did (83 columns at 80). Here the widest wrapping columns are narrowed
first, to one common width and none below its ``min_width``, and capped there
(``max_width``): Rich has nothing left to narrow.
"""

from __future__ import annotations

from functools import partial

from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Column, Table


def fit_columns(table: Table, console: Console) -> Table:
    """Cap ``table``'s wrapping columns so that it fits ``console.width``; ``table``.

    Nothing changes when the table fits; when no width fits, each wrapping column is
    capped at its minimum, the narrowest the table gets.
    """
    columns = table.columns
    measured = [_measure(column, table, console) for column in columns]
    wraps = [column.width is None and not column.no_wrap for column in columns]
    room = console.width - _chrome(table)
    room -= sum(m.maximum for m, wrap in zip(measured, wraps, strict=True) if not wrap)
    wrapping = [
        (column, m.maximum, m.minimum)
        for column, m, wrap in zip(columns, measured, wraps, strict=True)
        if wrap
    ]
    if not wrapping or sum(width for _, width, _ in wrapping) <= room:
        return table

    def total(level: int) -> int:
        return sum(max(floor, min(width, level)) for _, width, floor in wrapping)

    low, high = 0, max(width for _, width, _ in wrapping)  # total(low) may exceed room
    while low < high:  # the widest level at which the wrapping columns fit
        mid = (low + high + 1) // 2
        low, high = (mid, high) if total(mid) <= room else (low, mid - 1)
    for column, width, floor in wrapping:
        column.max_width = max(floor, min(width, low))
    return table


def _measure(column: Column, table: Table, console: Console) -> Measurement:
    """The column's width unwrapped (its widest cell, header included) and the narrowest it
    wraps to: its ``min_width``, else its longest word. Padding excluded."""
    cells = [*([column.header] if table.show_header else []), *column.cells]
    sizes = list(map(partial(_measure_cell, console), cells)) or [Measurement(1, 1)]
    widest = max(size.maximum for size in sizes)
    if column.min_width is not None:
        return Measurement(min(column.min_width, widest), max(column.min_width, widest))
    return Measurement(max(size.minimum for size in sizes), widest)


def _measure_cell(console: Console, cell: RenderableType) -> Measurement:
    """A cell's longest word and its width on one line. A string without markup, emoji
    codes, tabs or line breaks (most cells: a table of 2,000 layers has 14,000) is measured
    by its characters."""
    if isinstance(cell, str) and not any(map(cell.__contains__, "[:\t\n")):
        return Measurement(max(map(cell_len, cell.split()), default=0), cell_len(cell))
    return Measurement.get(console, console.options, cell)


def _chrome(table: Table) -> int:
    """The columns the table draws around its cells: borders and padding."""
    n = len(table.columns)
    borders = (2 if table.box and table.show_edge else 0) + (n - 1 if table.box else 0)
    _, right, _, left = table.padding
    padding = n * (left + right)
    if not table.pad_edge:
        padding -= left + right
    return borders + padding
