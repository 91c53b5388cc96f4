"""Stand-in Model Runner V2 encoder runner, 0.15: features kept per request on the runner."""

from __future__ import annotations

import torch

from vllm.multimodal.utils import group_mm_kwargs_by_modality
from vllm.v1.worker.utils import sanity_check_mm_encoder_outputs


class EncoderRunner:
    def __init__(self, max_num_tokens: int, hidden_size: int, dtype, device):
        self.max_num_tokens = max_num_tokens
        self.hidden_size = hidden_size
        self.dtype = dtype
        self.device = device
        self.req_id_to_mm_features: dict = {}
        self.encoder_cache: dict = {}

    def add_request(self, req_id, mm_features):
        self.req_id_to_mm_features[req_id] = mm_features

    def prepare_mm_inputs(self, scheduled_encoder_inputs):
        mm_hashes = []
        mm_kwargs = []
        for req_id, encoder_input_ids in scheduled_encoder_inputs.items():
            mm_features = self.req_id_to_mm_features[req_id]
            for mm_input_id in encoder_input_ids:
                mm_feature = mm_features[mm_input_id]
                if mm_feature.data is None:
                    continue
                mm_hashes.append(mm_feature.identifier)
                mm_kwargs.append(mm_feature.data)
        return mm_hashes, mm_kwargs

    @torch.inference_mode()
    def execute_mm_encoder(self, model, mm_hashes, mm_kwargs):
        if not mm_hashes:
            return []
        encoder_outputs = []
        for _modality, num_items, mm_kwargs_group in group_mm_kwargs_by_modality(
            mm_kwargs, device=self.device, pin_memory=False
        ):
            curr_group_outputs = model.embed_multimodal(**mm_kwargs_group)
            sanity_check_mm_encoder_outputs(curr_group_outputs, expected_num_items=num_items)
            encoder_outputs.extend(curr_group_outputs)
        for mm_hash, output in zip(mm_hashes, encoder_outputs, strict=False):
            self.encoder_cache[mm_hash] = output
        return encoder_outputs
