"""How the SGLang plugin reads the engine's calls: their arguments by name, and the modules
that imported a patched function by name."""

from __future__ import annotations

import inspect
import sys
from types import ModuleType

from mmcli.capture.calls import named_arguments, signature_of

__all__ = ["ints", "named_arguments", "rebind", "replace_argument", "signature_of"]


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
