"""Options shared by several commands, declared once."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from mmcli.cli._output import OutputFormat


def flag(*names: str, **settings: Any) -> Any:
    """``typer.Option`` for a boolean flag, shown in the help without a type: Typer prints
    ``<bool>`` beside a flag, which reads as if it took a value (``--strict true``, where
    ``true`` then becomes a file argument)."""
    return typer.Option(*names, metavar="", **settings)


FormatOpt = Annotated[
    OutputFormat,
    typer.Option("--format", help="Output format: a readable table, or one JSON document."),
]
DeviceOpt = Annotated[
    str,
    typer.Option(
        "--device",
        help="auto (first CUDA device if present, else CPU), cpu, cuda or cuda:N.",
    ),
]
StrictOpt = Annotated[bool, flag("--strict", help="Treat warnings as failures (exit 1).")]
QuietOpt = Annotated[bool, flag("--quiet", "-q", help="Print only the summary and problems.")]

RevisionOpt = Annotated[
    str | None,
    typer.Option(
        "--revision",
        help="With a Hub repo id: the branch, tag or commit to read (default: the main branch).",
        show_default=False,
    ),
]
