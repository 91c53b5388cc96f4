"""Stand-in for ``sglang/srt/managers/mm_utils.py`` of SGLang 0.4.10–0.5.7: the names, the
signatures and the call structure of the multimodal embedding step (own code, minimal).

``general_mm_embed_routine`` → ``embed_mm_inputs`` (per modality) → ``get_embedding_and_mask``
→ ``_get_precomputed_embedding`` / ``_get_chunked_prefill_embedding`` (the encoder called once
per request with that request's items, the chunk's rows cut by ``get_embedding_chunk``) →
``_get_multimodal_mask`` → ``_adjust_embedding_length(embedding, mask, logger)``, which raises
when the embedding has fewer rows than the mask; returns ``(embedding, mask)``.
"""

import logging

import torch
from fake_sglang_shared.chunk import get_embedding_chunk

from sglang.srt.managers.schedule_batch import Modality

logger = logging.getLogger(__name__)


def _get_precomputed_embedding(items):
    pre = [item.precomputed_embeddings for item in items]
    if not any(p is not None for p in pre):
        return None
    if not all(p is not None for p in pre):
        raise NotImplementedError("MM inputs where only some items are precomputed.")
    out = torch.concat(pre)
    return out.reshape(-1, out.shape[-1])


def _get_chunked_prefill_embedding(
    data_embedding_func,
    embedding_items,
    items_size,
    prefix_length,
    extend_length,
    items_offset_list,
):
    chunks = []
    for i in range(min(len(items_size) - 1, len(prefix_length))):
        if items_size[i] == items_size[i + 1]:
            continue
        req_items = embedding_items[items_size[i] : items_size[i + 1]]
        offsets = items_offset_list[i]
        if all(end < prefix_length[i] for _, end in offsets):
            continue
        embedding = data_embedding_func(req_items)
        seq = extend_length[i] if i < len(extend_length) else 0
        chunk, _, _ = get_embedding_chunk(embedding, prefix_length[i], seq, offsets)
        chunks.append(chunk)
    return torch.concat(chunks, dim=0) if chunks else None


def _get_multimodal_mask(input_ids, placeholder_tensor):
    return torch.isin(input_ids, placeholder_tensor).unsqueeze(-1)


def _adjust_embedding_length(embedding, mask, logger):
    rows = embedding.shape[0]
    tokens = int(mask.sum().item())
    if rows == tokens:
        return embedding
    logger.warning("mm embedding rows %d != mm tokens %d", rows, tokens)
    if tokens < rows:
        return embedding[-tokens:, :]
    raise RuntimeError(
        f"Insufficient multimodal embedding length: num_mm_tokens_in_input_ids={tokens} vs "
        f"num_mm_tokens_in_embedding={rows}. This is an internal error"
    )


def get_embedding_and_mask(
    data_embedding_func,
    embedding_items,
    placeholder_tensor,
    input_ids,
    items_size,
    prefix_length,
    extend_length,
    items_offset_list,
):
    embedding = _get_precomputed_embedding(embedding_items)
    if embedding is None:
        embedding = _get_chunked_prefill_embedding(
            data_embedding_func,
            embedding_items,
            items_size,
            prefix_length,
            extend_length,
            items_offset_list,
        )
        if embedding is None:
            return None, None
    mask = _get_multimodal_mask(input_ids, placeholder_tensor)
    embedding = _adjust_embedding_length(embedding, mask, logger)
    return embedding, mask


def embed_mm_inputs(
    mm_inputs_list,
    extend_prefix_lens,
    extend_seq_lens,
    input_ids,
    input_embedding,
    multimodal_model=None,
    data_embedding_func_mapping=None,
    placeholder_tokens=None,
):
    if mm_inputs_list is None:
        return None
    flat = [item for mm in mm_inputs_list for item in mm.mm_items if item is not None]
    embeddings, masks = [], []
    for modality in Modality.all():
        items = [item for item in flat if item.is_modality(modality=modality)]
        embedder = (data_embedding_func_mapping or {}).get(modality)
        if embedder is None:
            embedder = getattr(multimodal_model, f"get_{modality.name.lower()}_feature", None)
        if not items or embedder is None:
            continue
        placeholder_tensor = torch.as_tensor([item.pad_value for item in items])
        items_size, items_offsets = [0], []
        for mm in mm_inputs_list:
            mine = [item for item in mm.mm_items if item.is_modality(modality=modality)]
            items_size.append(items_size[-1] + len(mine))
            items_offsets.append([run for item in mine for run in item.offsets])
        embedding, mask = get_embedding_and_mask(
            data_embedding_func=embedder,
            embedding_items=items,
            placeholder_tensor=placeholder_tensor,
            input_ids=input_ids,
            items_size=items_size,
            prefix_length=extend_prefix_lens,
            extend_length=extend_seq_lens,
            items_offset_list=items_offsets,
        )
        embeddings.append(embedding)
        masks.append(mask)
    input_ids.clamp_(min=0, max=input_embedding.num_embeddings - 1)
    inputs_embeds = input_embedding(input_ids)
    for embedding, mask in zip(embeddings, masks, strict=True):
        if embedding is None or mask is None:
            continue
        indices = torch.where(mask.squeeze(dim=-1))[0]
        inputs_embeds[indices] = embedding.to(inputs_embeds.device, inputs_embeds.dtype)
    return inputs_embeds


def general_mm_embed_routine(
    input_ids,
    forward_batch,
    language_model,
    multimodal_model=None,
    data_embedding_funcs=None,
    placeholder_tokens=None,
    **kwargs,
):
    embed_tokens = language_model.get_input_embeddings()
    if not forward_batch.forward_mode.is_decode() and forward_batch.contains_mm_inputs():
        present = [mm is not None for mm in forward_batch.mm_inputs]
        inputs_embeds = embed_mm_inputs(
            mm_inputs_list=[mm for mm in forward_batch.mm_inputs if mm is not None],
            extend_prefix_lens=[
                n for n, p in zip(forward_batch.extend_prefix_lens_cpu, present, strict=True) if p
            ],
            extend_seq_lens=[
                n for n, p in zip(forward_batch.extend_seq_lens_cpu, present, strict=True) if p
            ],
            input_ids=input_ids,
            input_embedding=embed_tokens,
            multimodal_model=multimodal_model,
            data_embedding_func_mapping=data_embedding_funcs,
            placeholder_tokens=placeholder_tokens,
        )
        forward_batch.mm_inputs = None
    else:
        inputs_embeds = embed_tokens(input_ids)
    return language_model(
        input_ids=None, forward_batch=forward_batch, input_embeds=inputs_embeds, **kwargs
    )
