"""Stand-in for SupportsMultiModal.embed_input_ids (0.15-0.34): imports the merge at each call."""

from __future__ import annotations


def embed_input_ids(inputs_embeds, multimodal_embeddings=None, *, is_multimodal=None):
    from .utils import _merge_multimodal_embeddings

    if multimodal_embeddings is None or len(multimodal_embeddings) == 0:
        return inputs_embeds
    return _merge_multimodal_embeddings(
        inputs_embeds=inputs_embeds,
        multimodal_embeddings=multimodal_embeddings,
        is_multimodal=is_multimodal,
    )
