"""Atomic file output: every file mmcli writes appears whole or not at all.

:func:`atomic_write` only ever replaces a regular file (never ``/dev/stdout``, a FIFO or
another device; the null device is written, not replaced), never a file this process read
as input (see :func:`protect`), and reports a failed write (a full disk, a read-only file
system) as one ``cannot write PATH`` line (exit 2).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from mmcli.errors import InputError
from mmcli.text import printable

#: Longest file name (in bytes) kept whole in a temporary name: with the dot, the separator,
#: mkstemp's 8 random characters and ``.tmp`` it stays under NAME_MAX (255).
_MAX_PREFIX_NAME = 200

#: Files read as input in this process (absolute paths); :func:`atomic_write` refuses them.
_inputs: set[str] = set()


def protect(path: str | os.PathLike[str]) -> None:
    """Record ``path`` as an input: no later :func:`atomic_write` may replace that file (by
    any name: a hard link or a symbolic link to it is the same file)."""
    _inputs.add(os.path.abspath(os.fspath(path)))


def _same_file(st: os.stat_result, other: str) -> bool:
    try:
        o = os.stat(other)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (o.st_dev, o.st_ino)


def _temp_prefix(name: str) -> str:
    if len(os.fsencode(name)) <= _MAX_PREFIX_NAME:
        return f".{name}."
    return f".mmcli-{hashlib.sha256(os.fsencode(name)).hexdigest()[:16]}."


def _write_hint(code: int | None) -> str:
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return "free some space on that disk, or write the file somewhere else"
    if code == errno.EROFS:
        return "the file system is read-only; write the file somewhere else"
    if code in (errno.EACCES, errno.EPERM):
        return "check that you may write in that directory, or write the file somewhere else"
    return "check the directory exists and is writable, or write the file somewhere else"


#: Directories of device and process files: nothing there is ever replaced.
_SPECIAL = ("/dev/", "/proc/", "/sys/")


def is_null_device(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is the null device (``/dev/null``, or a link to it): writing there is
    how one checks a command without keeping its output, so it is the one device written."""
    if os.name != "posix":
        return False
    try:
        st, null = os.stat(path), os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


def _check_target(path: Path) -> None:
    """Refuse a target that is not a regular file (or the null device), or that is one of
    this run's inputs."""
    if is_null_device(path):
        return
    shown = printable(str(path))
    if os.name == "posix" and any(
        p.startswith(_SPECIAL) for p in (os.path.abspath(path), os.path.realpath(path))
    ):
        raise InputError(
            f"cannot write {shown}: not a regular file (a device or a process file)",
            hint="mmcli replaces the file it writes; give the path of a regular or new file",
        )
    try:
        st = os.stat(path)
    except OSError:
        return  # a new file (or one that cannot be looked at: creating it will say why)
    if stat.S_ISDIR(st.st_mode):
        raise InputError(
            f"cannot write {shown}: is a directory", hint="give the path of a file to write"
        )
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"cannot write {shown}: not a regular file (a device, FIFO or socket)",
            hint="mmcli replaces the file it writes; give the path of a regular or new file",
        )
    for used in sorted(_inputs):
        if _same_file(st, used):
            raise InputError(
                f"cannot write {shown}: it is an input of this run ({printable(used)})",
                hint="inputs are never modified; write the output to another file",
            )


def check_target(path: Path) -> None:
    """Refuse, before any work is done, a path :func:`atomic_write` would refuse: one that is
    not a regular or new file, one of this run's inputs, or one in a missing directory."""
    _check_target(path)
    if is_null_device(path):
        return
    real = Path(os.path.realpath(path)) if os.path.islink(path) else path
    directory = real.parent if str(real.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(
            f"cannot write {printable(str(path))}: {printable(str(directory))} is not a directory",
            hint="create the directory first, or choose another path",
        )


@contextmanager
def atomic_write(path: Path) -> Iterator[BinaryIO]:
    """Yield a binary file that replaces ``path`` only once it is complete and on disk.

    The data goes to a temporary file in the same directory (so the final rename stays on one
    file system), is flushed and fsync'ed, then renamed over ``path``. On any exception,
    interrupts included, the temporary file is removed and ``path`` is left as it was.
    An existing ``path`` must be a regular file that is not an input (:func:`protect`); an
    OSError while writing (``ENOSPC``, ``EROFS``, ...) becomes one InputError naming ``path``.
    The null device is written as it is (there is nothing to replace).
    """
    _check_target(path)
    if is_null_device(path):
        with open(os.devnull, "wb") as null:
            yield null
        return
    if os.path.islink(path):  # keep the link: replace the file it points to
        path = Path(os.path.realpath(path))
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(
            f"cannot write {printable(str(path))}: {printable(str(directory))} is not a directory",
            hint="create the directory first, or choose another path",
        )
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=_temp_prefix(path.name), suffix=".tmp")
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _cannot_write(path, exc) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _cannot_write(path: Path, exc: OSError) -> InputError:
    reason = exc.strerror or type(exc).__name__
    return InputError(f"cannot write {printable(str(path))}: {reason}", hint=_write_hint(exc.errno))
