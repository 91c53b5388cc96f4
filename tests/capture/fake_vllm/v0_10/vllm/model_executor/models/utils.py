"""Stand-in for vllm.model_executor.models.utils, 0.10.2-0.11: the merge and its callers here."""

from __future__ import annotations

import torch
from fake_vllm_shared.merge import merge_0_10 as _merge_multimodal_embeddings


def merge_multimodal_embeddings(
    input_ids, inputs_embeds, multimodal_embeddings, placeholder_token_id
):
    if isinstance(placeholder_token_id, list):
        is_multimodal = torch.isin(input_ids, torch.tensor(placeholder_token_id))
    else:
        is_multimodal = input_ids == placeholder_token_id
    return _merge_multimodal_embeddings(inputs_embeds, is_multimodal, multimodal_embeddings)
