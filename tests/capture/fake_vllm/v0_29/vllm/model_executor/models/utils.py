"""Stand-in for vllm.model_executor.models.utils, 0.15-0.34: the merge."""

from __future__ import annotations

from fake_vllm_shared.merge import merge_0_15 as _merge_multimodal_embeddings

__all__ = ["_merge_multimodal_embeddings"]
