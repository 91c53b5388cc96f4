"""``python -m mmcli`` and the ``mmcli`` script: one entry point that owns Ctrl-C from the start.

This module imports nothing heavy itself, so that a Ctrl-C while the CLI's modules (typer,
rich, and later torch) are still importing is caught here too: one ``error: interrupted``
line and exit 130, never a traceback, at any moment of the run.
"""

from __future__ import annotations

import gc
import signal
import sys
from typing import NoReturn

from mmcli.errors import EXIT_INTERRUPTED


def main() -> NoReturn:
    """Run the CLI on ``sys.argv``; exit with its status.

    The cyclic garbage collector is off for the run. A run is one short-lived process that
    builds what its input declares (a million header entries, a million layers) as acyclic
    objects freed by reference counting; every automatic collection would walk all of them
    again, which cost those runs a quarter of their time.
    """
    gc.disable()
    code: object
    try:
        from mmcli.cli.main import main as run

        run()
    except SystemExit as done:
        code = done.code
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _say("error: interrupted\n")
        code = EXIT_INTERRUPTED
        _interrupted_document()
    # From here on a Ctrl-C would only turn the exit (torch's handlers at exit) into a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


def _interrupted_document() -> None:
    """With ``--format json``, the error document for a Ctrl-C that came before the CLI had
    loaded (the boundary's own reporting was not there yet to print it)."""
    try:
        from mmcli.cli._json_error import json_requested, write_error_document
    except Exception:  # the interrupt broke that import too: the exit code still says it
        return
    if json_requested(sys.argv[1:]):
        write_error_document("interrupted", None, EXIT_INTERRUPTED)


def _say(text: str) -> None:
    try:
        if sys.stderr is not None:
            sys.stderr.write(text)
            sys.stderr.flush()
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    main()
