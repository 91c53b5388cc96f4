"""Stand-in for ``sglang.srt.plugins`` (0.5.11+): general plugins are the entry points of the
group ``sglang.srt.plugins``, each called once per process by ``load_plugins()`` (which the
scheduler process runs first thing), ``SGLANG_PLUGINS`` restricting them by name; then the
hook registry applies its hooks."""

from __future__ import annotations

import logging
import os
from importlib.metadata import entry_points

logger = logging.getLogger("sglang.srt.plugins")

PLATFORM_PLUGINS_GROUP = "sglang.srt.platforms"
GENERAL_PLUGINS_GROUP = "sglang.srt.plugins"

_plugins_loaded = False
applied: list[str] = []  # what HookRegistry.apply_hooks saw (for the tests)


def load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    allowed = {x.strip() for x in os.environ.get("SGLANG_PLUGINS", "").split(",") if x.strip()}
    for ep in entry_points(group=GENERAL_PLUGINS_GROUP):
        if allowed and ep.name not in allowed:
            continue
        try:
            ep.load()()
        except Exception:
            logger.exception("Failed to execute general plugin: %s", ep.name)
    applied.append("apply_hooks")
