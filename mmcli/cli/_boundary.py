"""The one place where exceptions become ``error:``/``hint:`` lines and exit codes.

With ``--format json`` a failure is also one JSON document on stdout (see
:mod:`mmcli.cli._json_error`): :func:`fail` prints both, for every exit code but 0 and 1,
whose documents are the commands' own.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import sys
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

import typer

from mmcli.cli._json_error import json_requested, write_error_document
from mmcli.cli._output import OutputFormat, document_begun
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


@dataclass
class _Run:
    """The command body now running, as its options were parsed: whether it prints JSON,
    and what its input is called. Empty until a body starts (an option-parsing error)."""

    as_json: bool | None = None
    command: Callable[..., Any] | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


_run = _Run()


def begin_run() -> None:
    """Forget the previous run (a new command line is about to be parsed)."""
    global _run
    _run = _Run()
    document_begun(reset=True)


def fail(
    message: str,
    hint: str | None,
    exit_code: int,
    *,
    argv: Sequence[str] | None = None,
    input_name: str | None = None,
) -> None:
    """Report a run that could not finish: the ``error:``/``hint:`` lines on stderr and, when
    JSON was asked for and no document was begun, the error document on stdout.

    Whether JSON was asked for comes from the parsed ``--format`` once a command body has
    started, else from the command line (``argv``, ``sys.argv`` by default).
    """
    report(message, hint)
    as_json = _run.as_json
    if as_json is None:
        as_json = json_requested(sys.argv[1:] if argv is None else argv)
    if not as_json or document_begun():
        return
    if input_name is None and _run.command is not None:
        input_name = _input_name(_run.command, _run.arguments)
    write_error_document(
        _one_line(message),
        _one_line(hint) if hint else None,
        exit_code,
        None if input_name is None else _one_line(input_name),
    )


def _input_name(command: Callable[..., Any], arguments: dict[str, Any]) -> str | None:
    """The command's input as given (its positional arguments) when there is exactly one."""
    try:
        hints = typing.get_type_hints(command, include_extras=True)
    except Exception:  # an annotation that does not resolve: no name, not a second failure
        return None
    names: list[str] = []
    for name, hint in hints.items():
        metadata = getattr(hint, "__metadata__", ())
        if name not in arguments or not any(
            isinstance(m, typer.models.ArgumentInfo) for m in metadata
        ):
            continue
        value = arguments[name]
        values = value if isinstance(value, list | tuple) else [value]
        names += [os.fsdecode(v) if isinstance(v, os.PathLike) else str(v) for v in values]
    return names[0] if len(names) == 1 else None


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


def _read_path(exc: BaseException) -> str | None:
    """The file an ``OSError`` failed to read (not one mmcli was writing), else None."""
    if not isinstance(exc, OSError) or exc.filename is None:
        return None
    if _written_path(exc.__traceback__) is not None or exc.errno in _WRITE_ERRNOS:
        return None
    return os.fsdecode(exc.filename) if isinstance(exc.filename, str | bytes) else str(exc.filename)


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
        global _run
        _run = _Run(kwargs.get("output_format") is OutputFormat.json, fn, dict(kwargs))
        document_begun(reset=True)
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            error = _translate(exc)
            if error is not None:
                fail(error.message, error.hint, error.exit_code, input_name=_read_path(exc))
                raise typer.Exit(error.exit_code) from None
            if os.environ.get("MMCLI_DEBUG") == "1":
                raise
            fail(
                f"internal error (a bug in mmcli): {type(exc).__name__}: {exc}",
                "rerun with MMCLI_DEBUG=1 to see the traceback, and report it",
                EXIT_INTERNAL,
            )
            raise typer.Exit(EXIT_INTERNAL) from None

    return wrapper
