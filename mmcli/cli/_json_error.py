"""The one JSON document a failed run prints on stdout when ``--format json`` was asked for.

Kept free of typer and rich so that ``mmcli/__main__.py`` can use it for a Ctrl-C that comes
while the CLI is still importing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from mmcli._version import __version__


def json_requested(argv: Sequence[str]) -> bool:
    """Whether the command line asks for ``--format json``, read as the parser reads it: the
    last ``--format`` wins, and nothing after ``--`` is an option. Used where no command body
    has parsed the options (an option-parsing error, a Ctrl-C while importing)."""
    wanted = False
    args = iter(argv)
    for arg in args:
        if arg == "--":
            break
        if arg == "--format":
            wanted = next(args, None) == "json"
        elif arg.startswith("--format="):
            wanted = arg.removeprefix("--format=") == "json"
    return wanted


def error_document(
    message: str, hint: str | None, exit_code: int, input_name: str | None = None
) -> dict[str, object]:
    """``{"mmcli_version", "error", "hint", "input", "exit_code"}``: the same keys for every
    command and every failure; ``hint`` and ``input`` are null where there is none."""
    return {
        "mmcli_version": __version__,
        "error": message,
        "hint": hint,
        "input": input_name,
        "exit_code": exit_code,
    }


def write_error_document(
    message: str, hint: str | None, exit_code: int, input_name: str | None = None
) -> None:
    """Print :func:`error_document` on stdout, indented as every other document. Best-effort:
    a stdout that cannot be written loses the document, never the exit code."""
    document = error_document(message, hint, exit_code, input_name)
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    stream = sys.stdout
    if stream is None:
        return
    try:
        stream.write(text)
        stream.flush()
    except UnicodeEncodeError:
        try:
            stream.write(json.dumps(document, indent=2) + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass
    except (OSError, ValueError):
        pass
