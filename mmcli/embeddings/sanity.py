"""The engine's encoder-output sanity check, and a diagnosis that reports every problem.

:func:`sanity_check_mm_encoder_outputs` mirrors the engine's three conditions but raises
:class:`~mmcli.errors.EncoderOutputError` (an ``assert`` vanishes under ``python -O``).
:func:`diagnose_mm_encoder_outputs` returns a :class:`~mmcli.findings.Finding` for every
problem instead of stopping at the first (the judgments are in
:mod:`mmcli.embeddings.diagnosis`).
"""

from __future__ import annotations

import torch

from mmcli.embeddings.diagnosis import Diagnosis
from mmcli.embeddings.hints import BLAME, count_hint, ndim_hint
from mmcli.embeddings.inputs import per_item_tensors
from mmcli.embeddings.ops import Impl
from mmcli.errors import EncoderOutputError, InputError
from mmcli.findings import Finding
from mmcli.text import shape_text

__all__ = ["diagnose_mm_encoder_outputs", "per_item_tensors", "sanity_check_mm_encoder_outputs"]


def sanity_check_mm_encoder_outputs(mm_embeddings: object, expected_num_items: int) -> None:
    """The engine's three conditions: a list/tuple/tensor, of the expected length, of 2-D items.

    A 3-D tensor passes (its items are its 2-D slices); an empty list with 0 expected passes.
    Raises :class:`~mmcli.errors.EncoderOutputError`.
    """
    if not isinstance(mm_embeddings, list | tuple | torch.Tensor):
        raise EncoderOutputError(
            "multimodal embeddings must be a list or tuple of 2-D tensors, or one 3-D tensor; "
            f"got {type(mm_embeddings).__name__}",
            hint=f"fix the return value of {BLAME}",
        )
    if isinstance(mm_embeddings, torch.Tensor) and mm_embeddings.ndim == 0:
        raise EncoderOutputError(
            "multimodal embeddings are a 0-D tensor, which holds no items",
            hint=f"fix the return value of {BLAME}",
        )
    found = len(mm_embeddings)
    if found != expected_num_items:
        raise EncoderOutputError(
            f"expected {expected_num_items} multimodal embedding item(s), one per multimodal "
            f"item in the prompt, but {BLAME} returned {found}",
            hint=count_hint(found, expected_num_items),
        )
    for index, item in enumerate(mm_embeddings):
        if not isinstance(item, torch.Tensor):
            raise EncoderOutputError(
                f"item {index} is a {type(item).__name__}, not a tensor",
                hint=f"fix the return value of {BLAME}",
            )
        if item.ndim != 2:
            raise EncoderOutputError(
                f"item {index} has shape {shape_text(item.shape)} ({item.ndim}-D); every item "
                "must be 2-D (num_embeds, hidden)",
                hint=ndim_hint(item.shape),
            )


def diagnose_mm_encoder_outputs(
    mm_embeddings: object,
    expected_num_items: int | None = None,
    *,
    is_embed: object = None,
    hidden_size: int | None = None,
    model_dtype: str | torch.dtype | None = None,
    placeholders: object = None,
    roundtrip: bool = True,
    impl: Impl = "reference",
) -> list[Finding]:
    """Every problem with a model's encoder outputs, as findings (one per problem, each with a
    stable ``code`` such as ``mask-count`` or ``non-finite``, a message and a hint).

    ``mm_embeddings`` is what the model returned: a list/tuple of per-item tensors, or one
    stacked tensor. ``is_embed`` and ``placeholders`` are optional per-item lists (entries
    may be None). With ``roundtrip``, each consistent item is scattered and gathered back
    with ``impl`` on its own device and compared.
    """
    if not isinstance(mm_embeddings, list | tuple | torch.Tensor):
        raise InputError(
            "mm_embeddings must be a list or tuple of tensors, or one tensor; got "
            f"{type(mm_embeddings).__name__}",
            hint=f"pass what {BLAME} returned",
        )
    diagnosis = Diagnosis(
        expected_num_items=expected_num_items, hidden_size=hidden_size, model_dtype=model_dtype
    )
    masks = per_item_tensors(is_embed, "is_embed")
    stored = per_item_tensors(placeholders, "placeholders")
    items: list[torch.Tensor]
    if isinstance(mm_embeddings, torch.Tensor):
        if not diagnosis.stacked(tuple(mm_embeddings.shape)):
            count = int(mm_embeddings.shape[0]) if mm_embeddings.ndim else 0
            return diagnosis.finish(count, num_masks=len(masks))
        items = list(mm_embeddings.unbind(0))
    else:
        items = list(mm_embeddings)
        for i, item in enumerate(items):
            if not isinstance(item, torch.Tensor):
                raise InputError(
                    f"mm_embeddings[{i}] is a {type(item).__name__}, not a tensor",
                    hint=f"{BLAME} must return one tensor per item",
                )
    diagnosis.fetch = items.__getitem__
    for index, emb in enumerate(items):
        mask = masks[index] if index < len(masks) else None
        kept = stored[index] if index < len(stored) else None
        diagnosis.check(index, emb, mask, stored=kept, roundtrip=roundtrip, impl=impl)
    return diagnosis.finish(len(items), num_masks=len(masks))
