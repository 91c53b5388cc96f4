"""Names a package exports but imports on first use (``import mmcli`` and the CLI stay light):
one ``__getattr__`` for every package that has such names."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_getattr(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name in ``names`` is imported from its
    module on first use and kept in the package; a module of "" is the subpackage
    ``package.name`` itself."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if module:
            value = getattr(importlib.import_module(module), name)
        else:
            value = importlib.import_module(f"{package}.{name}")
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
