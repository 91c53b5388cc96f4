"""Stand-in for ``sglang/srt/managers/mm_schedule.py`` (SGLang 0.5.18–0.5.23), where the
embedding step moved from ``mm_utils`` (which imports ``get_embedding_and_mask`` from here by
name). Names, signatures and call structure only (own code, minimal).

``get_embedding_and_mask`` counts the placeholder tokens from the items' offsets
(``_count_mm_tokens_in_extend``) and hands that count, not the mask, to
``_adjust_embedding_length(embedding, num_mm_tokens_in_input_ids, logger)``. Per-image
requests are encoded in ONE encoder call across the batch (``_batch_encode_per_image_misses``);
the encoder may return one tensor per item (``_flatten_embedding_result``), else its output is
split per item with ``torch.split``. The mask is a ``searchsorted`` over the sorted pad values.
"""

import logging

import torch
from fake_sglang_shared.chunk import get_embedding_chunk, item_overlap, slice_item

logger = logging.getLogger(__name__)

DataEmbeddingFunc = object


def _get_precomputed_embedding(items, items_size, prefix_length, extend_length, items_offset_list):
    if not any(item.precomputed_embeddings is not None for item in items):
        return None
    chunks = []
    for i in range(min(len(items_size) - 1, len(prefix_length))):
        req_items = items[items_size[i] : items_size[i + 1]]
        if not req_items:
            continue
        seq = extend_length[i] if i < len(extend_length) else 0
        full = torch.concat([item.precomputed_embeddings for item in req_items])
        chunks.append(get_embedding_chunk(full, prefix_length[i], seq, items_offset_list[i])[0])
    out = torch.concat(chunks)
    return out.reshape(-1, out.shape[-1])


def _flatten_embedding_result(embedding):
    if isinstance(embedding, list):
        if not embedding:
            raise ValueError("DataEmbeddingFunc returned an empty per-item list")
        return torch.cat([e.reshape(-1, e.shape[-1]) for e in embedding], dim=0)
    return embedding


def _get_chunked_embedding_full(
    data_embedding_func,
    embedding_items_per_req,
    items_offset,
    extend_prefix_len,
    extend_seq_len,
    input_ids,
    device,
):
    embedding = _flatten_embedding_result(data_embedding_func(embedding_items_per_req))
    chunk, _, _ = get_embedding_chunk(embedding, extend_prefix_len, extend_seq_len, items_offset)
    return chunk, input_ids


def _batch_encode_per_image_misses(data_embedding_func, per_image_requests, device):
    misses = []
    for req in per_image_requests:
        end = req["prefix"] + req["extend"]
        req["overlapping"] = [
            (item, n)
            for item in req["items"]
            if (n := item_overlap(item.offsets, req["prefix"], end)) is not None
        ]
        misses += req["overlapping"]
    if not misses:
        return {}
    out = data_embedding_func([item for item, _ in misses])
    if isinstance(out, list):
        assert len(out) == len(misses), (
            f"per-item embedding count {len(out)} != cache-miss item count {len(misses)}"
        )
        per_item = [e.reshape(-1, e.shape[-1]) for e in out]
    else:
        out = out.reshape(-1, out.shape[-1])
        per_item = torch.split(out, [n for _, n in misses], dim=0)
    return {id(item): emb for (item, _), emb in zip(misses, per_item, strict=True)}


def _get_chunked_prefill_embedding(
    data_embedding_func,
    embedding_items,
    items_size,
    prefix_length,
    extend_length,
    items_offset_list,
    input_ids,
):
    per_image, full, chunks = [], [], []
    for i in range(min(len(items_size) - 1, len(prefix_length))):
        if items_size[i] == items_size[i + 1]:
            continue
        req_items = embedding_items[items_size[i] : items_size[i + 1]]
        seq = extend_length[i] if i < len(extend_length) else 0
        if seq <= 0:
            continue
        req = {
            "i": i,
            "items": req_items,
            "offsets": items_offset_list[i],
            "prefix": prefix_length[i],
            "extend": seq,
        }
        if all(len(item.offsets) == 1 or item.is_audio() for item in req_items):
            per_image.append(req)
        else:
            full.append(req)
    embeds = _batch_encode_per_image_misses(data_embedding_func, per_image, input_ids.device)
    for req in per_image:
        for item, _ in req["overlapping"]:
            emb = embeds[id(item)]
            chunks.append((req["i"], slice_item(emb, item.offsets, req["prefix"], req["extend"])))
    for req in full:
        chunk, input_ids = _get_chunked_embedding_full(
            data_embedding_func,
            req["items"],
            req["offsets"],
            req["prefix"],
            req["extend"],
            input_ids,
            input_ids.device,
        )
        chunks.append((req["i"], chunk))
    chunks.sort(key=lambda c: c[0])
    if not chunks:
        return None, input_ids
    return torch.concat([c for _, c in chunks], dim=0), input_ids


def _get_multimodal_mask(input_ids, placeholder_tensor):
    placeholders = placeholder_tensor.to(input_ids.dtype)
    idx = torch.searchsorted(placeholders, input_ids).clamp_(max=placeholders.numel() - 1)
    return (placeholders[idx] == input_ids).unsqueeze(-1)


def _count_mm_tokens_in_extend(prefix_length, extend_length, items_offset_list):
    count = 0
    for i, (start, offsets) in enumerate(zip(prefix_length, items_offset_list, strict=False)):
        end = start + (extend_length[i] if i < len(extend_length) else 0)
        for a, b in offsets:
            count += max(min(b + 1, end) - max(a, start), 0)
    return count


def _adjust_embedding_length(embedding, num_mm_tokens_in_input_ids, logger):
    rows = embedding.shape[0]
    tokens = num_mm_tokens_in_input_ids
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
    tokens = _count_mm_tokens_in_extend(prefix_length, extend_length, items_offset_list)
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
    embedding = _adjust_embedding_length(embedding, tokens, logger)
    return embedding, mask, input_ids
