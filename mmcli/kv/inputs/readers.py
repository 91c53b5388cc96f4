"""Read JSON and TOML files, turning every way parsing can fail into one clear InputError."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mmcli.atomic import protect
from mmcli.errors import InputError
from mmcli.files import NotRegularFile, open_regular, read_bounded, read_fd
from mmcli.text import printable, quoted

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]


#: The largest config or map file read (64 MiB); anything larger is refused before it is read.
#: A 1,000,000-layer config with short entries is about 40 MB.
MAX_INPUT_BYTES = 64 << 20
_HINT_FILE = "give the path of a JSON or TOML file (or - for stdin)"
_HINT_BIG = f"configs and maps are at most {MAX_INPUT_BYTES >> 20} MiB"


def _too_big(name: str) -> InputError:
    return InputError(
        f"{printable(name)}: larger than {MAX_INPUT_BYTES >> 20} MiB"
        " (too large for a config or map file)",
        hint=_HINT_BIG,
    )


def _read_stdin() -> bytes:
    """stdin (``-``), at most :data:`MAX_INPUT_BYTES`; whatever stdin is (a pipe, a file, a
    device such as ``/dev/zero``), no more than that is ever read."""
    stream = sys.stdin.buffer if sys.stdin is not None else None
    if stream is None:
        raise InputError("-: stdin is closed", hint=_HINT_FILE)
    try:
        data = stream.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise InputError(f"-: cannot read stdin: {exc.strerror}", hint=_HINT_FILE) from None
    if len(data) > MAX_INPUT_BYTES:
        raise _too_big("-")
    return data


def _names_stdin(name: str) -> bool:
    """Whether ``name`` (``/dev/stdin``, ``/dev/fd/0``) is the pipe (or socket) this process
    reads as stdin: read as ``-`` is. Any other device or FIFO stays refused (a stdin of
    ``/dev/null`` does not make ``/dev/null`` a config), and a regular file is read by path."""
    try:
        st, own = os.stat(name), os.fstat(0)
    except OSError:
        return False
    piped = stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)
    return piped and (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def read_bytes(path: Path) -> bytes:
    """A config or map file's bytes: ``-`` is stdin (and so is a path naming the pipe that is
    stdin, such as ``/dev/stdin``); anything else must be a regular file.

    The file is opened by :func:`mmcli.files.open_regular`, as the dump reader opens a dump:
    the path is checked before opening (so no device is ever opened) and the descriptor after
    (so a file swapped in between is caught); ``O_NONBLOCK`` keeps a FIFO from blocking the
    open. Devices, FIFOs, sockets and directories are refused with one line naming the path,
    and nothing over :data:`MAX_INPUT_BYTES` is read.
    """
    name = os.fspath(path)
    if name == "-" or _names_stdin(name):
        return _read_stdin()
    fd, st = _open_input(name, _HINT_FILE)
    protect(name)  # an input: --emit-map may not replace it
    try:
        if st.st_size > MAX_INPUT_BYTES:
            raise _too_big(name)
        data = read_fd(fd, MAX_INPUT_BYTES)
    except OSError as exc:
        raise _os_error(name, exc) from None
    finally:
        os.close(fd)
    if len(data) > MAX_INPUT_BYTES:  # grew since it was opened
        raise _too_big(name)
    return data


def _open_input(name: str, hint: str) -> tuple[int, os.stat_result]:
    """``name`` opened by :func:`mmcli.files.open_regular`, each refusal worded as one line
    naming the path (``hint`` for an empty path or a file that is not regular)."""
    if not name:
        raise InputError("empty path ''", hint=hint)
    try:
        return open_regular(name)
    except NotRegularFile as exc:
        raise InputError(
            f"cannot read {printable(name)}: {_REFUSED[exc.kind]}", hint=hint
        ) from None
    except OSError as exc:
        raise _os_error(name, exc) from None


#: How each refusal of :func:`mmcli.files.open_regular` reads after ``cannot read PATH:``.
_REFUSED = {
    "directory": "Is a directory",
    "special": "not a regular file (a device, FIFO or socket)",
    "swapped": "not a regular file",  # a regular file when checked, then swapped
}


def _os_error(name: str, exc: OSError) -> InputError:
    """An OSError met opening or reading ``name``, as one clean line."""
    reason = exc.strerror or type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return InputError(
            f"cannot read {printable(name)}: {reason}",
            hint="check the path exists and is a readable file",
        )
    if isinstance(exc, PermissionError):
        return InputError(
            f"cannot read {printable(name)}: {reason}",
            hint="check the file's permissions (and those of the directories above it)",
        )
    return InputError(f"cannot read {printable(name)}: {reason}", hint=_HINT_FILE)


def read_text(path: Path) -> str:
    """A config or map file's text (UTF-8, a leading BOM allowed), refusing a binary
    (non-UTF-8) file with a clear error."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{printable(os.fspath(path))}: not a text file (byte {exc.start} is not UTF-8)",
            hint="configs and maps are UTF-8 JSON or TOML files",
        ) from None


