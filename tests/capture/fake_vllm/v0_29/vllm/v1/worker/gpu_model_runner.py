"""Stand-in V1 runner, 0.18-0.32: group_and_batch_mm_kwargs, sequential video, profiling."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from vllm.multimodal.inputs import MultiModalKwargsItem
from vllm.multimodal.utils import group_and_batch_mm_kwargs
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
        self.requires_sequential_video_encoding = True

    def _batch_mm_inputs_from_scheduler(self, scheduler_output):
        scheduled_encoder_inputs = scheduler_output.scheduled_encoder_inputs
        if not scheduled_encoder_inputs:
            return [], [], []
        mm_hashes = []
        mm_kwargs = []
        mm_lora_refs = []
        for req_id, encoder_input_ids in scheduled_encoder_inputs.items():
            req_state = self.requests[req_id]
            for mm_input_id in encoder_input_ids:
                mm_feature = req_state.mm_features[mm_input_id]
                if mm_feature.data is None:
                    continue
                mm_hashes.append(mm_feature.identifier)
                mm_kwargs.append((mm_feature.modality, mm_feature.data))
                mm_lora_refs.append((req_id, mm_feature.mm_position))
        return mm_hashes, mm_kwargs, mm_lora_refs

    def _execute_mm_encoder(self, scheduler_output):
        mm_hashes, mm_kwargs, mm_lora_refs = self._batch_mm_inputs_from_scheduler(scheduler_output)
        if not mm_kwargs:
            return []
        model = self.model
        encoder_outputs = []
        current_item_idx = 0
        for modality, num_items, mm_kwargs_batch in group_and_batch_mm_kwargs(
            mm_kwargs, device=self.device, pin_memory=self.pin_memory
        ):
            if self.requires_sequential_video_encoding and modality == "video" and num_items > 1:
                batch_outputs_lst = []
                for video_idx in range(num_items):
                    video_mm_kwargs_item = mm_kwargs[current_item_idx + video_idx]
                    _, _, micro_batch_mm_inputs = next(
                        group_and_batch_mm_kwargs([video_mm_kwargs_item], device=self.device)
                    )
                    batch_outputs_lst.extend(model.embed_multimodal(**micro_batch_mm_inputs))
                batch_outputs = batch_outputs_lst
            else:
                batch_outputs = model.embed_multimodal(**mm_kwargs_batch)
            sanity_check_mm_encoder_outputs(batch_outputs, expected_num_items=num_items)
            encoder_outputs.extend(batch_outputs)
            current_item_idx += num_items
        for mm_hash, output in zip(mm_hashes, encoder_outputs, strict=False):
            self.encoder_cache[mm_hash] = output
        return encoder_outputs

    def _get_mm_dummy_batch(self, modality: str, max_items_per_batch: int):
        size = self.image_size
        dummy_mm_inputs = [
            (modality, MultiModalKwargsItem(modality, pixel_values=torch.zeros(3, size, size)))
            for _ in range(max_items_per_batch)
        ]
        return next(
            mm_kwargs_batch
            for _, _, mm_kwargs_batch in group_and_batch_mm_kwargs(
                dummy_mm_inputs, device=self.device
            )
        )

    def profile_run(self, randomize_inputs: bool = False) -> None:
        batched_dummy_mm_inputs = self._get_mm_dummy_batch("image", self.dummy_items)
        dummy_encoder_outputs = self.model.embed_multimodal(**batched_dummy_mm_inputs)
        sanity_check_mm_encoder_outputs(dummy_encoder_outputs, expected_num_items=self.dummy_items)
        for i, output in enumerate(dummy_encoder_outputs):
            self.encoder_cache[f"tmp_{i}"] = output
        self.encoder_cache.clear()
