"""Capture encoder outputs from a running model as ``mm_dump`` files.

``mmcli.capture.transformers(model, "dumps/", when="failure")`` wraps a transformers
vision-language model (:mod:`mmcli.capture.hf`); the engine plugins live beside it, one
package each: vLLM's (:mod:`mmcli.capture.vllm`) and SGLang's (:mod:`mmcli.capture.sglang`,
with :mod:`mmcli.capture.sglang.launch` for SGLang releases without plugins), sharing one
import hook (:mod:`mmcli.capture.import_hook`). What every path shares: the settings
(:mod:`mmcli.capture.settings`: modes, the ``MMCLI_DUMP_*`` environment) and the writer
(:mod:`mmcli.capture._common`: the dump directory, the file budget, naming). Nothing here
imports torch or transformers until used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mmcli.lazy import lazy_getattr

if TYPE_CHECKING:
    from mmcli.capture._common import Capturer
    from mmcli.capture.context import CaptureContext
    from mmcli.capture.hf import transformers

__all__ = ["CaptureContext", "Capturer", "transformers"]

_LAZY = {
    "transformers": "mmcli.capture.hf",
    "Capturer": "mmcli.capture._common",
    "CaptureContext": "mmcli.capture.context",
}


__getattr__ = lazy_getattr("mmcli.capture", _LAZY)
