"""``mmcli inspect``: a header-only view of any safetensors file (no tensor data is read)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from mmcli.cli._boundary import guarded
from mmcli.cli._output import OutputFormat, emit_json, stdout
from mmcli.cli.options import FormatOpt
from mmcli.text import human_bytes

app = typer.Typer()

EPILOG = (
    "Examples:\n\n"
    "  mmcli inspect samples/dumps/healthy.safetensors\n\n"
    "  mmcli inspect model-00001-of-00004.safetensors --format json\n\n"
    "Only the header is read, so this is instant on a file of any size. Exit codes: 0 a "
    "valid safetensors file (a dump or not); 2 unreadable, truncated or corrupt header."
)


@app.command("inspect", epilog=EPILOG, no_args_is_help=True)
@guarded
def inspect_file(
    file: Annotated[
        Path, typer.Argument(help="A safetensors file (a dump or any other).", show_default=False)
    ],
    output_format: FormatOpt = OutputFormat.table,
) -> None:
    """Show a safetensors file's tensors, metadata and dump-schema status from its header."""
    from mmcli.dump.schema import FORMAT
    from mmcli.dump.summary import summarize

    summary = summarize(file)
    if output_format is OutputFormat.json:
        emit_json(summary.to_json())
        return
    header, layout, problem = summary.header, summary.layout, summary.problem
    tensors = summary.tensors
    out = stdout()
    out.print(
        Text.assemble(
            (str(header.path), "bold"),
            f"  {human_bytes(header.file_size)}, {len(tensors)} tensors, "
            f"{header.header_size}-byte header",
        )
    )
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 2))
    for name, justify in (("name", "left"), ("dtype", "left"), ("shape", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("bytes", justify="right")
    for t in tensors:
        table.add_row(
            Text(t.name),
            Text(t.dtype_name),
            Text("[" + ", ".join(str(d) for d in t.shape) + "]"),
            Text(f"{t.nbytes:,}"),
        )
    if tensors:
        out.print(table)
    if summary.metadata:
        out.print(Text("metadata", style="bold"))
        for key, value in summary.metadata.items():
            out.print(Text(f"  {key} = {value}"), soft_wrap=True)
    if layout is not None:
        kind = "one stacked tensor" if layout.stacked else "per-item tensors"
        masks = f", masks for {len(layout.masks)}" if layout.masks else ", no masks"
        kept = len(layout.placeholders)
        kept_text = f", stored placeholders for {kept}" if kept else ""
        line = f"{FORMAT} v1 dump: {layout.num_items} items ({kind}){masks}{kept_text}"
        out.print(Text(line, style="green"))
    else:
        out.print(Text(f"not an {FORMAT} dump: {problem}", style="yellow"), soft_wrap=True)
