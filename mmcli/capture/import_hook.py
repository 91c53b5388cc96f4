"""One import hook for every engine plugin: a registry of modules to patch right after they run.

A plugin calls :func:`watch` with the module names (or name prefixes) it patches and its patch
function; the first call puts one :class:`PatchingFinder` on ``sys.meta_path``. When Python
imports a watched module, the finder asks the other finders for it and wraps its loader so
that, once the module has executed, every matching patch function runs on it. Modules already
imported are the plugin's to patch (see :func:`loaded`). :func:`forget` removes a plugin's
entries (and the finder once none are left).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

logger = logging.getLogger("mmcli.capture")

Patch = Callable[[ModuleType], Any]


@dataclass(frozen=True)
class Watch:
    """One plugin's entry: exact module names, name prefixes (``"vllm.model_executor."``)."""

    owner: str
    names: frozenset[str]
    prefixes: tuple[str, ...]
    patch: Patch

    def matches(self, fullname: str) -> bool:
        return fullname in self.names or fullname.startswith(self.prefixes)


class PatchingLoader(importlib.abc.Loader):
    """Delegates to the real loader, then runs the patches on the module it executed."""

    def __init__(self, loader: importlib.abc.Loader, patches: Sequence[Patch]) -> None:
        self._loader = loader
        self._patches = tuple(patches)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        for patch in self._patches:
            try:
                patch(module)
            except Exception:  # never break the engine's import
                logger.exception("mmcli: could not patch %s", module.__name__)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class PatchingFinder(importlib.abc.MetaPathFinder):
    """Finds watched modules with the other finders and patches each once it has executed."""

    def __init__(self) -> None:
        self.watches: list[Watch] = []
        self._busy = threading.local()

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        patches = [w.patch for w in list(self.watches) if w.matches(fullname)]
        if not patches or getattr(self._busy, "on", False):
            return None
        self._busy.on = True  # the finders asked below may ask the meta path again
        try:
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
                    spec.loader = PatchingLoader(spec.loader, patches)
                return spec
            return None
        finally:
            self._busy.on = False


_lock = threading.Lock()


def _finder() -> PatchingFinder | None:
    return next((f for f in sys.meta_path if isinstance(f, PatchingFinder)), None)


def watch(
    owner: str, patch: Patch, *, names: Collection[str] = (), prefixes: Sequence[str] = ()
) -> None:
    """Run ``patch`` on each module named in ``names`` (or under one of ``prefixes``) when it
    is imported from now on. Idempotent per ``owner``: a second call replaces the first."""
    with _lock:
        finder = _finder()
        if finder is None:
            finder = PatchingFinder()
            sys.meta_path.insert(0, finder)
        finder.watches[:] = [w for w in finder.watches if w.owner != owner]
        finder.watches.append(Watch(owner, frozenset(names), tuple(prefixes), patch))


def forget(owner: str) -> None:
    """Stop patching for ``owner``; the finder leaves ``sys.meta_path`` when nobody is left."""
    with _lock:
        finder = _finder()
        if finder is None:
            return
        finder.watches[:] = [w for w in finder.watches if w.owner != owner]
        if not finder.watches:
            sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, PatchingFinder)]


def watching(owner: str) -> bool:
    """Whether ``owner`` has entries in the registry."""
    finder = _finder()
    return finder is not None and any(w.owner == owner for w in finder.watches)


def loaded(names: Collection[str] = (), prefixes: Sequence[str] = ()) -> list[ModuleType]:
    """The already-imported modules a watch on ``names``/``prefixes`` would have patched."""
    found = []
    for name, module in sorted(sys.modules.items()):
        if isinstance(module, ModuleType) and (name in names or name.startswith(tuple(prefixes))):
            found.append(module)
    return found
