"""How the SGLang plugin reads the engine's calls: their arguments by name, and the modules
that imported a patched function by name."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


def signature_of(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def named_arguments(
    signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The call's arguments by name (a ``**kwargs`` parameter's entries included)."""
    if signature is None:
        return dict(kwargs)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return {}
    named = dict(bound.arguments)
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            named.update(named.pop(parameter.name, {}))
    return named


def replace_argument(
    signature: inspect.Signature, bound: inspect.BoundArguments, name: str, value: object
) -> None:
    """Pass ``value`` for the argument ``name`` (named, or inside ``**kwargs``)."""
    if name in bound.arguments:
        bound.arguments[name] = value
        return
    for parameter in signature.parameters.values():
        extra = bound.arguments.get(parameter.name)
        if parameter.kind is inspect.Parameter.VAR_KEYWORD and isinstance(extra, dict):
            if name in extra:
                extra[name] = value


def ints(value: object) -> list[int]:
    if not isinstance(value, list | tuple):
        return []
    return [int(v) for v in value if isinstance(v, int)]


def rebind(original: object, wrapped: object) -> None:
    """Replace ``original`` by ``wrapped`` in every imported ``sglang`` module holding it."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("sglang.") or not isinstance(module, ModuleType):
            continue
        try:
            names = [k for k, v in vars(module).items() if v is original]
            for key in names:
                setattr(module, key, wrapped)
        except Exception:
            continue
