"""The root command: registers each command module and owns ``--version``."""

from __future__ import annotations

import difflib
import errno
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, NoReturn

import typer

from mmcli._version import __version__
from mmcli.cli import bench, check_embeddings, compare, inspect
from mmcli.cli._boundary import begin_run, fail, report
from mmcli.cli._output import OutputClosed, OutputFailed, guarded_streams, silence, stderr, stdout
from mmcli.cli.kv_share import app as kv_share_app
from mmcli.cli.options import flag
from mmcli.errors import EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_OK

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
        flag("--version", callback=_version, is_eager=True, help="Show the version and exit."),
    ] = False,
) -> None:
    """Diagnostics for multimodal embedding merges and cross-layer KV-cache sharing.

    Exit codes: 0 nothing wrong, 1 problems found in the input, 2 could not run (bad
    arguments or input file), 3 internal error.
    """
    # Each run reads the terminal anew (its width, whether it is one): a process that runs
    # several commands (a test suite, a notebook) must not keep the first run's consoles.
    stdout.cache_clear()
    stderr.cache_clear()


app.add_typer(check_embeddings.app)
app.add_typer(compare.app)
app.add_typer(inspect.app)
app.add_typer(bench.app)


def main(argv: list[str] | None = None) -> NoReturn:
    """Console-script entry point (``mmcli`` and ``python -m mmcli`` come here).

    Runs the app outside Click's standalone mode so that option-parsing errors (``--hidden
    abc``) come out in the same one ``error:`` line and one ``hint:`` line as every other
    bad input, still with exit code 2. What stdout's state gives:

    * the reader went away (``mmcli ... | head -1``): exit 141, nothing said;
    * it cannot be written (a full disk, ``> /dev/full``, a closed stdout): one ``error:``
      and one ``hint:`` line, exit 2;
    * Ctrl-C: ``error: interrupted``, exit 130.

    With ``--format json`` every ``error:`` line here also comes as the error document on
    stdout (see :func:`mmcli.cli._boundary.fail`), except where stdout cannot take it.
    """
    if sys.stdout is None:  # started with descriptor 1 closed (`mmcli ... >&-`)
        report(
            "cannot write the output: stdout is closed",
            "run mmcli with stdout open: redirect it to a file, or to /dev/null to discard it",
        )
        sys.exit(EXIT_BAD_INPUT)
    try:
        with guarded_streams():
            code = _run(argv)
    except OutputClosed:
        silence(sys.stdout)
        sys.exit(EXIT_BROKEN_PIPE)
    except OutputFailed as failure:
        silence(sys.stdout)
        report(
            f"cannot write the output to stdout: {failure.reason}",
            "free some space where stdout goes, or redirect it elsewhere"
            if failure.error.errno in (errno.ENOSPC, errno.EDQUOT)
            else "redirect stdout to a writable file, or to /dev/null to discard it",
        )
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:  # typer turns a Ctrl-C during a command into exit 130
        fail("interrupted", None, EXIT_INTERRUPTED, argv=argv)
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    begin_run()
    try:
        code = app(args=argv, prog_name="mmcli", standalone_mode=False)
    except typer.Abort:
        return EXIT_INTERRUPTED
    except typer.TyperException as exc:
        format_message = getattr(exc, "format_message", None)
        message = format_message() if callable(format_message) else str(exc)
        ctx = getattr(exc, "ctx", None)
        command = getattr(ctx, "command_path", None) or "mmcli"
        hint = f"see `{command} --help` for the options and examples"
        option = getattr(exc, "option_name", None)
        if type(exc).__name__ == "NoSuchOption" and isinstance(option, str):
            message, hint = _unknown_option(
                option, getattr(exc, "message", message), ctx, command, argv
            )
        code = int(getattr(exc, "exit_code", EXIT_BAD_INPUT))
        if message:  # empty when a group was called bare and its help was shown instead
            # Before any command body ran: whether JSON was asked for is read from argv.
            fail(str(message), hint, code, argv=argv)
        return code
    return code if isinstance(code, int) else EXIT_OK


def _unknown_option(
    option: str,
    message: str,
    ctx: Any,
    command: str,
    argv: Sequence[str] | None,
) -> tuple[str, str]:
    """The error line and hint for ``No such option``: a file name that starts with ``-``
    gets the ``--`` remedy; a near miss (``--tp``, ``--tensor``) the options it resembles."""
    see = f"see `{command} --help` for the options and examples"
    args = sys.argv[1:] if argv is None else list(argv)
    token = next((a for a in args if a.startswith(option)), option)
    if os.path.lexists(token) or (
        not token.startswith("--") and ("." in token[2:] or "/" in token)
    ):
        return (
            f"{message} (from {token!r})",
            f"to pass a file whose name starts with '-', put `--` before it "
            f"(`{command} -- {token}`) or write it as ./{token}",
        )
    params = getattr(getattr(ctx, "command", None), "params", None) or []
    close = _close_options(option, params)
    if not close:
        return message, see
    return message, f"did you mean {' or '.join(close)}? {see}"


def _close_options(typed: str, params: Iterable[Any]) -> list[str]:
    """The options that ``typed`` most likely meant, as ``--long (-s)``; at most three.

    Strong matches first: the same name with other dashes (``--tp`` for ``-tp``), a prefix
    (``--tensor``), the initials (``--tps``); only without one, names spelled alike.
    """
    core = typed.lstrip("-").lower()
    if not core:
        return []
    options: list[tuple[str, list[str]]] = []
    for param in params:
        if getattr(param, "param_type_name", "") != "option" or getattr(param, "hidden", False):
            continue
        names = [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]
        longs = [n for n in names if n.startswith("--")] or names
        shorts = [n for n in names if n not in longs]
        label = longs[0] + (f" ({', '.join(shorts)})" if shorts else "")
        options.append((label, [n.lstrip("-").lower() for n in names]))
    strong = [
        label
        for label, cores in options
        if any(
            c == core
            or (len(core) >= 2 and c.startswith(core))
            or (len(core) >= 2 and "".join(w[:1] for w in c.split("-")).startswith(core))
            for c in cores
        )
    ]
    if strong:
        return strong[:3]
    alike = []
    for label, cores in options:
        heads = [c[: len(core) + 1] for c in cores]  # a typo in a prefix: --hiden, --hidden-size
        if difflib.get_close_matches(core, cores + heads, n=1, cutoff=0.8):
            alike.append(label)
    return alike[:3]
