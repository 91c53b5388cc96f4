"""Stand-ins for vllm.multimodal.inputs: a placeholder range, a kwargs item, a feature."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class PlaceholderRange:
    offset: int
    length: int
    is_embed: torch.Tensor | None = None

    def get_num_embeds(self) -> int:
        return self.length if self.is_embed is None else int(self.is_embed.sum())


class MultiModalKwargsItem(dict[str, Any]):
    """One item's processor outputs (a dict of tensors); 0.10 items also know their modality."""

    def __init__(self, modality: str, **fields: Any) -> None:
        super().__init__(**fields)
        self.modality = modality


@dataclass
class MultiModalFeatureSpec:
    data: MultiModalKwargsItem | None
    modality: str
    identifier: str
    mm_position: PlaceholderRange
