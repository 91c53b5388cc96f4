"""Stand-in vllm.multimodal.inputs."""

from fake_vllm_shared.inputs import (  # noqa: F401
    MultiModalFeatureSpec,
    MultiModalKwargsItem,
    PlaceholderRange,
)
