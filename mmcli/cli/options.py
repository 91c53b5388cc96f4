"""Options shared by several commands, declared once."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from mmcli.cli._output import OutputFormat

# Help panels (``rich_help_panel=``): the kv-share plan command's, and the one every command
# shares for how the result is printed.
INPUT = "Input and map"
MEMORY = "Memory and GPU"
PARALLEL = "Parallelism"
ENGINE = "Engine and release"
OUTPUT = "Output"


def flag(*names: str, **settings: Any) -> Any:
    """``typer.Option`` for a boolean flag, shown in the help without a type: Typer prints
    ``<bool>`` beside a flag, which reads as if it took a value (``--strict true``, where
    ``true`` then becomes a file argument)."""
    return typer.Option(*names, metavar="", **settings)


FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        help="Output format: a readable table, or one JSON document.",
        rich_help_panel=OUTPUT,
    ),
]
#: ``--device`` of the commands that run tensors (each puts it in its own panel).
DEVICE_HELP = "auto (first CUDA device if present, else CPU), cpu, cuda or cuda:N."
QuietOpt = Annotated[
    bool,
    flag("--quiet", "-q", help="Print only the summary and problems.", rich_help_panel=OUTPUT),
]

REVISION_HELP = "With a Hub repo id: the branch, tag or commit to read (default: the main branch)."
#: ``--revision`` in kv-share plan's input panel.
RevisionOpt = Annotated[
    str | None,
    typer.Option("--revision", help=REVISION_HELP, show_default=False, rich_help_panel=INPUT),
]
