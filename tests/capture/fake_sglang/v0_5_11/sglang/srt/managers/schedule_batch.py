from fake_sglang_shared.inputs import Modality, MultimodalDataItem, MultimodalInputs

__all__ = ["Modality", "MultimodalDataItem", "MultimodalInputs"]
