"""``--help`` read at 80 and 100 columns: every option name in full, its description in a
column at least 30 characters wide, no line wider than the terminal, and the options grouped
in named panels, each option listed once.

The names come from the Click command itself (``opts`` and ``secondary_opts``, so the
``--no-`` half of a boolean pair is checked too), the descriptions from each option's
``help``: nothing here is copied from the rendered page.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from mmcli.cli.main import app

runner = CliRunner()

WIDTHS = (80, 100)
MIN_DESCRIPTION = 30
#: Panels of each command's help (besides "Arguments", where a command takes any).
PANELS: dict[tuple[str, ...], set[str]] = {
    ("kv-share", "plan"): {
        "Input and map",
        "Memory and GPU",
        "Parallelism",
        "Engine and release",
        "Output",
    },
    ("kv-share", "explain"): {"Input", "Memory and GPU", "Engine and release", "Output"},
    ("check-embeddings",): {"What to expect", "Check", "Output"},
    ("compare",): {"Tolerance", "Pairing and device", "Output"},
    ("bench",): {"Workload", "Timing", "Output"},
    ("kv-share",): {"Options", "Commands"},
    (): {"Options", "Commands"},
}
HELP_NAMES = ("-h", "--help")
_TITLE = re.compile(r"^╭─ (.+?) ─+╮$")


def command_at(path: tuple[str, ...]) -> Any:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


def options_of(command: Any) -> list[tuple[list[str], str]]:
    """``(names, help)`` of each option the command declares, ``--help`` included."""
    found = [
        ([*p.opts, *p.secondary_opts], p.help or "")
        for p in command.params
        if p.param_type_name == "option" and not getattr(p, "hidden", False)
    ]
    return [*found, (list(HELP_NAMES), "Show this message and exit.")]


def panel_lines(text: str) -> list[tuple[str, int, str]]:
    """``(panel title, line number, line)`` of every line inside a panel."""
    out: list[tuple[str, int, str]] = []
    title: str | None = None
    for number, line in enumerate(text.splitlines()):
        if match := _TITLE.match(line):
            title = match.group(1)
        elif line.startswith("╰"):
            title = None
        elif title is not None and line.startswith("│"):
            out.append((title, number, line))
    return out


def starts_with_name(content: str, names: list[str]) -> bool:
    """A row of the option: its names begin the line (after Typer's ``*`` column, if any),
    not a description line that happens to begin with an option's name."""
    stripped = content.lstrip(" *")
    if len(content) - len(stripped) > 2:
        return False
    return any(re.match(rf"{re.escape(n)}(?![\w-])", stripped) for n in names)


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", list(PANELS), ids=lambda p: " ".join(p) or "mmcli")
def test_help_reads_at_width(path: tuple[str, ...], width: int) -> None:
    env = {"COLUMNS": str(width), "TERMINAL_WIDTH": str(width)}
    result = runner.invoke(app, [*path, "--help"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = result.stdout
    lines = text.splitlines()
    wide = [line for line in lines if len(line) > width]
    assert not wide, f"lines wider than {width}: {wide}"

    inside = panel_lines(text)
    titles = {title for title, _, _ in inside} - {"Arguments"}
    assert titles == PANELS[path], f"panels: {sorted(titles)}"
    every_description = squeeze(
        " ".join(line[1:-1] for title, _, line in inside if title != "Commands")
    )

    for names, help_text in options_of(command_at(path)):
        rows = [
            (title, number, line)
            for title, number, line in inside
            if starts_with_name(line[2:-2], names)
        ]
        assert len(rows) == 1, f"{names[0]} is listed {len(rows)} times"
        title, number, line = rows[0]
        assert title in PANELS[path], f"{names[0]} is in panel {title!r}"
        row_text = line
        if number + 1 < len(lines):
            row_text += "\n" + lines[number + 1]
        for name in names:  # every name in full on its row, none cut short
            assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", line), (name, line)
        if not help_text:
            continue
        assert squeeze(help_text) in every_description, f"{names[0]}: description cut"
        # Where the description starts: after the names on their row, or on the next line.
        head = help_text.split()[0][:8]
        after_names = max(line.find(n) + len(n) for n in names)
        start = line.find(head, after_names)
        if start < 0:
            start = lines[number + 1].find(head)
        assert start >= 0, f"{names[0]}: description not under or beside its names"
        column = (width - 2) - start  # the panel's right border and its padding
        assert column >= MIN_DESCRIPTION, f"{names[0]}: description column {column} wide"
