"""An input file opened once, without blocking, and read only with positioned reads.

The opening is :func:`mmcli.files.open_regular`'s (shared with the config readers): the path
is checked before opening (so no device is ever opened) and the descriptor after (so a file
swapped in between is caught); ``O_NONBLOCK`` keeps a FIFO from blocking the open. Reading
through the descriptor, never the path again, means a file renamed over the path mid-run (a
FIFO, another dump) is never read by mistake.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path

from mmcli.errors import InputError
from mmcli.files import NotRegularFile, open_regular
from mmcli.text import printable

_HINT_PATH = "give the path of a .safetensors file"


class FileSource:
    """A regular file opened once, read only with positioned reads (``os.pread``).

    The descriptor is closed by :meth:`close`, or when the object is collected.
    """

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self.size = size
        self._fd = fd
        self._closer = weakref.finalize(self, os.close, fd)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return not self._closer.alive

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        self._closer()

    def read(self, offset: int, size: int) -> bytes:
        """Exactly ``size`` bytes at ``offset`` (fewer only at the end of the file)."""
        chunks: list[bytes] = []
        done = 0
        while done < size:
            chunk = self._pread(min(size - done, 1 << 30), offset + done)
            if not chunk:
                break
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)

    def read_into(self, view: memoryview, offset: int) -> int:
        """Fill ``view`` with the bytes at ``offset``; the number of bytes read (short only at
        the end of the file)."""
        done = 0
        size = len(view)
        while done < size:
            got = self._preadv(view[done : done + (1 << 30)], offset + done)
            if not got:
                break
            done += got
        return done

    def _pread(self, size: int, offset: int) -> bytes:
        if self.closed:
            raise InputError(f"{printable(str(self.path))}: read after close", hint="reopen it")
        try:
            return os.pread(self._fd, size, offset)
        except OSError as exc:
            raise _os_error(self.path, exc) from None

    def _preadv(self, view: memoryview, offset: int) -> int:
        if self.closed:
            raise InputError(f"{printable(str(self.path))}: read after close", hint="reopen it")
        try:
            return os.preadv(self._fd, [view], offset)
        except OSError as exc:
            raise _os_error(self.path, exc) from None


def _os_error(path: Path, exc: OSError) -> InputError:
    """An OSError met while opening or reading ``path``, as one clean line."""
    reason = exc.strerror or type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{printable(str(path))}: no such file", hint="check the path")
    if isinstance(exc, PermissionError):
        return InputError(
            f"{printable(str(path))}: cannot read: {reason}",
            hint="check the file's permissions (and those of the directories above it)",
        )
    return InputError(
        f"{printable(str(path))}: cannot read: {reason}",
        hint="check the path and any symbolic links on it",
    )


def open_file(path: str | os.PathLike[str]) -> FileSource:
    """Open ``path`` for positioned reads, refusing anything but a regular file.

    The path is checked before opening (so no device is ever opened) and the descriptor after
    (so a file swapped in between is caught); ``O_NONBLOCK`` keeps a FIFO from blocking (see
    :func:`mmcli.files.open_regular`).
    """
    if not os.fspath(path):  # Path("") would be "."
        raise InputError("empty path ''", hint=_HINT_PATH)
    path = Path(path)
    try:
        fd, st = open_regular(path)
    except NotRegularFile as exc:
        what = "is a directory, not a safetensors file" if exc.kind == "directory" else None
        raise InputError(
            f"{printable(str(path))}: {what or 'not a regular file'}", hint=_HINT_PATH
        ) from None
    except OSError as exc:
        raise _os_error(path, exc) from None
    return FileSource(path, fd, st.st_size)
