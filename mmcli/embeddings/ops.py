"""Placeholder scatter/gather with the engine's semantics, strict input checks, and a choice
of implementation.

``scatter`` puts one item's encoder output rows into its placeholder range (NaN elsewhere);
``gather`` takes them back out. ``impl="reference"`` is the engine's own algorithm (NaN fill,
then boolean-mask assignment); ``impl="fast"`` is bit-for-bit equal and sync-free on CUDA.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Literal, overload

import torch

from mmcli.errors import InputError

Impl = Literal["reference", "fast"]
IMPLS: tuple[Impl, ...] = ("reference", "fast")


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
    included, which ``torch.equal`` would call unequal)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    wa = a.contiguous().reshape(-1).view(torch.uint8)
    wb = b.contiguous().reshape(-1).view(torch.uint8)
    if wa.numel() % 8 == 0:
        # Comparing as wide integers is several times faster than byte by byte on CPU.
        wa, wb = wa.view(torch.int64), wb.view(torch.int64)
    return bool(torch.equal(wa, wb))


def _fast() -> ModuleType:
    # Imported on first use: the fast path's setup is only paid by callers who ask for it.
    return importlib.import_module("mmcli.embeddings.fast")


def _check_impl(impl: str) -> None:
    if impl not in IMPLS:
        raise InputError(f"unknown implementation {impl!r}", hint=f"use one of: {', '.join(IMPLS)}")


@overload
def scatter_mm_placeholders(
    embeds: torch.Tensor, is_embed: None, *, impl: Impl = ...
) -> torch.Tensor: ...
@overload
def scatter_mm_placeholders(
    embeds: torch.Tensor, is_embed: torch.Tensor, *, impl: Impl = ...
) -> torch.Tensor: ...
def scatter_mm_placeholders(
    embeds: torch.Tensor, is_embed: torch.Tensor | None, *, impl: Impl = "reference"
) -> torch.Tensor:
    """Scatter ``(num_embeds, hidden)`` rows into ``(num_placeholders, hidden)``, NaN elsewhere.

    ``is_embed=None`` returns ``embeds`` itself. Raises :class:`~mmcli.errors.InputError` for a
    mask that is not 1-D bool, a True count that differs from the rows (a 1-row ``embeds`` does
    not broadcast), integer embeddings, or tensors on different devices.
    """
    _check_impl(impl)
    if is_embed is None:
        return embeds
    mask = check_mask(is_embed)
    check_scatter_inputs(embeds, mask)
    if impl == "fast":
        out: torch.Tensor = _fast().scatter(embeds, mask)
        return out
    check_count(embeds, mask)
    return scatter_reference(embeds, mask)


def gather_mm_placeholders(
    placeholders: torch.Tensor,
    is_embed: torch.Tensor | None,
    *,
    impl: Impl = "reference",
    num_embeds: int | None = None,
) -> torch.Tensor:
    """Gather the embedding rows of ``placeholders`` where ``is_embed`` is True, in order.

    ``is_embed=None`` returns ``placeholders`` itself. Raises
    :class:`~mmcli.errors.InputError` for a mask that is not 1-D bool, a mask length that
    differs from the placeholder rows, integer tensors, or tensors on different devices.

    ``num_embeds`` (the mask's True count, which an engine already knows) is checked against
    the mask; with ``impl="fast"`` on CUDA it makes the call free of host synchronisation,
    since the result's row count no longer has to be read back from the device.
    """
    _check_impl(impl)
    if is_embed is None:
        return placeholders
    mask = check_mask(is_embed)
    check_gather_inputs(placeholders, mask)
    if impl == "fast":
        out: torch.Tensor = _fast().gather(placeholders, mask, num_embeds=num_embeds)
        return out
    result = gather_reference(placeholders, mask)
    if num_embeds is not None and result.shape[0] != num_embeds:
        raise InputError(
            f"is_embed has {result.shape[0]} True positions but num_embeds is {num_embeds}",
            hint="num_embeds must be the True count of is_embed (the item's embedding rows)",
        )
    return result
