"""``mmcli check-embeddings``: check encoder-output dumps and report every problem found."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from mmcli.cli._boundary import guarded, report
from mmcli.cli._output import OutputFormat, emit_json, progress, stderr, stdout
from mmcli.cli.help import PanelledCommand
from mmcli.cli.options import DEVICE_HELP, FormatOpt, QuietOpt, flag
from mmcli.errors import EXIT_BAD_INPUT, EXIT_INTERNAL
from mmcli.text import plural, printable

if TYPE_CHECKING:
    from mmcli.check_embeddings import FileReport

app = typer.Typer()


class Impl(str, Enum):
    """Which scatter/gather runs the round trip."""

    reference = "reference"
    fast = "fast"


class ModelDType(str, Enum):
    """The model dtype to compare items against."""

    bf16 = "bf16"
    fp16 = "fp16"
    fp32 = "fp32"


EXPECT = "What to expect"
CHECK = "Check"

EPILOG = (
    "Examples:\n\n"
    "  mmcli check-embeddings samples/dumps/healthy.safetensors\n\n"
    "  mmcli check-embeddings samples/dumps --hidden-size 64 --strict\n\n"
    "  mmcli check-embeddings dump.safetensors --device cuda --format json\n\n"
    "Exit codes: 0 every file is fine; 1 a file has an error finding (or a warning, with "
    "--strict); 2 bad arguments, or a path could not be read (a file, or a directory in "
    "the tree searched) or is not a dump; 3 checking a file hit a bug in mmcli. Each file's "
    "problem is that file's error line: the other files are still checked and reported "
    "(in JSON too), and the worst code wins."
)

_STYLE = {"ok": "green", "failed": "red", "error": "red", "warning": "yellow"}


@app.command("check-embeddings", cls=PanelledCommand, epilog=EPILOG, no_args_is_help=True)
@guarded
def check_embeddings(
    paths: Annotated[
        list[str],  # not Path: Path("") is ".", and an empty argument must not search "."
        typer.Argument(
            help="Dump files, or directories searched recursively for *.safetensors.",
            show_default=False,
        ),
    ],
    device: Annotated[
        str, typer.Option("--device", help=DEVICE_HELP, rich_help_panel=CHECK)
    ] = "auto",
    expected_items: Annotated[
        int | None,
        typer.Option(
            "--expected-items",
            min=0,
            help="Expected number of items (overrides metadata).",
            rich_help_panel=EXPECT,
        ),
    ] = None,
    hidden_size: Annotated[
        int | None,
        typer.Option(
            "--hidden-size",
            min=1,
            help="The text model's hidden size (overrides metadata).",
            rich_help_panel=EXPECT,
        ),
    ] = None,
    dtype: Annotated[
        ModelDType | None,
        typer.Option(
            "--dtype", help="The model dtype (overrides metadata).", rich_help_panel=EXPECT
        ),
    ] = None,
    impl: Annotated[
        Impl,
        typer.Option(
            "--impl",
            help="The scatter/gather the round trip runs: the engine's reference algorithm, "
            "or mmcli's fast one.",
            rich_help_panel=CHECK,
        ),
    ] = Impl.reference,
    strict: Annotated[
        bool,
        flag("--strict", help="Treat warnings as failures (exit 1).", rich_help_panel=CHECK),
    ] = False,
    quiet: QuietOpt = False,
    output_format: FormatOpt = OutputFormat.table,
) -> None:
    """Check multimodal encoder-output dumps: shapes, counts, masks, values, scatter/gather."""
    from mmcli.check_embeddings import check_file, exit_code, find_files, run_document, summary
    from mmcli.devices import resolve_device

    target = resolve_device(device)
    # A path that cannot be searched is that path's error: the others are still checked.
    reports: list[FileReport] = []
    files = find_files(paths, reports)
    for problem in reports:
        report(problem.error or "unreadable path", problem.hint)
    as_json = output_format is OutputFormat.json
    # A bar only where someone watches: several files, a terminal, neither JSON nor --quiet.
    show = len(files) > 1 and not as_json and not quiet and stderr().is_terminal
    with progress(enabled=show) as bar:
        task = bar.add_task("checking", total=len(files))
        for path in files:
            bar.update(task, description=escape(printable(path.name, 60)))
            result = check_file(
                path,
                device=target,
                expected_items=expected_items,
                hidden_size=hidden_size,
                model_dtype=dtype.value if dtype is not None else None,
                strict=strict,
                impl=impl.value,
            )
            reports.append(result)
            if result.status == "error":
                report(result.error or "unreadable file", result.hint)
            bar.advance(task)
    if as_json:
        emit_json(_with_error(run_document(reports, target), reports))
    else:
        _render(reports, summary(reports), str(target), quiet=quiet)
    raise typer.Exit(exit_code(reports))


class _Lines:
    """Report lines for stdout. In a pipe or a file (no terminal, no colour) they are written
    as plain text, with no Rich layout work per line, so 10,000 reports print in well under
    a second; at a terminal Rich prints them with their styles."""

    def __init__(self) -> None:
        self.out = stdout()
        self.plain = self.out.color_system is None and not self.out.is_terminal
        self.pending: list[str] = []

    def add(self, *parts: str | tuple[str, str]) -> None:
        if self.plain:
            self.pending.append("".join(p if isinstance(p, str) else p[0] for p in parts))
        else:
            self.out.print(Text.assemble(*parts), soft_wrap=True)

    def table(self, table: Table) -> None:
        self.flush()
        self.out.print(table)

    def flush(self) -> None:
        if self.pending:
            self.out.file.write("\n".join(self.pending) + "\n")
            self.pending.clear()


def _with_error(document: dict[str, Any], reports: list[FileReport]) -> dict[str, Any]:
    """A run that could not check every file (exit 2 or 3) carries the first such file's
    error at the top, with the keys of every command's error document (``error``, ``hint``,
    ``input``); each file's own error stays in its entry."""
    internal = document["exit_code"] == EXIT_INTERNAL
    failed = [r for r in reports if r.status == "error" and (r.internal or not internal)]
    if document["exit_code"] not in (EXIT_BAD_INPUT, EXIT_INTERNAL) or not failed:
        return document
    first = failed[0]
    code = document.pop("exit_code")
    return {
        **document,
        "error": first.error or "unreadable file",
        "hint": first.hint,
        "input": first.path,
        "exit_code": code,
    }


