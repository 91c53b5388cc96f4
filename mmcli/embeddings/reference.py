"""The engine's placeholder scatter/gather, the input checks every implementation shares, and
a bit-for-bit comparison.

``scatter_reference`` / ``gather_reference`` are the engine's own algorithm (a NaN fill, then
boolean-mask assignment; boolean-mask indexing). The ``check_*`` functions raise
:class:`~mmcli.errors.InputError` with a hint; only :func:`check_count` reads tensor data.
This module imports no other implementation: :mod:`mmcli.embeddings.fast` builds on it and
:mod:`mmcli.embeddings.ops` chooses between the two.
"""

from __future__ import annotations

import torch

from mmcli.errors import InputError


def _shape(t: torch.Tensor) -> str:
    return "(" + ", ".join(str(d) for d in t.shape) + ")"


def check_mask(is_embed: object) -> torch.Tensor:
    """Check ``is_embed`` is a 1-D bool tensor; return it."""
    if not isinstance(is_embed, torch.Tensor):
        raise InputError(
            f"is_embed must be a torch.Tensor or None, got {type(is_embed).__name__}",
            hint="pass the item's 1-D bool mask over its placeholder range",
        )
    if is_embed.ndim != 1:
        raise InputError(
            f"is_embed must be 1-D (num_placeholders,), got shape {_shape(is_embed)}",
            hint="the mask covers one item's placeholder range; a 2-D mask raises IndexError "
            "in the engine",
        )
    if is_embed.dtype != torch.bool:
        raise InputError(
            f"is_embed must be torch.bool, got {is_embed.dtype}",
            hint="torch reads an integer 0/1 mask as row indices, which is silently wrong; "
            "convert with mask.bool()",
        )
    return is_embed


def _check_rows(t: torch.Tensor, name: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.ndim != 2:
        raise InputError(
            f"{name} must be 2-D (rows, hidden), got shape {_shape(t)}",
            hint="a leading 1 means a batch dim was kept; 4-D means a spatial grid was not "
            "flattened",
        )
    if not t.is_floating_point():
        raise InputError(
            f"{name} has integer dtype {t.dtype}, which cannot hold the NaN fill of "
            "non-embedding positions",
            hint="encoder outputs should be floating point (bf16, fp16 or fp32)",
        )


def _check_device(t: torch.Tensor, name: str, is_embed: torch.Tensor) -> None:
    if t.device != is_embed.device:
        raise InputError(
            f"{name} is on {t.device} but is_embed is on {is_embed.device}",
            hint="move the mask to the tensor's device first",
        )


def check_count(embeds: torch.Tensor, is_embed: torch.Tensor) -> None:
    """Check the mask's True count equals the embedding rows (reads the count: syncs on CUDA)."""
    num_true = int(is_embed.sum())
    if num_true != embeds.shape[0]:
        broadcast = (
            " (the engine would silently broadcast this 1-row tensor to every position)"
            if embeds.shape[0] == 1
            else ""
        )
        raise InputError(
            f"is_embed has {num_true} True positions but embeds has {embeds.shape[0]} rows"
            f"{broadcast}",
            hint="placeholders truncated, or the processor and model disagree on tokens per item",
        )


def check_scatter_inputs(embeds: torch.Tensor, is_embed: torch.Tensor) -> None:
    """Every check of scatter's inputs that needs no tensor data (never syncs)."""
    _check_rows(embeds, "embeds")
    _check_device(embeds, "embeds", is_embed)


def check_gather_inputs(placeholders: torch.Tensor, is_embed: torch.Tensor) -> None:
    """Every check of gather's inputs; none needs tensor data (never syncs)."""
    _check_rows(placeholders, "placeholders")
    _check_device(placeholders, "placeholders", is_embed)
    if placeholders.shape[0] != is_embed.shape[0]:
        raise InputError(
            f"is_embed covers {is_embed.shape[0]} placeholder positions but placeholders has "
            f"{placeholders.shape[0]} rows",
            hint="the mask and the scattered tensor must describe the same placeholder range",
        )


def scatter_reference(embeds: torch.Tensor, is_embed: torch.Tensor) -> torch.Tensor:
    """The engine's algorithm: a NaN-filled tensor, then boolean-mask assignment."""
    out = embeds.new_full((is_embed.shape[0], *embeds.shape[1:]), fill_value=torch.nan)
    out[is_embed] = embeds
    return out


def gather_reference(placeholders: torch.Tensor, is_embed: torch.Tensor) -> torch.Tensor:
    """The engine's algorithm: boolean-mask indexing (a copy)."""
    return placeholders[is_embed]


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality: same shape, dtype and stored bits (NaN positions and payloads
    included, which ``torch.equal`` would call unequal).

    Any layout compares: non-contiguous and overlapping views, storage offsets, size-1 and
    zero-size dimensions.
    """
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    wa, wb = _bytes(a), _bytes(b)
    # Comparing as wide integers is several times faster than byte by byte on CPU; a view
    # as a wider type needs the byte count and both storage offsets to be multiples of it.
    for word in (torch.int64, torch.int32, torch.int16):
        size = word.itemsize
        if wa.numel() % size == 0 and all(w.storage_offset() % size == 0 for w in (wa, wb)):
            wa, wb = wa.view(word), wb.view(word)
            break
    return bool(torch.equal(wa, wb))


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """The stored bytes of ``t``'s elements in row-major order, as a 1-D uint8 tensor with
    stride 1 (a view where the layout allows, else a copy)."""
    flat = t.resolve_conj().resolve_neg().reshape(-1)
    if flat.stride(0) != 1:
        # reshape keeps a view whenever it can, and a one-element tensor counts as contiguous
        # whatever its strides; reinterpreting the dtype needs a unit stride, so copy.
        flat = flat.clone(memory_format=torch.contiguous_format)
    return flat.view(torch.uint8)
