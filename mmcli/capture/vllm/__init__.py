"""vLLM general plugin (entry point ``mmcli.capture.vllm:register``): dump the encoder outputs
the engine checks and merges, with each item's mask.

:mod:`.plugin` registers the import hook and wraps the engine's check, preparation and
batching; :mod:`.merge` wraps the embedding merge; :mod:`.items` reads the engine's records;
:mod:`.state` is what they share. See ``docs/capture-vllm.md``.
"""

from __future__ import annotations

from mmcli.capture.vllm.plugin import RUNNER_MODULES, patch_module, register, unregister

__all__ = ["RUNNER_MODULES", "patch_module", "register", "unregister"]
