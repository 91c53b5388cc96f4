"""Stand-in for ``sglang/srt/managers/mm_utils.py`` of SGLang 0.5.18–0.5.23: the embedding step
itself lives in ``mm_schedule`` and is imported here BY NAME; ``embed_mm_inputs`` sorts the
items' ``padding_values()`` into the placeholder tensor and scatters with
``_scatter_mm_embedding``; ``general_mm_embed_routine`` goes through ``prepare_mm_inputs``.
"""

import torch

from sglang.srt.managers.mm_schedule import (
    DataEmbeddingFunc,
    get_embedding_and_mask,
)
from sglang.srt.managers.schedule_batch import Modality

__all__ = ["DataEmbeddingFunc", "embed_mm_inputs", "general_mm_embed_routine"]


def _scatter_mm_embedding(dest, mask, src):
    src = src.to(dest.device, dest.dtype)
    rows = torch.nonzero(mask.view(-1)).flatten()
    dest.index_copy_(0, rows, src)


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
        pad_values = sorted(value for item in items for value in item.padding_values())
        placeholder_tensor = torch.as_tensor(pad_values)
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
        if use_deepstack.get(modality, None) and embedding is not None:
            embedding, _ = multimodal_model.separate_deepstack_embeds(embedding)
        embeddings.append(embedding)
        masks.append(mask)
    input_ids.clamp_(min=0, max=input_embedding.num_embeddings - 1)
    input_embeds = input_embedding(input_ids)
    for embedding, mask in zip(embeddings, masks, strict=True):
        if embedding is None or mask is None:
            continue
        _scatter_mm_embedding(dest=input_embeds, mask=mask, src=embedding)
    return input_embeds, {}


def prepare_mm_inputs(
    input_ids,
    forward_batch,
    language_model,
    kwargs,
    multimodal_model=None,
    data_embedding_funcs=None,
    placeholder_tokens=None,
    use_deepstack={},  # noqa: B006 (the engine's own default)
    feature_dtypes=None,
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
        forward_batch.mm_input_embeds = input_embeds
        return input_embeds
    return embed_tokens(input_ids)


def general_mm_embed_routine(
    input_ids,
    forward_batch,
    language_model,
    multimodal_model=None,
    data_embedding_funcs=None,
    placeholder_tokens=None,
    use_deepstack={},  # noqa: B006 (the engine's own default)
    feature_dtypes=None,
    **kwargs,
):
    input_embeds = prepare_mm_inputs(
        input_ids,
        forward_batch,
        language_model,
        kwargs,
        multimodal_model,
        data_embedding_funcs,
        placeholder_tokens,
        use_deepstack,
        feature_dtypes,
    )
    return language_model(
        input_ids=None, forward_batch=forward_batch, input_embeds=input_embeds, **kwargs
    )
