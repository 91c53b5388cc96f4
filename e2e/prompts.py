"""The e2e prompts and their images, the same on the transformers and the vLLM side."""

from __future__ import annotations

from typing import Any

PROMPTS = [f"user <image> describe the image {word} assistant" for word in ("cat", "dog")]


def image(index: int) -> Any:
    """Image ``index``: 32 x 32 random pixels (distinct: identical ones hit vLLM's encoder
    cache)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(index)
    return Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8))
