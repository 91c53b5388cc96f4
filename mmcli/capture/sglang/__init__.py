"""SGLang general plugin (entry point ``mmcli.capture.sglang:register``): dump the merged
multimodal embedding the engine scatters, with each item's mask.

:mod:`.plugin` registers the import hook and wraps the engine's embedding step, its length
check and ``embed_mm_inputs``; :mod:`.items` turns one step into a dump; :mod:`.calls` reads
the engine's calls; :mod:`.launch` starts a server with the hook for releases without
plugins. See ``docs/capture-sglang.md``.
"""

from __future__ import annotations

from mmcli.capture.sglang.plugin import TARGET_MODULES, patch_module, register, unregister

__all__ = ["TARGET_MODULES", "patch_module", "register", "unregister"]
