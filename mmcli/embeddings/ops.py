"""Placeholder scatter/gather with the engine's semantics, strict input checks, and a choice
of implementation.

``scatter`` puts one item's encoder output rows into its placeholder range (NaN elsewhere);
``gather`` takes them back out. ``impl="reference"`` is the engine's own algorithm (NaN fill,
then boolean-mask assignment; :mod:`mmcli.embeddings.reference`); ``impl="fast"`` is
bit-for-bit equal and sync-free on CUDA (:mod:`mmcli.embeddings.fast`). The input checks and
:func:`same_bits` are re-exported from :mod:`mmcli.embeddings.reference`.
"""

from __future__ import annotations

from typing import Literal, overload

import torch

from mmcli.embeddings import fast
from mmcli.embeddings.reference import (
    check_count,
    check_gather_inputs,
    check_mask,
    check_scatter_inputs,
    gather_reference,
    same_bits,
    scatter_reference,
)
from mmcli.errors import InputError

__all__ = [
    "IMPLS",
    "Impl",
    "check_count",
    "check_gather_inputs",
    "check_mask",
    "check_scatter_inputs",
    "gather_mm_placeholders",
    "gather_reference",
    "same_bits",
    "scatter_mm_placeholders",
    "scatter_reference",
]

Impl = Literal["reference", "fast"]
IMPLS: tuple[Impl, ...] = ("reference", "fast")


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
        return fast.scatter(embeds, mask)
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
        return fast.gather(placeholders, mask, num_embeds=num_embeds)
    result = gather_reference(placeholders, mask)
    if num_embeds is not None and result.shape[0] != num_embeds:
        raise InputError(
            f"is_embed has {result.shape[0]} True positions but num_embeds is {num_embeds}",
            hint="num_embeds must be the True count of is_embed (the item's embedding rows)",
        )
    return result
