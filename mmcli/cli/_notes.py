"""Third-party warnings while a command runs: kept out of its report, shown once as notes.

torch speaks for itself. A CUDA build on a machine without a GPU warns when asked whether
CUDA is available ("CUDA initialization: Found no NVIDIA driver on your system", a Python
warning), and logs "No CUDA runtime is found, using CUDA_HOME=…" when
``torch.utils.benchmark`` imports its C++ extension tools (the ``torch`` logger, whose own
handler writes to stderr). Python's and torch's handlers would print them where they
happen, with a file and a line, amid the command's progress and report.
:func:`third_party_notes` records them instead, and when the block ends prints each
distinct one once on stderr: ``note: UserWarning: …`` or ``note: torch.utils…: …``.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from mmcli.cli._output import stderr

#: The loggers whose records become notes (each keeps its own handlers otherwise).
LOGGERS = ("torch",)


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def third_party_notes() -> Iterator[None]:
    """Record Python warnings, and the ``torch`` logger's warnings and errors, raised in the
    block; print each distinct one once as a ``note:`` line on stderr when it ends.

    Nothing is printed when the block raises: the command's error is what the user needs.
    """
    recorder = _Recorder()
    loggers = [logging.getLogger(name) for name in LOGGERS]
    saved = [(logger.handlers, logger.propagate) for logger in loggers]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for logger in loggers:
            logger.handlers, logger.propagate = [recorder], False
        try:
            yield
        finally:
            for logger, (handlers, propagate) in zip(loggers, saved, strict=True):
                logger.handlers, logger.propagate = handlers, propagate
    notes = [f"{w.category.__name__}: {w.message}" for w in caught]
    notes += [f"{r.name}: {r.getMessage()}" for r in recorder.records]
    err = stderr()
    for note in dict.fromkeys(" ".join(note.split()) for note in notes):
        err.print(f"note: {note}", markup=False, highlight=False)
