"""A LLaVA whose encoder output is broken on purpose, registered with vLLM for the e2e run.

``MMCLI_E2E_FAULT``: ``batch-dim`` (every item keeps a leading batch dim: 3-D items),
``one-short`` (one item too few), ``zero`` (no item at all), ``narrow`` (a projector one
column short: rows of hidden - 1; the engine's check passes, the merge fails), ``wide``
(each row twice over: rows of 2 × hidden, which a model without deepstack cannot take; the
merge fails), ``scale``
(every row times 0.5: structurally fine, numerically wrong) or ``reverse`` (each item's rows
in reverse order). Registered in-process under ``ARCH``; the model folder's ``config.json``
names ``ARCH`` as its architecture.
"""

from __future__ import annotations

import os
from typing import Any

from vllm.model_executor.models.llava import LlavaForConditionalGeneration

ARCH = "MmcliFaultyLlavaForConditionalGeneration"


class MmcliFaultyLlava(LlavaForConditionalGeneration):
    def embed_multimodal(self, **kwargs: object) -> Any:
        outputs = list(super().embed_multimodal(**kwargs))
        fault = os.environ.get("MMCLI_E2E_FAULT", "")
        if fault == "batch-dim":
            return [item.unsqueeze(0) for item in outputs]
        if fault == "one-short":
            return outputs[:-1]
        if fault == "zero":
            return []
        if fault == "narrow":
            return [item[:, :-1] for item in outputs]
        if fault == "wide":
            return [item.repeat(1, 2) for item in outputs]
        if fault == "scale":
            return [item * 0.5 for item in outputs]
        if fault == "reverse":
            return [item.flip(0) for item in outputs]
        return outputs


def register() -> None:
    from vllm import ModelRegistry

    ModelRegistry.register_model(ARCH, MmcliFaultyLlava)
