"""Strict checks of values read from JSON or TOML, with errors that show what was written."""

from __future__ import annotations

import json
from typing import Any

from mmcli.errors import InputError


def type_name(value: Any) -> str:
    """A JSON value's type as Python names it (``str``, ``list``), or ``null``."""
    return "null" if value is None else type(value).__name__


def shown(value: Any) -> str:
    """``str '8'``, ``bool true``, ``null``: a value as the user wrote it, with its type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"bool {json.dumps(value)}"
    if isinstance(value, int) and value > MAX_VALUE:
        return f"a {len(str(value))}-digit int"
    text = json.dumps(value) if isinstance(value, str) else repr(value)
    return f"{type(value).__name__} {text}"


#: Larger than any size or count of a real model: a larger one is a typo or an attack (and
#: would overflow the float arithmetic of the plan).
MAX_VALUE = 2**40


def _too_large(value: int, where: str) -> InputError:
    return InputError(
        f"{where} is a {len(str(value))}-digit number, larger than any model has",
        hint=f"sizes and counts in a config are at most {MAX_VALUE:,}",
    )


def positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(
            f"{where} must be a positive integer, got {shown(value)}",
            hint="write a whole number greater than 0, without quotes",
        )
    if value > MAX_VALUE:
        raise _too_large(value, where)
    if value <= 0:
        raise InputError(
            f"{where} must be a positive integer, got {value}",
            hint="sizes and counts must be greater than 0",
        )
    return value


def string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(
            f"{where} must be a non-empty string, got {shown(value)}",
            hint="write it as a quoted string",
        )
    return value


def optional_int(text: dict[str, Any], key: str, where: str, *, minimum: int = 1) -> int | None:
    value = text.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(
            f"{where}: {key} must be an integer, got {shown(value)}",
            hint="write a whole number without quotes",
        )
    if value > MAX_VALUE:
        raise _too_large(value, f"{where}: {key}")
    if value < minimum:
        raise InputError(
            f"{where}: {key} must be at least {minimum}, got {value}",
            hint="sizes and counts cannot be zero or negative",
        )
    return value
