"""``mmcli check-embeddings``: check encoder-output dumps and report every problem found."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from mmcli.cli._boundary import guarded, report
from mmcli.cli._output import OutputFormat, emit_json, progress, stderr, stdout
from mmcli.cli.options import DeviceOpt, FormatOpt, QuietOpt, StrictOpt

if TYPE_CHECKING:
    from mmcli.check_embeddings import FileReport

app = typer.Typer()


class ModelDType(str, Enum):
    """The model dtype to compare items against."""

    bf16 = "bf16"
    fp16 = "fp16"
    fp32 = "fp32"


EPILOG = (
    "Examples:\n\n"
    "  mmcli check-embeddings samples/dumps/healthy.safetensors\n\n"
    "  mmcli check-embeddings samples/dumps --hidden-size 64 --strict\n\n"
    "  mmcli check-embeddings dump.safetensors --device cuda --format json\n\n"
    "Exit codes: 0 every file is fine; 1 a file has an error finding (or a warning, with "
    "--strict); 2 bad arguments, or a file could not be read or is not a dump (the other "
    "files are still checked and reported, and the worst code wins)."
)

_STYLE = {"ok": "green", "failed": "red", "error": "red", "warning": "yellow"}


@app.command("check-embeddings", epilog=EPILOG, no_args_is_help=True)
@guarded
def check_embeddings(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Dump files, or directories searched recursively for *.safetensors.",
            show_default=False,
        ),
    ],
    device: DeviceOpt = "auto",
    expected_items: Annotated[
        int | None,
        typer.Option(
            "--expected-items", min=0, help="Expected number of items (overrides metadata)."
        ),
    ] = None,
    hidden_size: Annotated[
        int | None,
        typer.Option(
            "--hidden-size", min=1, help="The text model's hidden size (overrides metadata)."
        ),
    ] = None,
    dtype: Annotated[
        ModelDType | None,
        typer.Option("--dtype", help="The model dtype (overrides metadata)."),
    ] = None,
    strict: StrictOpt = False,
    quiet: QuietOpt = False,
    output_format: FormatOpt = OutputFormat.table,
) -> None:
    """Check multimodal encoder-output dumps: shapes, counts, masks, values, scatter/gather."""
    from mmcli.check_embeddings import check_file, exit_code, find_files, run_document, summary
    from mmcli.devices import resolve_device

    target = resolve_device(device)
    files = find_files(paths)
    reports: list[FileReport] = []
    as_json = output_format is OutputFormat.json
    # A bar only where someone watches: several files, a terminal, neither JSON nor --quiet.
    show = len(files) > 1 and not as_json and not quiet and stderr().is_terminal
    with progress(enabled=show) as bar:
        task = bar.add_task("checking", total=len(files))
        for path in files:
            bar.update(task, description=escape(path.name))
            result = check_file(
                path,
                device=target,
                expected_items=expected_items,
                hidden_size=hidden_size,
                model_dtype=dtype.value if dtype is not None else None,
                strict=strict,
            )
            reports.append(result)
            if result.status == "error":
                report(result.error or "unreadable file", result.hint)
            bar.advance(task)
    if as_json:
        emit_json(run_document(reports, target))
    else:
        _render(reports, summary(reports), str(target), quiet=quiet)
    raise typer.Exit(exit_code(reports))


def _render(reports: list[FileReport], totals: dict[str, int], device: str, *, quiet: bool) -> None:
    if all(r.status == "error" for r in reports):
        return  # nothing was read: the error lines on stderr are the whole story
    out = stdout()
    for r in reports:
        if r.status == "error" or (quiet and r.status == "ok" and not r.findings):
            continue
        status = Text(r.status, style=_STYLE[r.status])
        out.print(Text.assemble(Text(r.path, style="bold"), "  ", status))
        if not quiet and r.items:
            out.print(_items_table(r))
        for f in r.findings:
            if quiet and f.severity == "info":
                continue
            style = _STYLE["failed"] if f.severity == "error" else _STYLE["warning"]
            out.print(
                Text.assemble("  ", (f"{f.severity:<7}", style), " ", (f.code, "bold"), "  "),
                Text(f.message),
                soft_wrap=True,
            )
            if f.hint:
                out.print(Text("    hint: " + f.hint, style="dim"), soft_wrap=True)
        if not quiet:
            times = "  ".join(f"{k} {v:.1f} ms" for k, v in r.timings_ms.items())
            out.print(Text(f"  timings on {device}: {times}", style="dim"))
        out.print()
    unreadable = sum(1 for r in reports if r.status == "error")
    failed = sum(1 for r in reports if r.status == "failed")
    parts = [
        _plural(totals["files"], "file"),
        _plural(totals["items"], "item"),
        _plural(totals["errors"], "error"),
        _plural(totals["warnings"], "warning"),
    ]
    tail = []
    if failed:
        tail.append(f"{failed} failed")
    if unreadable:
        tail.append(f"{unreadable} could not be read")
    line = ", ".join(parts) + (f" ({', '.join(tail)})" if tail else "")
    out.print(Text(line, style="bold"))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _items_table(r: FileReport) -> Table:
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 2))
    for name, justify in (
        ("item", "right"),
        ("shape", "left"),
        ("dtype", "left"),
        ("placeholders", "right"),
        ("embeds", "right"),
        ("finite", "left"),
        ("status", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in r.items:
        status = r.item_status(s.index)
        cells: list[Any] = [
            str(s.index),
            "[" + ", ".join(str(d) for d in s.shape) + "]",
            s.dtype,
            "-" if s.num_placeholders is None else str(s.num_placeholders),
            "-" if s.num_embeds is None else str(s.num_embeds),
            "-" if s.finite is None else ("yes" if s.finite else "no"),
        ]
        row = [Text(c) for c in cells]
        row.append(Text(status, style=_STYLE.get(status, "")))
        table.add_row(*row)
    return table
