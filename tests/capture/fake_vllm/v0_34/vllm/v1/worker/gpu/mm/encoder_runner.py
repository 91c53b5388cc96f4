"""Stand-in Model Runner V2 encoder runner, 0.34: items sorted by modality before batching."""

from __future__ import annotations

import numpy as np
import torch

from vllm.multimodal.utils import group_and_batch_mm_kwargs
from vllm.v1.worker.utils import sanity_check_mm_encoder_outputs


class EncoderRunner:
    def __init__(self, model, max_num_tokens: int, hidden_size: int, encoder_cache, dtype, device):
        self.model = model
        self.max_num_tokens = max_num_tokens
        self.hidden_size = hidden_size
        self.encoder_cache = encoder_cache
        self.dtype = dtype
        self.device = device

    def prepare_mm_inputs(self, scheduled_encoder_inputs):
        mm_hashes = []
        mm_kwargs = []
        for req_id, encoder_input_ids in scheduled_encoder_inputs.items():
            mm_features = self.encoder_cache.mm_features[req_id]
            for mm_input_id in encoder_input_ids:
                mm_feature = mm_features[mm_input_id]
                if mm_feature.data is None:
                    continue
                if mm_feature.identifier in self.encoder_cache.encoder_outputs:
                    continue
                mm_hashes.append(mm_feature.identifier)
                mm_kwargs.append((mm_feature.modality, mm_feature.data))
        return mm_hashes, mm_kwargs

    @torch.inference_mode()
    def profile_encoder_cache(self, dummy_mm_inputs, budget=None) -> None:
        max_mm_items_per_batch = len(dummy_mm_inputs)
        dummy_encoder_outputs = self.execute_mm_encoder(dummy_mm_inputs)
        sanity_check_mm_encoder_outputs(
            dummy_encoder_outputs, expected_num_items=max_mm_items_per_batch
        )
        self.encoder_cache.encoder_outputs.update(
            (f"tmp_{i}", output) for i, output in enumerate(dummy_encoder_outputs)
        )

    @torch.inference_mode()
    def execute_mm_encoder(self, mm_kwargs):
        order = sorted(range(len(mm_kwargs)), key=lambda i: mm_kwargs[i][0])
        encoder_outputs = []
        for _modality, num_items, mm_kwargs_batch in group_and_batch_mm_kwargs(
            [mm_kwargs[i] for i in order], device=self.device
        ):
            batch_outputs = self.model.embed_multimodal(**mm_kwargs_batch)
            sanity_check_mm_encoder_outputs(batch_outputs, expected_num_items=num_items)
            encoder_outputs.extend(batch_outputs)
        return [encoder_outputs[i] for i in np.argsort(order)]