def _render(reports: list[FileReport], totals: dict[str, int], device: str, *, quiet: bool) -> None:
    if all(r.status == "error" for r in reports):
        return  # nothing was read: the error lines on stderr are the whole story
    lines = _Lines()
    for r in reports:
        if r.status == "error" or (quiet and r.status == "ok" and not r.findings):
            continue
        lines.add((printable(r.path, None), "bold"), "  ", (r.status, _STYLE[r.status]))
        if not quiet and r.items:
            _items(lines, r)
        for f in r.findings:
            if quiet and f.severity == "info":
                continue
            style = _STYLE["failed"] if f.severity == "error" else _STYLE["warning"]
            lines.add("  ", (f"{f.severity:<7}", style), " ", (f.code, "bold"), "   ", f.message)
            if f.hint:
                lines.add(("    hint: " + f.hint, "dim"))
        if not quiet:
            times = "  ".join(f"{k} {v:.1f} ms" for k, v in r.timings_ms.items())
            lines.add((f"  timings on {device}: {times}", "dim"))
        lines.add("")
        if len(lines.pending) > 4096:
            lines.flush()
    unreadable = sum(1 for r in reports if r.status == "error")
    failed = sum(1 for r in reports if r.status == "failed")
    parts = [
        plural(totals["files"], "file"),
        plural(totals["items"], "item"),
        plural(totals["errors"], "error"),
        plural(totals["warnings"], "warning"),
    ]
    tail = []
    if failed:
        tail.append(f"{failed} failed")
    if unreadable:
        tail.append(f"{unreadable} could not be read")
    line = ", ".join(parts) + (f" ({', '.join(tail)})" if tail else "")
    lines.add((line, "bold"))
    lines.flush()


_COLUMNS = (
    ("item", "right"),
    ("shape", "left"),
    ("dtype", "left"),
    ("placeholders", "right"),
    ("embeds", "right"),
    ("finite", "left"),
    ("status", "left"),
)
#: Columns are separated by this (Rich's padding (0, 2) on both sides of a cell).
_GAP = " " * 4


def _items(lines: _Lines, r: FileReport) -> None:
    """The items table: laid out here (as Rich lays out this table when it fits the width)
    without Rich's per-cell measuring, which costs milliseconds per file."""
    # An item's own findings and those about the whole file (the prompt, the count): an
    # item in a dump the engine would refuse is not "ok" (the findings below say why).
    status = r.item_statuses()
    rows = [
        [
            str(s.index),
            "[" + ", ".join(str(d) for d in s.shape) + "]",
            s.dtype,
            "-" if s.num_placeholders is None else str(s.num_placeholders),
            "-" if s.num_embeds is None else str(s.num_embeds),
            "-" if s.finite is None else ("yes" if s.finite else "no"),
            status[s.index],
        ]
        for s in r.items
    ]
    header = [name for name, _ in _COLUMNS]
    widths = [max(len(row[c]) for row in (header, *rows)) for c in range(len(_COLUMNS))]
    if sum(widths) + len(_GAP) * (len(widths) - 1) > lines.out.width:
        lines.table(_items_table(rows))  # too wide: Rich wraps the cells
        return

    def cells(row: list[str]) -> list[str]:
        return [
            cell.rjust(width) if justify == "right" else cell.ljust(width)
            for cell, width, (_, justify) in zip(row, widths, _COLUMNS, strict=True)
        ]

    lines.add((_GAP.join(cells(header)), "bold"))
    for row in rows:
        text = cells(row)
        lines.add(_GAP.join(text[:-1]) + _GAP, (text[-1], _STYLE.get(row[-1], "")))


def _items_table(rows: list[list[str]]) -> Table:
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 2))
    for name, justify in _COLUMNS:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        cells = [Text(c) for c in row[:-1]]
        cells.append(Text(row[-1], style=_STYLE.get(row[-1], "")))
        table.add_row(*cells)
    return table
