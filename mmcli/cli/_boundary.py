"""The one place where exceptions become ``error:``/``hint:`` lines and exit codes."""

from __future__ import annotations

import errno
import functools
import json
import os
import sys
from collections.abc import Callable
from types import TracebackType
from typing import ParamSpec, TypeVar

import typer

from mmcli.errors import EXIT_INTERNAL, MmcliError
from mmcli.text import printable

P = ParamSpec("P")
R = TypeVar("R")


#: The longest error or hint line printed: an input quoted whole (a 100,000-character GPU
#: name, an 800 KB layer type) is cut in the middle.
LINE_LIMIT = 2000


def _one_line(text: str) -> str:
    """``text`` as one terminal line: whitespace runs (newlines included) become one space,
    whatever else is not printable (ESC, C1 controls, bidi overrides, lone surrogates) an
    escape, and at most :data:`LINE_LIMIT` characters, whatever the input quoted."""
    return printable(" ".join(text.split()), LINE_LIMIT)


def report(message: str, hint: str | None = None) -> None:
    """Print one ``error:`` line (and one ``hint:`` line) on stderr, plain text, no markup.

    The lines are filtered here, whichever command words them (see :func:`_one_line`).
    Best-effort: a stderr that is closed or cannot be written loses the lines, never the
    exit code.
    """
    text = f"error: {_one_line(message)}\n"
    if hint:
        text += f"hint: {_one_line(hint)}\n"
    stream = sys.stderr
    if stream is None:  # started with stderr closed
        return
    try:
        stream.write(text)
        stream.flush()
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
            stream.flush()
        except (OSError, ValueError):
            pass
    except (OSError, ValueError):
        pass


#: Errors that only writing can cause.
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def _written_path(tb: TracebackType | None) -> str | None:
    """The file mmcli was writing when an error went through ``atomic_write``, else None."""
    path = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "atomic_write" and frame.f_globals.get("__name__") == (
            "mmcli.atomic"
        ):
            path = frame.f_locals.get("path")
        tb = tb.tb_next
    return None if path is None else str(path)


def _write_hint(code: int | None) -> str:
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return "free some space on that disk, or write the file somewhere else"
    if code == errno.EROFS:
        return "the file system is read-only; write the file somewhere else"
    if code in (errno.EACCES, errno.EPERM):
        return "check that you may write in that directory, or write the file somewhere else"
    return "check the directory exists and is writable, or write the file somewhere else"


def _os_error(exc: OSError) -> MmcliError | None:
    """A failed read or write of a named file: bad input (or a bad place to write), not a bug."""
    reason = exc.strerror or type(exc).__name__
    written = _written_path(exc.__traceback__)
    if written is not None or exc.errno in _WRITE_ERRNOS:
        target = written if written is not None else exc.filename
        where = f" {target}" if target is not None else " a file"
        return MmcliError(f"cannot write{where}: {reason}", hint=_write_hint(exc.errno))
    if exc.filename is not None:
        return MmcliError(
            f"cannot read {exc.filename}: {reason}",
            hint="check the path exists and is a readable file",
        )
    return None


def _translate(exc: BaseException) -> MmcliError | None:
    """Turn a library exception caused by bad input into an mmcli error, or None for a bug."""
    if isinstance(exc, MmcliError):
        return exc
    if isinstance(exc, json.JSONDecodeError):
        return MmcliError(
            f"invalid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            hint="check the file's syntax",
        )
    if isinstance(exc, OSError):
        return _os_error(exc)
    if isinstance(exc, OverflowError) or (
        isinstance(exc, ValueError) and "integer string conversion" in str(exc)
    ):
        # A number from the input too large for a float or for int(): input no command should
        # have let through, but input all the same, not a crash.
        return MmcliError(
            f"a number in the input is too large to work with ({exc})",
            hint="check the sizes and counts given, in the options and in the input files",
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
