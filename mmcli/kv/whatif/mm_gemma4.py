"""Gemma 4's dummy items (``Gemma4ProcessingInfo`` and ``Gemma4DummyInputsBuilder``,
gemma4_mm.py from vLLM 0.19), for the encoder profile's dummy batch
(:mod:`mmcli.kv.whatif.mm_dummy`).

Counts (``get_mm_max_tokens_per_item``): an image is ``vision_config.default_output_length``
tokens (``"config"``) or, from 0.21, the ``--mm-processor-kwargs`` ``max_soft_tokens`` where it
is one of 70, 140, 280, 560, 1120 (``"kwargs"``); a video is 32 frames × (70 soft tokens + 2
begin/end-of-image + 6 timestamp tokens) = 2496; audio (only with an ``audio_config``) the
processor's ``audio_seq_length``. The dummy image and each of the 32 video frames is 224 × 224
(the image processor sets no ``size``); the processor pads a frame's patches to
``max_soft_tokens`` × ``pooling_kernel_size``² and the tower encodes them all; a frame gives
``_compute_num_soft_tokens`` output rows (224 × 224 at 70 soft tokens: 64).

The tower's forward is not mirrored. The tower is transformers' ``Gemma4VisionModel``
(``AutoModel.from_config`` in every release; from 0.34 vLLM inlines the patch embedder's
forward but still calls its ``_position_embeddings``), so its peak is decided by the
transformers release vLLM runs with, which a vLLM release does not fix (its requirement has a
lower bound only). Up to transformers 5.9.0 ``_position_embeddings`` builds
``F.one_hot(positions, position_embedding_size)`` (int64, 2 × ``position_embedding_size`` a
patch) and its cast to the table's dtype, 20 × ``position_embedding_size`` bytes a patch at
bfloat16 (204,800 for the 31B's 10,240), far above the blocks' residual stream; from 5.10.1
two embedding lookups replace it (hidden-size tensors only). vLLM sizes its chunks (from 0.22,
``_encoder_chunk``) for the one-hot either way.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

from mmcli.kv.whatif.mm_common import (
    FamilyItems,
    NotMirrored,
    num,
    vision_section,
    vision_tower,
)

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules

#: Soft tokens a video frame and the frames of the dummy video (``_VIDEO_MAX_SOFT_TOKENS``,
#: ``_VIDEO_MAX_FRAMES``); tokens around each frame: begin/end-of-image 2, timestamp 6.
FRAME_SOFT_TOKENS: Final = 70
VIDEO_FRAMES: Final = 32
FRAME_EXTRA_TOKENS: Final = 2 + 6
#: The ``max_soft_tokens`` values the processor accepts (``_SUPPORTED_SOFT_TOKENS``).
SOFT_TOKENS: Final = (70, 140, 280, 560, 1120)
#: The dummy image's side when the image processor has no ``size`` (``get_dummy_mm_data``).
DUMMY_SIDE: Final = 224
#: The last transformers release whose Gemma 4 patch embedder builds the position one-hot, and
#: the first that looks the positions up instead (transformers PR 46176).
ONE_HOT_LAST: Final = "5.9.0"
LOOKUP_FIRST: Final = "5.10.1"
#: Why the encoder profile is named, not estimated, once the batch is known.
FORWARD_NOTE: Final = (
    "Gemma 4's vision tower is transformers' Gemma4VisionModel, whose peak the transformers "
    f"release decides, not vLLM's: up to transformers {ONE_HOT_LAST} its patch embedder builds "
    "an int64 position one-hot (2 x position_embedding_size a patch) and its cast, from "
    f"{LOOKUP_FIRST} an embedding lookup instead; not mirrored"
)


def soft_tokens(width: int, height: int, patch: int, pool: int, budget: int) -> int:
    """Output rows of an image ``width`` × ``height`` at ``budget`` soft tokens: resized to
    fill ``budget`` × pool² patches in multiples of patch × pool, then pooled by pool²."""
    unit = patch * pool
    scale = math.sqrt(budget * pool * pool / ((height / patch) * (width / patch)))
    side_h = max(unit, math.floor(height * scale / unit) * unit)
    side_w = max(unit, math.floor(width * scale / unit) * unit)
    return min((side_h // patch) * (side_w // patch) // (pool * pool), budget)


def gemma4(
    doc: dict[str, Any],
    rules: EngineRules,
    processor: dict[str, Any] | None,
    kwargs: dict[str, Any],
    text_hidden: int,
    limits: dict[str, int],
    default_limit: int,
) -> FamilyItems:
    """Tokens an item, (tower, patches) an item and encoder output rows an item."""
    if rules.gemma4_image_tokens == "unserved":
        raise NotMirrored(f"vLLM {rules.release} has no Gemma 4 multimodal model (gemma4_mm.py)")
    vision = vision_section(doc)
    if set(kwargs) - {"max_soft_tokens"}:
        raise NotMirrored("--mm-processor-kwargs of Gemma 4's processor other than max_soft_tokens")
    size = (processor or {}).get("size")
    if size:
        raise NotMirrored("Gemma 4's image processor size in preprocessor_config.json")
    patch, pool = num(vision, "patch_size"), num(vision, "pooling_kernel_size")
    image = num(vision, "default_output_length")
    asked = kwargs.get("max_soft_tokens")
    if asked is not None:
        if asked not in SOFT_TOKENS or rules.gemma4_image_tokens != "kwargs":
            raise NotMirrored(f"--mm-processor-kwargs max_soft_tokens {asked!r} of Gemma 4")
        image = asked
    frame = soft_tokens(DUMMY_SIDE, DUMMY_SIDE, patch, pool, FRAME_SOFT_TOKENS)
    per_item = {
        "image": image,
        "video": VIDEO_FRAMES * (FRAME_SOFT_TOKENS + FRAME_EXTRA_TOKENS),
    }
    if isinstance(doc.get("audio_config"), dict) and all(
        limits.get(m, default_limit) <= 0 for m in per_item
    ):
        raise NotMirrored("Gemma 4's dummy audio (the processor's audio_seq_length)")
    tower = vision_tower(vision, gated=True, patch=patch, out_hidden=text_hidden)
    towers = {
        "image": (tower, image * pool * pool),
        "video": (tower, VIDEO_FRAMES * FRAME_SOFT_TOKENS * pool * pool),
    }
    rows = {
        "image": soft_tokens(DUMMY_SIDE, DUMMY_SIDE, patch, pool, image),
        "video": VIDEO_FRAMES * frame,
    }
    return per_item, towers, rows


__all__ = ["FORWARD_NOTE", "gemma4", "soft_tokens"]
