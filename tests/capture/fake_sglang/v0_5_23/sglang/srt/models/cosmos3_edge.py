"""A model module that imports ``embed_mm_inputs`` by name (as 0.5.23's ``deepseek_v4`` and
``cosmos3_edge`` do) and calls it directly."""

from sglang.srt.managers.mm_utils import embed_mm_inputs


def embed(model, input_ids, forward_batch):
    return embed_mm_inputs(
        mm_inputs_list=[mm for mm in forward_batch.mm_inputs if mm is not None],
        extend_prefix_lens=forward_batch.extend_prefix_lens_cpu,
        extend_seq_lens=forward_batch.extend_seq_lens_cpu,
        input_ids=input_ids,
        input_embedding=model.language_model.get_input_embeddings(),
        multimodal_model=model,
    )
