"""Output helpers: stdout for data, stderr for progress and warnings, JSON without NaN."""

from __future__ import annotations

import json
import math
import sys
from enum import Enum
from functools import cache
from typing import Any

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


def emit_json(document: dict[str, Any]) -> None:
    """Print exactly one JSON document on stdout."""
    sys.stdout.write(json.dumps(jsonable(document), indent=2, allow_nan=False) + "\n")
    sys.stdout.flush()


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
