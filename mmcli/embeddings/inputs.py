"""Per-item inputs as callers pass them: a list or tuple (entries may be None), or a tensor.

Kept apart from the diagnosis so that the dump writer, which accepts the same per-item
arguments, needs nothing of the diagnosis.
"""

from __future__ import annotations

import torch

from mmcli.errors import InputError


def per_item_tensors(value: object, name: str) -> list[torch.Tensor | None]:
    """One tensor (or None) per item, from a list/tuple or a tensor unbound along dim 0."""
    if value is None:
        return []
    if isinstance(value, torch.Tensor):
        return [value] if value.ndim <= 1 else list(value.unbind(0))
    if not isinstance(value, list | tuple):
        raise InputError(
            f"{name} must be a list or tuple of per-item tensors, got {type(value).__name__}",
            hint="pass one tensor (or None) per item",
        )
    for i, m in enumerate(value):
        if m is not None and not isinstance(m, torch.Tensor):
            raise InputError(
                f"{name}[{i}] is a {type(m).__name__}, not a tensor or None",
                hint="pass one tensor (or None) per item",
            )
    return list(value)
