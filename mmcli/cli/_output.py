"""Output helpers: stdout for data, stderr for progress and warnings, JSON without NaN.

:func:`guarded_streams` is what every write to stdout and stderr goes through while a command
runs: text the stream's encoding cannot hold comes out as backslash escapes, a stdout that
cannot be written raises :class:`OutputClosed` or :class:`OutputFailed` (never an ``OSError``
that a command would take for its own), and stderr is best-effort.
"""

from __future__ import annotations

import errno
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from enum import Enum
from functools import cache
from itertools import islice, repeat
from json.encoder import encode_basestring_ascii
from typing import IO, Any, TextIO, cast

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class OutputFormat(str, Enum):
    """How a command prints its result."""

    table = "table"
    json = "json"


def _console(*, stderr: bool) -> Console:
    console = Console(stderr=stderr, highlight=False)
    # Word-wrap long lines for a person at a terminal; keep them whole in a pipe or a file,
    # where wrapping at an assumed 80 columns only breaks grep.
    console.soft_wrap = not console.is_terminal
    return console


@cache
def stdout() -> Console:
    """The console for data (tables and reports)."""
    return _console(stderr=False)


@cache
def stderr() -> Console:
    """The console for progress, warnings and hints."""
    return _console(stderr=True)


def jsonable(value: Any) -> Any:
    """Replace NaN and infinities (which JSON cannot hold) by None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


#: A list this long (a 1,000,000-layer plan) is printed one compact element per line.
_LONG_LIST = 10_000
_ROW = json.JSONEncoder(allow_nan=False, separators=(", ", ": "))

#: Whether this run has begun a JSON document on stdout (see :func:`document_begun`).
_begun = [False]


def begin_document() -> None:
    """Note that a document is going to stdout other than through :func:`emit_json`."""
    _begun[0] = True


def document_begun(*, reset: bool = False) -> bool:
    """Whether :func:`emit_json` has begun writing a document since the last reset, so that a
    run that fails after (or while) printing its document never prints a second one."""
    begun = _begun[0]
    if reset:
        _begun[0] = False
    return begun


def emit_json(document: dict[str, Any]) -> None:
    """Print exactly one JSON document on stdout, indented by two spaces.

    Written as it is encoded, in pieces, so a huge document is never held twice in memory;
    the elements of a list of :data:`_LONG_LIST` or more items (a plan's ``layers`` for a
    1,000,000-layer config) are printed one per line by the C encoder, which is an order of
    magnitude faster than the indenting one, or by the list itself when it has a
    ``json_rows()`` method that yields each element's compact JSON.
    """
    batch: list[str] = []
    size = 0
    for piece in _encode(document, ""):
        batch.append(piece)
        size += len(piece)
        if size >= 1 << 20:  # write about a megabyte at a time
            _begun[0] = True
            sys.stdout.write("".join(batch))
            batch.clear()
            size = 0
    batch.append("\n")
    _begun[0] = True
    sys.stdout.write("".join(batch))
    sys.stdout.flush()


def _encode(value: Any, pad: str) -> Iterator[str]:
    """``json.dumps(jsonable(value), indent=2, allow_nan=False)`` at indentation ``pad``, in
    pieces (long lists as one compact element per line, at any depth)."""
    inner = pad + "  "
    texts: Iterator[str] | None = None
    rows = getattr(value, "json_rows", None)  # a list that can write its own rows
    if rows is not None:
        if len(value) >= _LONG_LIST:
            texts = rows()
        else:
            value = list(value)
    elif isinstance(value, list | tuple) and len(value) >= _LONG_LIST:
        texts = _compact(value)
    if texts is not None:
        between = ",\n" + inner
        chunk = list(islice(texts, 4096))
        yield "[\n" + inner + between.join(chunk)
        while chunk := list(islice(texts, 4096)):
            yield between + between.join(chunk)
        yield f"\n{pad}]"
    elif isinstance(value, dict) and value:
        yield "{"
        sep = "\n"
        for key, item in value.items():
            yield f"{sep}{inner}{json.dumps(str(key))}: "
            yield from _encode(item, inner)
            sep = ",\n"
        yield f"\n{pad}}}"
    elif isinstance(value, list | tuple) and value:
        yield "["
        sep = "\n"
        for item in value:
            yield sep + inner
            yield from _encode(item, inner)
            sep = ",\n"
        yield f"\n{pad}]"
    else:  # a scalar, or an empty list or dict
        yield json.dumps(jsonable(value), allow_nan=False)


def _compact(items: list[Any] | tuple[Any, ...]) -> Iterator[str]:
    """Each element as compact JSON: strings in C (a plan's million layer names)."""
    if all(map(isinstance, items, repeat(str))):
        return map(encode_basestring_ascii, items)
    return (_compact_one(item) for item in items)


def _compact_one(item: Any) -> str:
    try:
        return _ROW.encode(item)
    except (ValueError, TypeError):  # NaN or infinity (or a non-str key): clean it first
        return _ROW.encode(jsonable(item))


def progress(*, enabled: bool) -> Progress:
    """A Rich progress bar on stderr; disabled (prints nothing) in JSON or quiet mode."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=stderr(),
        transient=True,
        disable=not enabled,
    )


# -- the streams ----------------------------------------------------------------------------


class OutputClosed(BaseException):
    """stdout's reader went away (a closed pipe, as with ``| head -1``): stop, say nothing.

    A ``BaseException``, like ``KeyboardInterrupt``: no command's ``except Exception`` may take
    it for a problem with its input.
    """


class OutputFailed(BaseException):
    """stdout cannot be written: a full disk, an I/O error, a closed or read-only descriptor."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error

    @property
    def reason(self) -> str:
        return self.error.strerror or type(self.error).__name__


class _Guarded:
    """A stream (text, or the binary ``buffer`` under it) whose write failures go to
    ``on_error``; everything else is the wrapped stream's.

    Text is encoded here and written to the binary buffer until all of it is taken: Python's
    own text layer ignores a short write, which is how a pipe whose reader left mid-write
    reports it, and would drop the rest silently (exit 0) instead of failing on the next write.
    """

    def __init__(self, inner: IO[Any], on_error: Callable[[IO[Any], OSError], None]) -> None:
        self._inner = inner
        self._on_error = on_error
        binary = getattr(inner, "buffer", None)
        self._text = isinstance(getattr(inner, "encoding", None), str)
        self._binary: Any = binary if self._text and binary is not None else None
        if self._binary is not None:
            self.flush()  # what the text layer holds goes out before what comes through here

    def write(self, data: Any) -> int:
        try:
            if self._binary is not None and isinstance(data, str):
                errors = getattr(self._inner, "errors", None) or "strict"
                self._write_all(
                    self._binary, data.encode(getattr(self._inner, "encoding", "utf-8"), errors)
                )
                if "\n" in data and getattr(self._inner, "line_buffering", False):
                    self._binary.flush()
                return len(data)
            if not self._text and isinstance(data, bytes | bytearray | memoryview):
                self._write_all(self._inner, bytes(data))
                return len(data)
            return int(self._inner.write(data))
        except OSError as exc:
            self._on_error(self._inner, exc)
            return len(data)

    @staticmethod
    def _write_all(stream: Any, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = stream.write(view)
            if not written:  # a blocking descriptor takes nothing only when its reader is gone
                raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))
            view = view[written:]

    def writelines(self, lines: Iterable[Any]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._inner.flush()
        except OSError as exc:
            self._on_error(self._inner, exc)

    @property
    def buffer(self) -> _Guarded:
        return _Guarded(self._inner.buffer, self._on_error)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _stdout_error(stream: IO[Any], exc: OSError) -> None:
    if exc.errno == errno.EPIPE:
        raise OutputClosed() from exc
    raise OutputFailed(exc) from exc


def _stderr_error(stream: IO[Any], exc: OSError) -> None:
    """stderr is for people; when it cannot be written, the exit code still says it all."""
    silence(stream)


def silence(stream: IO[Any] | None) -> None:
    """Point the stream's descriptor at /dev/null, so that the data still buffered in it (and
    Python's own flush at exit) goes nowhere instead of failing again."""
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError, AttributeError):
        return
    if fd < 0:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(devnull, fd)
    except OSError:
        pass
    finally:
        os.close(devnull)


