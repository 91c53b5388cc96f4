"""Stand-in vllm.v1.worker.utils."""

from fake_vllm_shared.check import sanity_check_mm_encoder_outputs  # noqa: F401