def syntax_problem(exc: BaseException) -> str:
    """What a parser's non-syntax failure means: nesting past the recursion limit, or an
    integer past Python's digit limit (both raised outside the parsers' own error types)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    text = str(exc)
    if text.startswith("Exceeds the limit"):
        return "an integer with too many digits"
    return text


def parse_json(
    path: Path,
    text: str,
    *,
    hint: str = "check the file's syntax",
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """``json.loads`` with every way it can fail (syntax, nesting depth, huge integers) turned
    into one InputError naming the file."""
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook)
    except InputError:  # raised by object_pairs_hook; already names the problem
        raise
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: invalid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            hint=hint,
        ) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path}: invalid JSON: {syntax_problem(exc)}", hint=hint) from None


def parse_toml(path: Path, text: str) -> dict[str, Any]:
    """``tomllib.loads`` with its failures (syntax, nesting depth) as one InputError."""
    try:
        doc: dict[str, Any] = tomllib.loads(text)
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError is a ValueError
        raise InputError(
            f"{path}: invalid TOML: {syntax_problem(exc)}", hint="check the file's syntax"
        ) from None
    return doc


def unique_keys(path: Path) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """An ``object_pairs_hook`` refusing a key repeated in one JSON object (JSON itself would
    silently keep the last value)."""

    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise InputError(
                        f"{printable(os.fspath(path))}: the key {quoted(key)} appears more than "
                        "once in one object",
                        hint="give each key once (JSON would silently keep only the last)",
                    )
                seen.add(key)
        return out

    return build


def read_json_or_toml(path: Path) -> Any:
    """Parse a file as TOML when its suffix is ``.toml``, else as JSON (repeated keys in one
    object refused, as TOML does)."""
    text = read_text(path)
    if path.suffix.lower() == ".toml":
        return parse_toml(path, text)
    return parse_json(
        path,
        text,
        hint="check the file's syntax (TOML files need the .toml suffix)",
        object_pairs_hook=unique_keys(path),
    )


#: The hint of a log that cannot be read.
_HINT_LOG = "give the path of the engine's log file (or - for stdin)"


def read_head(path: Path, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of a log, and whether there was more: ``-`` (or a path naming
    the pipe that is stdin) reads stdin; anything else must be a regular file, opened as
    :func:`read_bytes` opens one (never blocking on a FIFO). Nothing is allocated up front:
    a large ``limit`` costs only what the file holds."""
    name = os.fspath(path)
    if name == "-" or _names_stdin(name):
        stream = sys.stdin.buffer if sys.stdin is not None else None
        if stream is None:
            raise InputError("-: stdin is closed", hint=_HINT_LOG)
        try:
            data = read_bounded(stream.read, limit)
        except OSError as exc:
            raise InputError(f"-: cannot read stdin: {exc.strerror}", hint=_HINT_LOG) from None
    else:
        fd, _ = _open_input(name, _HINT_LOG)
        try:
            data = read_fd(fd, limit)
        except OSError as exc:
            raise _os_error(name, exc) from None
        finally:
            os.close(fd)
    return data[:limit], len(data) > limit
