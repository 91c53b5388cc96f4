"""Stand-in for a model module that imports the merge by name (qwen3_vl, phi3v, … 0.15-0.34)."""

from __future__ import annotations

from .utils import _merge_multimodal_embeddings


def embed_input_ids(inputs_embeds, multimodal_embeddings, is_multimodal):
    return _merge_multimodal_embeddings(inputs_embeds, multimodal_embeddings, is_multimodal)
