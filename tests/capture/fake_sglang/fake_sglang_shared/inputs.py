"""Stand-ins for SGLang's multimodal records (``sglang.srt.managers.schedule_batch``) and the
forward batch (``sglang.srt.model_executor.forward_batch_info``): the fields the embedding
step reads, nothing else."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Modality(enum.Enum):
    IMAGE = enum.auto()
    MULTI_IMAGES = enum.auto()
    VIDEO = enum.auto()
    AUDIO = enum.auto()

    @staticmethod
    def all() -> list[Modality]:
        return [Modality.IMAGE, Modality.VIDEO, Modality.AUDIO]


@dataclass(eq=False)
class MultimodalDataItem:
    """One item: ``offsets`` are its placeholder runs ``(start, end)``, both inclusive, in
    the request's token sequence; its placeholder tokens hold ``pad_value``."""

    modality: Modality
    hash: int | None = None
    pad_value: int | None = None
    offsets: list[tuple[int, int]] | None = None
    feature: Any = None
    precomputed_embeddings: Any = None

    def is_modality(self, modality: Modality) -> bool:
        return self.modality == modality

    def is_audio(self) -> bool:
        return self.modality == Modality.AUDIO


@dataclass(eq=False)
class MultimodalInputs:
    mm_items: list[MultimodalDataItem]


class ForwardMode(enum.Enum):
    EXTEND = enum.auto()
    DECODE = enum.auto()

    def is_decode(self) -> bool:
        return self == ForwardMode.DECODE

    def is_target_verify(self) -> bool:
        return False


@dataclass(eq=False)
class ForwardBatch:
    forward_mode: ForwardMode
    mm_inputs: list[MultimodalInputs | None] | None
    extend_prefix_lens_cpu: list[int]
    extend_seq_lens_cpu: list[int]
    input_embeds: Any = None
    mm_input_embeds: Any = None

    def contains_mm_inputs(self) -> bool:
        return self.mm_inputs is not None and any(m is not None for m in self.mm_inputs)
