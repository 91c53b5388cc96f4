"""Opening an input file safely: a regular file, opened once without blocking, read bounded.

The path is checked before opening (so no device is ever opened) and the descriptor after (so
a file swapped in between is caught); ``O_NONBLOCK`` keeps a FIFO from blocking the open, and
``O_NOCTTY`` a terminal from becoming the controlling one. Reading through the descriptor,
never the path again, means a file renamed over the path mid-run is never read by mistake.

This module sits under every room (the dump reader and the KV config readers both use it) and
words nothing: it raises :class:`NotRegularFile` or the ``OSError`` met, and each caller turns
them into its own one-line :class:`~mmcli.errors.InputError`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Literal

#: ``directory``: the path names a directory; ``special``: a device, FIFO or socket;
#: ``swapped``: a regular file when checked, something else once opened.
Refusal = Literal["directory", "special", "swapped"]

#: Flags of every input open: read-only, never blocking (a FIFO), never a controlling terminal.
OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
)
#: The most bytes one ``os.read`` is asked for.
_CHUNK = 16 << 20


class NotRegularFile(Exception):
    """The path (or what was opened) is not a regular file; :attr:`kind` says what it is."""

    def __init__(self, kind: Refusal) -> None:
        super().__init__(kind)
        self.kind: Refusal = kind


def open_regular(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """Open ``path`` read-only and return ``(fd, fstat of fd)``; the caller closes ``fd``.

    Raises :class:`NotRegularFile` for anything but a regular file (checked on the path before
    opening and on the descriptor after), and the ``OSError`` of a failing ``stat``, ``open``
    or ``fstat`` (the descriptor is closed first).
    """
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise NotRegularFile("directory")
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile("special")
    fd = os.open(path, OPEN_FLAGS)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFile("swapped")
    return fd, st


def read_fd(fd: int, limit: int) -> bytes:
    """Everything left on ``fd``, but never more than ``limit + 1`` bytes: a result longer
    than ``limit`` means there was more (a file that grew after its size was checked)."""
    return read_bounded(lambda size: os.read(fd, size), limit)


def read_bounded(read: Callable[[int], bytes], limit: int) -> bytes:
    """What ``read(size)`` gives until it gives nothing, but never more than ``limit + 1``
    bytes, asked for at most :data:`_CHUNK` at a time (a large ``limit`` allocates nothing
    up front)."""
    chunks: list[bytes] = []
    done = 0
    while done <= limit:
        chunk = read(min(limit + 1 - done, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        done += len(chunk)
    return b"".join(chunks)
