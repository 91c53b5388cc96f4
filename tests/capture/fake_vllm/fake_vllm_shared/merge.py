"""Stand-ins for vllm.model_executor.models.utils._merge_multimodal_embeddings (both orders)."""

from __future__ import annotations

import torch


def _flatten(multimodal_embeddings) -> torch.Tensor:
    if isinstance(multimodal_embeddings, torch.Tensor):
        return multimodal_embeddings.flatten(0, -2)
    return torch.cat([t.flatten(0, -2) for t in multimodal_embeddings])


def _count(multimodal_embeddings) -> str:
    return " + ".join(" x ".join(str(d) for d in t.shape[:-1]) for t in multimodal_embeddings)


def merge_0_10(inputs_embeds, is_multimodal, multimodal_embeddings):
    """0.10.2-0.11: (inputs_embeds, is_multimodal, multimodal_embeddings), masked_scatter_."""
    flattened = _flatten(multimodal_embeddings)
    try:
        inputs_embeds.masked_scatter_(
            is_multimodal.unsqueeze(-1), flattened.to(dtype=inputs_embeds.dtype)
        )
    except RuntimeError as e:
        expected = int(is_multimodal.sum().item())
        if flattened.shape[0] != expected:
            raise ValueError(
                f"Attempted to assign {_count(multimodal_embeddings)} = {flattened.shape[0]} "
                f"multimodal tokens to {expected} placeholders"
            ) from e
        raise ValueError("Error during masked scatter operation") from e
    return inputs_embeds


def merge_0_15(inputs_embeds, multimodal_embeddings, is_multimodal):
    """0.15-0.34: (inputs_embeds, multimodal_embeddings, is_multimodal), index put."""
    if len(multimodal_embeddings) == 0:
        return inputs_embeds
    flattened = _flatten(multimodal_embeddings)
    try:
        inputs_embeds[is_multimodal] = flattened.to(dtype=inputs_embeds.dtype)
    except RuntimeError as e:
        actual, expected = len(flattened), int(is_multimodal.sum().item())
        if actual != expected:
            raise ValueError(
                f"Attempted to assign {_count(multimodal_embeddings)} = {actual} "
                f"multimodal tokens to {expected} placeholders"
            ) from e
        raise ValueError("Error during index put operation") from e
    return inputs_embeds
