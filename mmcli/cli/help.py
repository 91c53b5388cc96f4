"""``--help`` that reads at 80 columns: options grouped in panels, no name cut short.

Typer's own help lays every option out as a row of columns (long names, short names, type,
description); at 80 columns a long name such as
``--chunked-local-attn-hybrid / --no-chunked-local-attn-hybrid`` leaves the description a
column a dozen characters wide, and Rich cuts the names themselves to ``--kv-cache-dtyp…``.
:class:`PanelledCommand` draws the same panels (``rich_help_panel=`` of each option) with two
layouts, chosen once per command so that every panel of a page looks alike:

* a two-column table (names, then the description) when the longest names leave the
  description at least :data:`MIN_DESCRIPTION` characters;
* otherwise each option's names on a line of their own and its description under them,
  indented (the layout of ``git`` and ``docker`` help), as wide as the terminal allows.

Names are written in full, as Click prints them (``-tp, --tensor-parallel-size <int>``,
``--async-scheduling / --no-async-scheduling``), so each one can be searched for in the
page. The "Output" panel comes last, and options without a panel join the last panel
(Click's own ``--help`` among them).
"""

from __future__ import annotations

import inspect
import os
from typing import Any

from typer.core import TyperCommand

#: The narrowest description column the table layout may leave; below it, names go on their
#: own line.
MIN_DESCRIPTION = 40
#: Indentation of a description under its option's names (stacked layout).
INDENT = 4
#: Columns a panel takes around its content: the border and one space of padding each side.
PANEL_FRAME = 4
ARGUMENTS_PANEL = "Arguments"
OUTPUT_PANEL = "Output"


class PanelledCommand(TyperCommand):
    """A Typer command whose ``--help`` is drawn by :func:`print_help`."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        print_help(self, ctx)


def help_width() -> int | None:
    """The width asked for: ``TERMINAL_WIDTH`` (as Typer reads it), else Rich's own choice
    (``COLUMNS``, else the terminal's)."""
    value = os.environ.get("TERMINAL_WIDTH", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def panels_of(command: Any, ctx: Any) -> dict[str, list[tuple[str, str]]]:
    """``{panel: [(names, description), ...]}`` in the order the parameters are declared;
    the arguments first, "Output" last, and options without a panel (``--help``) in the
    last panel."""
    panels: dict[str, list[tuple[str, str]]] = {}
    loose: list[tuple[str, str]] = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, description = record
        if param.param_type_name == "argument":
            panel = getattr(param, "rich_help_panel", None) or ARGUMENTS_PANEL
        else:
            panel = getattr(param, "rich_help_panel", None)
        if panel is None:
            loose.append((names, description))
        else:
            panels.setdefault(panel, []).append((names, description))
    if OUTPUT_PANEL in panels:  # how the result is printed comes last
        panels[OUTPUT_PANEL] = panels.pop(OUTPUT_PANEL)
    if loose:
        last = next(reversed(panels), None) if panels else None
        panels.setdefault(last or "Options", []).extend(loose)
    if ARGUMENTS_PANEL in panels:  # arguments first, as Typer shows them
        panels = {ARGUMENTS_PANEL: panels.pop(ARGUMENTS_PANEL), **panels}
    return panels


def stacked(panels: dict[str, list[tuple[str, str]]], width: int) -> bool:
    """Whether names go on their own line: the table would leave too narrow a description."""
    longest = max((len(names) for rows in panels.values() for names, _ in rows), default=0)
    return width - PANEL_FRAME - longest - 1 < MIN_DESCRIPTION


def print_help(command: Any, ctx: Any) -> None:
    """Usage, the command's help, a panel per group of options, and the epilog."""
    from rich.console import Console, Group, RenderableType
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.theme import Theme
    from typer import rich_utils as ru

    console = Console(
        theme=Theme(
            {
                "option": ru.STYLE_OPTION,
                "switch": ru.STYLE_SWITCH,
                "negative_option": ru.STYLE_NEGATIVE_OPTION,
                "negative_switch": ru.STYLE_NEGATIVE_SWITCH,
                "types": ru.STYLE_TYPES,
                "types_sep": ru.STYLE_TYPES_SEPARATOR,
                "usage": ru.STYLE_USAGE,
            }
        ),
        highlighter=ru.highlighter,
        color_system=ru.COLOR_SYSTEM,
        force_terminal=ru.FORCE_TERMINAL,
        width=help_width(),
    )
    console.print(Padding(ru.highlighter(command.get_usage(ctx)), 1), style=ru.STYLE_USAGE_COMMAND)
    if command.help:
        console.print(Padding(_prose(command.help, first_plain=True), (0, 1, 1, 1)))
    panels = panels_of(command, ctx)
    one_per_line = stacked(panels, console.width)
    longest = max((len(names) for rows in panels.values() for names, _ in rows), default=0)
    for title, rows in panels.items():
        body: RenderableType
        if one_per_line:
            parts: list[RenderableType] = []
            for names, description in rows:
                parts.append(_names(names))
                parts.append(Padding(_description(description), (0, 0, 0, INDENT)))
            body = Group(*parts)
        else:
            table = Table(box=None, show_header=False, expand=True, padding=(0, 1), pad_edge=False)
            table.add_column(no_wrap=True, width=longest)
            table.add_column(ratio=1, overflow="fold")
            for names, description in rows:
                table.add_row(_names(names), _description(description))
            body = table
        console.print(
            Panel(
                body,
                title=title,
                title_align=ru.ALIGN_OPTIONS_PANEL,
                border_style=ru.STYLE_OPTIONS_PANEL_BORDER,
            )
        )
    if command.epilog:
        console.print(Padding(_prose(command.epilog, first_plain=False), 1))


def _names(names: str) -> Any:
    from rich.text import Text
    from typer import rich_utils as ru

    return ru.highlighter(Text(names, overflow="fold"))


def _description(description: str) -> Any:
    """The help, and Click's ``[default: …]`` / ``[required]`` after it, dimmed."""
    from rich.text import Text
    from typer import rich_utils as ru

    text = Text(overflow="fold")
    head, sep, tail = description.rpartition("  [")
    if sep and description.endswith("]"):
        text.append(head, style=ru.STYLE_OPTION_HELP)
        text.append(" [" + tail, style=ru.STYLE_OPTION_DEFAULT)
    else:
        text.append(description, style=ru.STYLE_OPTION_HELP)
    return ru.highlighter(text)


def _prose(source: str, *, first_plain: bool) -> Any:
    """A help text or epilog: paragraphs as written (no markup read), the help's later
    paragraphs dimmed as Typer dims them."""
    from rich.console import Group
    from rich.text import Text
    from typer import rich_utils as ru

    paragraphs = inspect.cleandoc(source).partition("\f")[0].split("\n\n")
    if not first_plain:
        return ru.highlighter(Text("\n\n".join(paragraphs)))
    first, *rest = (p.replace("\n", " ") for p in paragraphs)  # reflowed to the width
    parts: list[Any] = [ru.highlighter(Text(first))]
    if rest:
        parts += [Text(""), ru.highlighter(Text("\n\n".join(rest), style=ru.STYLE_HELPTEXT))]
    return Group(*parts)
