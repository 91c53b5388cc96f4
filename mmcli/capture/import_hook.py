"""An import hook that patches chosen modules right after they execute (for engine plugins)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
from collections.abc import Callable, Collection, Sequence
from types import ModuleType
from typing import Any

logger = logging.getLogger("mmcli.capture")


class PatchingLoader(importlib.abc.Loader):
    """Delegates to the real loader, then patches the module it executed."""

    def __init__(self, loader: importlib.abc.Loader, patch: Callable[[ModuleType], Any]) -> None:
        self._loader = loader
        self._patch = patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        try:
            self._patch(module)
        except Exception:  # never break the engine's import
            logger.exception("mmcli: could not patch %s", module.__name__)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class PatchingFinder(importlib.abc.MetaPathFinder):
    """Finds ``targets`` with the other finders and patches each once it has executed."""

    def __init__(self, targets: Collection[str], patch: Callable[[ModuleType], Any]) -> None:
        self._targets = targets
        self._patch = patch

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._targets:
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, PatchingFinder):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
            if spec is None:
                continue
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = PatchingLoader(spec.loader, self._patch)
            return spec
        return None
