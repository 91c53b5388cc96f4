"""Stand-in for ``sglang/srt/managers/mm_utils.py`` of SGLang 0.5.11–0.5.17 (names, signatures
and call structure of the multimodal embedding step; own code, minimal).

As 0.4.x, except: ``get_embedding_and_mask`` returns ``(embedding, mask, input_ids)``;
``_get_chunked_prefill_embedding`` takes and returns ``input_ids``; a request whose items all
have one placeholder run takes the per-image path ``_get_chunked_embedding_by_item`` (the
encoder called on the items that meet the chunk, its output split per item with
``torch.split`` by their token counts: a wrong row count raises there), others
``_get_chunked_embedding_full``; ``embed_mm_inputs`` returns ``(input_embeds, other_info)``.
"""

import logging

import torch
from fake_sglang_shared.chunk import get_embedding_chunk, item_overlap, slice_item

from sglang.srt.managers.schedule_batch import Modality

logger = logging.getLogger(__name__)


def _get_precomputed_embedding(items, items_size, prefix_length, extend_length, items_offset_list):
    if not any(item.precomputed_embeddings is not None for item in items):
        return None
    chunks = []
    for i in range(min(len(items_size) - 1, len(prefix_length))):
        req_items = items[items_size[i] : items_size[i + 1]]
        if not req_items:
            continue
        if any(item.precomputed_embeddings is None for item in req_items):
            raise NotImplementedError("MM inputs where only some items are precomputed.")
        seq = extend_length[i] if i < len(extend_length) else 0
        full = torch.concat([item.precomputed_embeddings for item in req_items])
        chunks.append(get_embedding_chunk(full, prefix_length[i], seq, items_offset_list[i])[0])
    out = torch.concat(chunks)
    return out.reshape(-1, out.shape[-1])


def _get_chunked_embedding_full(
    data_embedding_func,
    embedding_items_per_req,
    items_offset,
    extend_prefix_len,
    extend_seq_len,
    input_ids,
    device,
):
    embedding = data_embedding_func(embedding_items_per_req)
    chunk, _, _ = get_embedding_chunk(embedding, extend_prefix_len, extend_seq_len, items_offset)
    return chunk, input_ids


def _get_chunked_embedding_by_item(
    data_embedding_func,
    embedding_items_per_req,
    items_offset,
    extend_prefix_len,
    extend_seq_len,
    device,
):
    end = extend_prefix_len + extend_seq_len
    overlapping = [
        (item, n)
        for item in embedding_items_per_req
        if (n := item_overlap(item.offsets, extend_prefix_len, end)) is not None
    ]
    if not overlapping:
        return None
    out = data_embedding_func([item for item, _ in overlapping])
    out = out.reshape(-1, out.shape[-1])
    per_item = torch.split(out, [n for _, n in overlapping], dim=0)
    return torch.cat(
        [
            slice_item(emb, item.offsets, extend_prefix_len, extend_seq_len)
            for (item, _), emb in zip(overlapping, per_item, strict=True)
        ]
    )


def _get_chunked_prefill_embedding(
    data_embedding_func,
    embedding_items,
    items_size,
    prefix_length,
    extend_length,
    items_offset_list,
    input_ids,
):
    chunks = []
    for i in range(min(len(items_size) - 1, len(prefix_length))):
        if items_size[i] == items_size[i + 1]:
            continue
        req_items = embedding_items[items_size[i] : items_size[i + 1]]
        offsets = items_offset_list[i]
        if all(end < prefix_length[i] for _, end in offsets):
            continue
        seq = extend_length[i] if i < len(extend_length) else 0
        if all(len(item.offsets) == 1 for item in req_items):
            chunk = _get_chunked_embedding_by_item(
                data_embedding_func, req_items, offsets, prefix_length[i], seq, input_ids.device
            )
        else:
            chunk, input_ids = _get_chunked_embedding_full(
                data_embedding_func,
                req_items,
                offsets,
                prefix_length[i],
                seq,
                input_ids,
                input_ids.device,
            )
        if chunk is not None:
            chunks.append(chunk)
    if not chunks:
        return None, input_ids
    return torch.concat(chunks, dim=0), input_ids


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
    embedding = _get_precomputed_embedding(
        embedding_items, items_size, prefix_length, extend_length, items_offset_list
    )
    if embedding is None:
        embedding, input_ids = _get_chunked_prefill_embedding(
            data_embedding_func,
            embedding_items,
            items_size,
            prefix_length,
            extend_length,
            items_offset_list,
            input_ids,
        )
        if embedding is None:
            return None, None, input_ids
    mask = _get_multimodal_mask(input_ids, placeholder_tensor)
    embedding = _adjust_embedding_length(embedding, mask, logger)
    return embedding, mask, input_ids


def embed_mm_inputs(
    mm_inputs_list,
    extend_prefix_lens,
    extend_seq_lens,
    input_ids,
    input_embedding,
    multimodal_model=None,
    data_embedding_func_mapping=None,
    placeholder_tokens=None,
    use_deepstack={},  # noqa: B006 (the engine's own default)
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
        if not items:
            continue
        assert embedder is not None, f"no embedding method found for {modality}"
        placeholder_tensor = torch.as_tensor([item.pad_value for item in items])
        items_size, items_offsets = [0], []
        for mm in mm_inputs_list:
            mine = [item for item in mm.mm_items if item.is_modality(modality=modality)]
            items_size.append(items_size[-1] + len(mine))
            items_offsets.append([run for item in mine for run in item.offsets])
        embedding, mask, input_ids = get_embedding_and_mask(
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
    input_embeds = input_embedding(input_ids)
    for embedding, mask in zip(embeddings, masks, strict=True):
        if embedding is None or mask is None:
            continue
        indices = torch.where(mask.squeeze(dim=-1))[0]
        input_embeds[indices] = embedding.to(input_embeds.device, input_embeds.dtype)
    return input_embeds, {}


def general_mm_embed_routine(
    input_ids,
    forward_batch,
    language_model,
    multimodal_model=None,
    data_embedding_funcs=None,
    placeholder_tokens=None,
    use_deepstack={},  # noqa: B006 (the engine's own default)
    **kwargs,
):
    embed_tokens = language_model.get_input_embeddings()
    if (
        not forward_batch.forward_mode.is_decode()
        and not forward_batch.forward_mode.is_target_verify()
        and forward_batch.contains_mm_inputs()
    ):
        present = [mm is not None for mm in forward_batch.mm_inputs]
        input_embeds, _ = embed_mm_inputs(
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
            use_deepstack=use_deepstack,
        )
        forward_batch.mm_inputs = None
    else:
        input_embeds = embed_tokens(input_ids)
    return language_model(
        input_ids=None, forward_batch=forward_batch, input_embeds=input_embeds, **kwargs
    )
