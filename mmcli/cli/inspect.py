"""``mmcli inspect``: a header-only view of any safetensors file (no tensor data is read)."""

from __future__ import annotations

import itertools
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from mmcli.cli._boundary import guarded
from mmcli.cli._output import OutputFormat, begin_document, stdout
from mmcli.cli.options import FormatOpt
from mmcli.text import human_bytes, plural, printable

if TYPE_CHECKING:
    from mmcli.dump.schema import DumpLayout
    from mmcli.dump.summary import FileSummary

#: Rows of tensors (and lines of metadata) the table shows; JSON lists every one.
MAX_ROWS = 1000
#: Characters of a name (or shape) and of a metadata value shown; JSON has them whole.
NAME_LIMIT = 120
VALUE_LIMIT = 400

app = typer.Typer()

EPILOG = (
    "Examples:\n\n"
    "  mmcli inspect samples/dumps/healthy.safetensors\n\n"
    "  mmcli inspect model-00001-of-00004.safetensors --format json\n\n"
    "Only the header is read, so this is instant on a file of any size. The table shows the "
    "first 1,000 tensors; JSON lists them all. Exit codes: 0 a "
    "valid safetensors file (a dump or not); 2 unreadable, truncated or corrupt header."
)


@app.command("inspect", epilog=EPILOG, no_args_is_help=True)
@guarded
def inspect_file(
    file: Annotated[
        str,  # not Path: Path("") is ".", and an empty argument is no file
        typer.Argument(help="A safetensors file (a dump or any other).", show_default=False),
    ],
    output_format: FormatOpt = OutputFormat.table,
) -> None:
    """Show a safetensors file's tensors, metadata and dump-schema status from its header."""
    from mmcli.dump.schema import FORMAT
    from mmcli.dump.summary import summarize

    summary = summarize(file)
    if output_format is OutputFormat.json:
        begin_document()
        summary.write_json(sys.stdout)  # streamed: a header may hold a million tensors
        return
    header, layout, problem = summary.header, summary.layout, summary.problem
    tensors = header.tensors
    out = stdout()
    out.print(
        Text.assemble(
            (printable(str(header.path), None), "bold"),
            f"  {human_bytes(header.file_size)}, {plural(len(tensors), 'tensor')}, "
            f"{header.header_size}-byte header",
        )
    )
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 2))
    for name, justify in (("name", "left"), ("dtype", "left"), ("shape", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("bytes", justify="right")
    for t in itertools.islice(tensors.values(), MAX_ROWS):
        table.add_row(
            Text(printable(t.name, NAME_LIMIT)),
            Text(t.dtype_name),
            Text(printable("[" + ", ".join(str(d) for d in t.shape) + "]", NAME_LIMIT)),
            Text(f"{t.nbytes:,}"),
        )
    if tensors:
        out.print(table)
    if len(tensors) > MAX_ROWS:
        out.print(Text(_more(len(tensors) - MAX_ROWS, "tensor"), style="dim"))
    if summary.metadata:
        out.print(Text("metadata", style="bold"))
        for key, value in itertools.islice(summary.metadata.items(), MAX_ROWS):
            line = f"  {printable(key, NAME_LIMIT)} = {printable(value, VALUE_LIMIT)}"
            out.print(Text(line), soft_wrap=True)
        if len(summary.metadata) > MAX_ROWS:
            out.print(Text(_more(len(summary.metadata) - MAX_ROWS, "metadata key"), style="dim"))
    if layout is not None:
        out.print(Text(_dump_line(summary, layout), style="green"), soft_wrap=True)
    else:
        out.print(Text(f"not an {FORMAT} dump: {problem}", style="yellow"), soft_wrap=True)


def _dump_line(summary: FileSummary, layout: DumpLayout) -> str:
    """What the dump holds, under the format version its metadata declares:
    ``mm_dump v2 dump: 3 items (one merged tensor split by item_counts), no masks, …``."""
    from mmcli.dump.schema import FORMAT

    declared = summary.format_version
    head = (
        f"{FORMAT} v{printable(declared, 20)} dump"
        if declared
        else f"{FORMAT} dump (no format_version: read as v{summary.read_as_version})"
    )
    return_type = summary.metadata.get("encoder_return_type")
    if layout.merged:
        kind = "one merged tensor split by item_counts"
    elif layout.stacked:
        kind = "one stacked tensor"
    elif return_type and not layout.num_items:
        kind = f"the encoder returned {printable(return_type, 60)}"
    else:
        kind = "per-item tensors"
    parts = [f"{head}: {plural(layout.num_items, 'item')} ({kind})"]
    parts.append(f"masks for {len(layout.masks)}" if layout.masks else "no masks")
    if layout.placeholders:
        parts.append(f"stored placeholders for {len(layout.placeholders)}")
    context = [name for name in sorted(layout.context) if name != "item_counts"]
    if context:
        parts.append(f"sequence context ({', '.join(context)})")
    return ", ".join(parts)


def _more(n: int, what: str) -> str:
    return f"… {n:,} more {what}{'' if n == 1 else 's'} not shown; --format json lists them all"
