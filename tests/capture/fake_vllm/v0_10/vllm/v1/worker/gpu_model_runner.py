"""Stand-in V1 runner, 0.10.2-0.11: the names and call order of the encoder step and profiling."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from vllm.multimodal.inputs import MultiModalKwargsItem
from vllm.multimodal.utils import group_mm_kwargs_by_modality
from vllm.v1.worker.utils import sanity_check_mm_encoder_outputs


class GPUModelRunner:
    def __init__(self, model, hidden_size: int, *, dummy_items: int = 2, image_size: int = 8):
        self.model = model
        self.hidden_size = hidden_size
        self.dtype = torch.float32
        self.device = torch.device("cpu")
        self.pin_memory = False
        # vLLM's ModelConfig: the checkpoint's config as hf_config (LLaVA's: the language
        # model's settings under text_config, the image placeholder as image_token_index).
        self.model_config = SimpleNamespace(
            model="fake/llava",
            get_hidden_size=lambda: hidden_size,
            hf_config=getattr(model, "config", None),
        )
        self.requests: dict = {}
        self.encoder_cache: dict = {}
        self.dummy_items = dummy_items
        self.image_size = image_size

    def _batch_mm_kwargs_from_scheduler(self, scheduler_output):
        scheduled_encoder_inputs = scheduler_output.scheduled_encoder_inputs
        if not scheduled_encoder_inputs:
            return [], []
        mm_kwargs = []
        mm_hashes_pos = []
        for req_id, encoder_input_ids in scheduled_encoder_inputs.items():
            req_state = self.requests[req_id]
            for mm_input_id in encoder_input_ids:
                mm_kwargs.append(req_state.mm_kwargs[mm_input_id])
                mm_hashes_pos.append(
                    (req_state.mm_hashes[mm_input_id], req_state.mm_positions[mm_input_id])
                )
        return mm_kwargs, mm_hashes_pos

    def _execute_mm_encoder(self, scheduler_output):
        mm_kwargs, mm_hashes_pos = self._batch_mm_kwargs_from_scheduler(scheduler_output)
        if not mm_kwargs:
            return
        encoder_outputs = []
        for _, num_items, mm_kwargs_group in group_mm_kwargs_by_modality(
            mm_kwargs, device=self.device, pin_memory=self.pin_memory
        ):
            curr_group_outputs = self.model.get_multimodal_embeddings(**mm_kwargs_group)
            sanity_check_mm_encoder_outputs(curr_group_outputs, expected_num_items=num_items)
            encoder_outputs.extend(curr_group_outputs)
        for (mm_hash, _pos), output in zip(mm_hashes_pos, encoder_outputs, strict=False):
            self.encoder_cache[mm_hash] = output

    def _get_mm_dummy_batch(self, modality: str, max_items_per_batch: int):
        size = self.image_size
        dummy = [
            MultiModalKwargsItem(modality, pixel_values=torch.zeros(3, size, size))
            for _ in range(max_items_per_batch)
        ]
        return next(group for _, _, group in group_mm_kwargs_by_modality(dummy, device=self.device))

    def profile_run(self) -> None:
        batched = self._get_mm_dummy_batch("image", self.dummy_items)
        dummy_encoder_outputs = self.model.get_multimodal_embeddings(**batched)
        sanity_check_mm_encoder_outputs(dummy_encoder_outputs, expected_num_items=self.dummy_items)
        for i, output in enumerate(dummy_encoder_outputs):
            self.encoder_cache[f"tmp_{i}"] = output
        self.encoder_cache.clear()
