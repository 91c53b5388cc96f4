"""Stand-in for vllm.v1.worker.utils.sanity_check_mm_encoder_outputs (the same three asserts)."""

from __future__ import annotations

import torch


def sanity_check_mm_encoder_outputs(mm_embeddings, expected_num_items: int) -> None:
    assert isinstance(mm_embeddings, (list, tuple, torch.Tensor)), (
        "Expected multimodal embeddings to be a list/tuple of 2D tensors, or a single 3D "
        f"tensor, but got {type(mm_embeddings)} instead."
    )
    assert len(mm_embeddings) == expected_num_items, (
        "Expected number of multimodal embeddings to match number of input items: "
        f"{expected_num_items}, but got {len(mm_embeddings)=} instead."
    )
    assert all(e.ndim == 2 for e in mm_embeddings), (
        "Expected multimodal embeddings to be a sequence of 2D tensors, but got tensors "
        f"with shapes {[e.shape for e in mm_embeddings]} instead."
    )
