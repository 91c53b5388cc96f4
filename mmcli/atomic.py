"""Atomic file output: every file mmcli writes appears whole or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from mmcli.errors import InputError


@contextmanager
def atomic_write(path: Path) -> Iterator[BinaryIO]:
    """Yield a binary file that replaces ``path`` only once it is complete and on disk.

    The data goes to a temporary file in the same directory (so the final rename stays on one
    file system), is flushed and fsync'ed, then renamed over ``path``. On any exception,
    interrupts included, the temporary file is removed and ``path`` is left as it was.
    """
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(
            f"cannot write {path}: {directory} is not a directory",
            hint="create the directory first, or choose another path",
        )
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
