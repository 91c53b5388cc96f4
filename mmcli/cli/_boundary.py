"""The one place where exceptions become ``error:``/``hint:`` lines and exit codes."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from mmcli.errors import EXIT_INTERNAL, MmcliError

P = ParamSpec("P")
R = TypeVar("R")


def report(message: str, hint: str | None = None) -> None:
    """Print one ``error:`` line (and one ``hint:`` line) on stderr, plain text, no markup."""
    first_line = " ".join(message.split())
    sys.stderr.write(f"error: {first_line}\n")
    if hint:
        sys.stderr.write(f"hint: {' '.join(hint.split())}\n")
    sys.stderr.flush()


def _translate(exc: BaseException) -> MmcliError | None:
    """Turn a library exception caused by bad input into an mmcli error, or None for a bug."""
    if isinstance(exc, MmcliError):
        return exc
    if isinstance(exc, json.JSONDecodeError):
        return MmcliError(
            f"invalid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            hint="check the file's syntax",
        )
    if isinstance(exc, OSError) and exc.filename is not None:
        reason = exc.strerror or type(exc).__name__
        return MmcliError(
            f"cannot read {exc.filename}: {reason}",
            hint="check the path exists and is a readable file",
        )
    if type(exc).__name__ == "SafetensorError":
        return MmcliError(
            f"not a valid safetensors file: {exc}",
            hint="the file may be truncated or not a safetensors file; try `mmcli inspect FILE`",
        )
    return None


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a command body so that no traceback reaches the user unless ``MMCLI_DEBUG=1``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            error = _translate(exc)
            if error is not None:
                report(error.message, error.hint)
                raise typer.Exit(error.exit_code) from None
            if os.environ.get("MMCLI_DEBUG") == "1":
                raise
            report(
                f"internal error (a bug in mmcli): {type(exc).__name__}: {exc}",
                "rerun with MMCLI_DEBUG=1 to see the traceback, and report it",
            )
            raise typer.Exit(EXIT_INTERNAL) from None

    return wrapper
