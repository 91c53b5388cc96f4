"""The root command: registers each command module and owns ``--version``."""

from __future__ import annotations

from typing import Annotated

import typer

from mmcli._version import __version__
from mmcli.cli import bench, check_embeddings, inspect
from mmcli.cli.kv_share import app as kv_share_app

CONTEXT = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="mmcli",
    help="Diagnostics for multimodal embedding merges and cross-layer KV-cache sharing.",
    context_settings=CONTEXT,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
app.add_typer(kv_share_app, name="kv-share")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mmcli {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Diagnostics for multimodal embedding merges and cross-layer KV-cache sharing.

    Exit codes: 0 nothing wrong, 1 problems found in the input, 2 could not run (bad
    arguments or input file), 3 internal error.
    """


app.add_typer(check_embeddings.app)
app.add_typer(inspect.app)
app.add_typer(bench.app)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="mmcli")
