"""Stand-in vllm.multimodal.utils (0.18+ name)."""

from fake_vllm_shared.batching import group_and_batch_mm_kwargs  # noqa: F401
