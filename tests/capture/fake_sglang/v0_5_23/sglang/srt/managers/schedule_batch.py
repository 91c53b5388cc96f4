"""0.5.23 items may carry several pad values (``pad_values``), read through ``padding_values()``."""

from dataclasses import dataclass

from fake_sglang_shared.inputs import Modality, MultimodalInputs
from fake_sglang_shared.inputs import MultimodalDataItem as _Item


@dataclass(eq=False)
class MultimodalDataItem(_Item):
    pad_values: tuple[int, ...] | None = None

    def padding_values(self) -> tuple[int, ...]:
        return self.pad_values or (self.pad_value,)


__all__ = ["Modality", "MultimodalDataItem", "MultimodalInputs"]
