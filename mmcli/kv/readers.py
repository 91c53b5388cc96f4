"""Read JSON and TOML files, turning every way parsing can fail into one clear InputError."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mmcli.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]


def read_text(path: Path) -> str:
    """A config or map file's text, refusing a binary (non-UTF-8) file with a clear error."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: not a text file (byte {exc.start} is not UTF-8)",
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


def read_json_or_toml(path: Path) -> Any:
    """Parse a file as TOML when its suffix is ``.toml``, else as JSON."""
    text = read_text(path)
    if path.suffix.lower() == ".toml":
        return parse_toml(path, text)
    return parse_json(path, text, hint="check the file's syntax (TOML files need the .toml suffix)")
