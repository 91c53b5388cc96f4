"""Stand-in vllm.multimodal.utils (0.10-0.15 name)."""

from fake_vllm_shared.batching import group_mm_kwargs_by_modality  # noqa: F401
