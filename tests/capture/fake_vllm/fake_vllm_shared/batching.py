"""Stand-in for vllm.multimodal.utils: batch consecutive items of one modality."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch


def _modality_of(entry: Any) -> tuple[str, Any]:
    if isinstance(entry, tuple):
        return entry[0], entry[1]
    return entry.modality, entry  # 0.10: bare items


def _batches(mm_kwargs: list[Any]) -> Iterator[tuple[str, int, dict[str, torch.Tensor]]]:
    group: list[Any] = []
    modality = None
    for entry in mm_kwargs:
        m, item = _modality_of(entry)
        if group and m != modality:
            yield modality, len(group), {"pixel_values": torch.stack(group)}
            group = []
        modality = m
        group.append(item["pixel_values"])
    if group:
        yield modality, len(group), {"pixel_values": torch.stack(group)}


def group_mm_kwargs_by_modality(mm_kwargs, *, device=None, pin_memory=False):
    yield from _batches(list(mm_kwargs))


def group_and_batch_mm_kwargs(mm_kwargs, *, device=None, pin_memory=False):
    yield from _batches(list(mm_kwargs))
