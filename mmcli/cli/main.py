"""The root command: registers each command module and owns ``--version``."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mmcli._version import __version__
from mmcli.cli import bench, check_embeddings, inspect
from mmcli.cli._boundary import report
from mmcli.cli.kv_share import app as kv_share_app
from mmcli.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK

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


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point.

    Runs the app outside Click's standalone mode so that option-parsing errors (``--hidden
    abc``) come out in the same one ``error:`` line and one ``hint:`` line as every other
    bad input, still with exit code 2.
    """
    try:
        code = app(args=argv, prog_name="mmcli", standalone_mode=False)
    except (typer.Abort, KeyboardInterrupt):
        report("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except typer.TyperException as exc:
        format_message = getattr(exc, "format_message", None)
        message = format_message() if callable(format_message) else str(exc)
        ctx = getattr(exc, "ctx", None)
        command = getattr(ctx, "command_path", None) or "mmcli"
        if message:  # empty when a group was called bare and its help was shown instead
            report(str(message), f"see `{command} --help` for the options and examples")
        sys.exit(getattr(exc, "exit_code", EXIT_BAD_INPUT))
    sys.exit(code if isinstance(code, int) else EXIT_OK)