def _escaping(stream: Any) -> Callable[[], None]:
    """Make ``stream`` write what its encoding cannot hold (lone surrogates from a file name,
    ``→`` under ``PYTHONIOENCODING=ascii``) as backslash escapes; return the undo."""
    reconfigure = getattr(stream, "reconfigure", None)
    errors = getattr(stream, "errors", None)
    if not callable(reconfigure) or not isinstance(errors, str):
        return lambda: None
    try:
        reconfigure(errors="backslashreplace")
    except (OSError, ValueError):
        return lambda: None

    def undo() -> None:
        try:
            reconfigure(errors=errors)
        except (OSError, ValueError):
            pass

    return undo


@contextmanager
def guarded_streams() -> Iterator[None]:
    """Run a command with stdout and stderr guarded (see the module's docstring).

    On leaving, stdout is flushed (so that a failure in the last write is raised here, not in
    Python's flush at exit) and the streams are put back as they were.
    """
    out, err = sys.stdout, sys.stderr
    undo = [_escaping(out), _escaping(err)]
    sys.stdout = cast(TextIO, _Guarded(out, _stdout_error))
    sys.stderr = cast(TextIO, _Guarded(err, _stderr_error))
    try:
        yield
        sys.stdout.flush()
    finally:
        sys.stdout, sys.stderr = out, err
        for step in undo:
            step()
