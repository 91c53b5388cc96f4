"""The vLLM plugin's wrapper of the embedding merge: outputs the check passed but the merge refused.

vLLM's check (``sanity_check_mm_encoder_outputs``) counts items and dimensions, not widths: an
encoder whose rows are one column short passes it, and the engine fails later, when
``_merge_multimodal_embeddings`` (``vllm/model_executor/models/utils.py``) writes the rows
into the prompt's embeddings (``ValueError: Error during masked scatter operation`` /
``index put operation``, or ``Attempted to assign … multimodal tokens to … placeholders``).
Every covered release defines that function there:

* 0.10.2–0.11: ``_merge_multimodal_embeddings(inputs_embeds, is_multimodal,
  multimodal_embeddings)``, called from the same module (``merge_multimodal_embeddings``,
  ``embed_multimodal``), which LLaVA and most models call;
* 0.15–0.34: ``_merge_multimodal_embeddings(inputs_embeds, multimodal_embeddings,
  is_multimodal)``, called by ``SupportsMultiModal.embed_input_ids``
  (``models/interfaces.py``, which imports it from ``.utils`` at each call) and imported by
  name into model modules (``qwen3_vl``, ``phi3v``, …), which are rebound here.

The arguments are read by name, so both orders work. When the merge raises, the dump is the
encoder batch the merged rows came from (the check's outputs with each item's mask and range,
found by the rows' storage), else the merge's own inputs (its rows per item and the
placeholder positions); either way with ``hidden_size`` the language model's hidden size from
the model's config (``hidden_size_source`` names the key; ``inputs_embeds`` when no config was
seen: the width of the prompt's embeddings, and ``row_width`` that width when it differs from
the config's), the merge's error as ``engine_error`` and ``failed_at=merge``. The error is re-raised
unchanged.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

from mmcli.capture import import_hook
from mmcli.capture._common import Settings
from mmcli.capture.calls import named_arguments, signature_of
from mmcli.capture.vllm.state import Checked, holder, state
from mmcli.capture.vllm.write import capture

logger = logging.getLogger("mmcli.capture.vllm")

MODELS_PREFIX = "vllm.model_executor.models."
UTILS = "vllm.model_executor.models.utils"
MERGE_NAME = "_merge_multimodal_embeddings"
_MARK = "__mmcli_wrapped__"
#: id(original) → (original, wrapper): what a model module that imported the name is rebound to.
_wrapped: dict[int, tuple[Callable[..., Any], Callable[..., Any]]] = {}


def patch_module(module: ModuleType) -> list[str]:
    """Wrap the merge in ``vllm.model_executor.models.utils``; in any other model module, rebind
    the names that hold the original. Returns the names changed (idempotent)."""
    if module.__name__ == UTILS:
        original = getattr(module, MERGE_NAME, None)
        if not callable(original) or getattr(original, _MARK, False):
            return []
        wrapper = _wrap_merge(original)
        _wrapped[id(original)] = (original, wrapper)
        setattr(module, MERGE_NAME, wrapper)
        for other in import_hook.loaded(prefixes=(MODELS_PREFIX,)):  # imported it before
            if other is not module:
                patch_module(other)
        return [MERGE_NAME]
    done = []
    for key, value in list(vars(module).items()):
        found = _wrapped.get(id(value))
        if found is not None and found[0] is value:
            setattr(module, key, found[1])
            done.append(key)
    return done


def _wrap_merge(merge: Callable[..., Any]) -> Callable[..., Any]:
    signature = signature_of(merge)

    @functools.wraps(merge)
    def _merge_multimodal_embeddings(*args: Any, **kwargs: Any) -> Any:
        settings = holder.settings
        if settings is None:
            return merge(*args, **kwargs)
        try:
            return merge(*args, **kwargs)
        except Exception as error:
            try:
                _capture_merge(settings, named_arguments(signature, args, kwargs), error)
            except Exception:
                logger.exception("mmcli: could not capture the failed merge")
            raise  # the engine's own error, unchanged

    setattr(_merge_multimodal_embeddings, _MARK, True)
    return _merge_multimodal_embeddings


def _storage(t: object) -> int | None:
    import torch

    if not isinstance(t, torch.Tensor):
        return None
    try:
        return int(t.untyped_storage().data_ptr())
    except Exception:  # a tensor without storage (meta, some subclasses)
        return None


def source_batch(rows: list[object], checked: list[Checked]) -> Checked | None:
    """The checked encoder batch whose outputs hold every one of the merged ``rows`` (the
    runner slices them from its encoder cache without copying), or None."""
    wanted = {_storage(t) for t in rows}
    if not rows or None in wanted:
        return None
    for batch in reversed(checked):
        outputs = batch.outputs
        items = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
        held = {_storage(t) for t in items} - {None}
        if wanted <= held:
            return batch
    return None


def _capture_merge(settings: Settings, named: dict[str, Any], error: BaseException) -> None:
    import torch

    embeddings = named.get("multimodal_embeddings")
    mask = named.get("is_multimodal")
    inputs = named.get("inputs_embeds")
    rows = list(embeddings) if isinstance(embeddings, list | tuple) else [embeddings]
    changes: dict[str, Any] = {}
    extra = {"failed_at": "merge"}
    if isinstance(inputs, torch.Tensor) and inputs.ndim >= 1:
        width = int(inputs.shape[-1])  # the width the merge writes into
        configured = state.runner.hidden_size
        if configured is None:
            changes["hidden_size"] = width
            extra["hidden_size_source"] = "inputs_embeds"
        elif width != configured:  # inputs embeds of another width (OPT-like projections)
            changes["row_width"] = width
    batch = source_batch(rows, state.checked)
    if batch is not None:
        extra["embedding_source"] = "encoder"
        capture(
            settings,
            batch.outputs,
            batch.expected,
            batch.infos,
            batch.phase,
            error,
            extra=extra,
            changes=changes,
        )
        return
    extra["embedding_source"] = "merge"
    if state.runner.deepstack_levels:
        # the merge takes the main rows only (Qwen3-VL splits the deepstack levels off first)
        changes["deepstack_levels"] = None
    if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
        changes["placeholder_positions"] = mask.detach().reshape(-1).nonzero().flatten().cpu()
    capture(
        settings,
        embeddings,
        None,
        None,
        state.phase,
        error,
        extra=extra,
        changes=changes,
        warn_masks=False,
    )
