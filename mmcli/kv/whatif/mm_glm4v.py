"""GLM-4.1V / GLM-4.5V / GLM-4.6V's dummy image (``Glm4vProcessingInfo``, glm4_1v.py; the
``glm4v_moe`` models are served by the same file), for the encoder profile's dummy batch
(:mod:`mmcli.kv.whatif.mm_dummy`).

The dummy image is a huge square (9,999,999 pixels a side) resized by transformers'
``Glm4vImageProcessor`` ``smart_resize`` (num_frames, height, width, temporal factor, factor
= patch × merge, min / max pixels): while t̄ × h̄ × w̄ (the frames rounded to the temporal
factor, the sides to the factor) exceed max pixels, each side becomes
⌊side / √(frames × h × w / max) / factor⌋ × factor (never under one factor). vLLM resizes it
as 16 frames at 28 · 28 · 2 · 30,000 pixels (``"frames-16"``) or, from 0.17, as one frame
(taken as ``temporal_patch_size`` frames) at the image processor's ``size["longest_edge"]``
(``"processor"``); the HF image processor then resizes what it is given as
``temporal_patch_size`` frames between its ``size`` ``shortest_edge`` and ``longest_edge``.
An image of h × w pixels is (h / patch) × (w / patch) patches and that over merge² tokens,
each one ``<|image|>`` placeholder token and one encoder output row.

The dummy video (``get_num_frames_with_most_features``, release field ``glm4v_video``) is the
image's square as n frames (at least two from 0.13), its frames kept as given
(``do_sample_frames`` False): n is the most frames whose vision tokens (vLLM's own
``_get_vision_info`` at 28 · 28 · 2 · 30,000 pixels) fit ``max_model_len`` less one image's
tokens when images are on, at most 600 (``"fit"``), or, from 0.26, the frame count up to 600
of most vision tokens within that bound at the video processor's ``size["longest_edge"]``
(``"most-budget"``). The HF video processor resizes the n frames by the same ``smart_resize``
between its ``size`` edges: ⌈n / temporal⌉ × (side / patch)² / merge² encoder rows, each one
``<|video|>`` token; the timestamps and begin / end tokens around each frame are not counted
(``select_token_id``) except in 0.10.1 – 0.12 (``mm_dummy_tokens`` ``"placeholder"``:
tokenized timestamps, refused). From 0.23 (``"fit-budget"``, ``"most-budget"``) a processor
other than ``Glm4vProcessor`` (GLM-4.6V's) bounds a video by its tokenizer's timestamps
(``get_mm_max_tokens_per_item``): refused, as is a processor class not named in
``preprocessor_config.json``. vLLM 0.10.0's dummy video (frames sampled by the video processor)
is refused.

The encoder (``Glm4vVisionTransformer``): ``depth`` blocks of the vision ``hidden_size`` whose
gated SiLU MLP (``Glm4vVisionMLP``) is ``out_hidden_size`` wide, then the downsample and the
patch merger to ``out_hidden_size``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

from mmcli.kv.whatif.mm_common import (
    FamilyItems,
    NotMirrored,
    Tower,
    num,
    processor_edges,
    vision_section,
)

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules

#: The model types served by glm4_1v.py (GLM-4.1V; GLM-4.5V / GLM-4.6V).
GLM4V: Final = ("glm4v", "glm4v_moe")
#: The side of the square vLLM resizes (``image_width=9999999``).
_HUGE: Final = 9999999
#: ``_get_vision_info``'s default frames and max pixels (``"frames-16"``).
_OLD_FRAMES: Final = 16
_OLD_MAX_PIXELS: Final = 28 * 28 * 2 * 30000
#: ``get_supported_mm_limits``: one video a prompt at most, images unbounded.
SUPPORTED_LIMITS: Final = {"video": 1}
#: ``get_num_image_tokens``'s max pixels before 0.17 (the image bound the video is fit beside).
_OLD_IMAGE_PIXELS: Final = 28 * 28 * 2 * 6144
#: ``_MAX_FRAMES_PER_VIDEO`` of glm4_1v.py: the most frames of the dummy video.
MAX_FRAMES: Final = 600
#: The least pixels of transformers' ``smart_resize`` default (vLLM passes none).
_MIN_PIXELS: Final = 112 * 112
#: The ``glm4v_video`` rules mirrored, and those that ask the processor class.
_VIDEO_RULES: Final = ("fit", "fit-budget", "most-budget")
_BUDGET_RULES: Final = ("fit-budget", "most-budget")


def smart_resize(frames: int, side: int, temporal: int, factor: int, least: int, most: int) -> int:
    """transformers' GLM-4V ``smart_resize`` of a square of ``side`` pixels (the new side)."""
    bar = round(side / factor) * factor
    t_bar = round(frames / temporal) * temporal
    if t_bar * bar * bar > most:
        beta = math.sqrt(frames * side * side / most)
        return max(factor, math.floor(side / beta / factor) * factor)
    if t_bar * bar * bar < least:
        beta = math.sqrt(least / (frames * side * side))
        return math.ceil(side * beta / factor) * factor
    return bar


def glm4v(
    doc: dict[str, Any],
    rules: EngineRules,
    processor: dict[str, Any] | None,
    kwargs: dict[str, Any],
    limits: dict[str, int],
    default_limit: int,
    video_processor: dict[str, Any] | None = None,
    max_model_len: int | None = None,
) -> FamilyItems:
    """Tokens an item, (tower, patches) an item and encoder output rows an item."""
    if rules.glm4v_image not in ("frames-16", "processor"):
        raise NotMirrored("GLM-4.1V's dummy image of this release is not mirrored")
    if kwargs:
        raise NotMirrored(
            f"--mm-processor-kwargs {', '.join(sorted(kwargs))} of GLM-4.1V's processor"
        )
    vision = vision_section(doc)
    patch, merge = num(vision, "patch_size"), num(vision, "spatial_merge_size")
    temporal = num(vision, "temporal_patch_size")
    least, most = processor_edges(processor, "image")
    factor = patch * merge
    if rules.glm4v_image == "frames-16":
        target = smart_resize(_OLD_FRAMES, _HUGE, temporal, factor, 0, _OLD_MAX_PIXELS)
        # get_max_image_tokens: the target as 16 frames under 28 · 28 · 2 · 6144 pixels.
        most_image = vision_tokens(_OLD_FRAMES, target, patch, merge, temporal, _OLD_IMAGE_PIXELS)
    else:
        target = smart_resize(temporal, _HUGE, temporal, factor, 0, most)
        most_image = vision_tokens(1, target, patch, merge, temporal, most)
    side = smart_resize(temporal, target, temporal, factor, least, most)
    patches = (side // patch) ** 2
    tokens = patches // merge**2
    image_on = limits.get("image", default_limit) > 0
    per_item, rows = {"image": tokens}, {"image": tokens}
    if limits.get("video", default_limit) > 0:
        if max_model_len is None:
            raise NotMirrored("GLM-4.1V's dummy video needs max_model_len")
        fields = (rules, processor or {}, video_processor)
        seq = max_model_len - (most_image if image_on else 0)
        per_item["video"] = _video(*fields, seq, target, patch, merge, temporal)
        # The profile run encodes a video built alone at max_model_len (no image taken off):
        # _get_mm_dummy_batch's mm_counts={modality: 1} (v1/worker/gpu_model_runner.py).
        if rules.mm_encoded_item_len != "max-model-len":
            raise NotMirrored(f"GLM-4.1V's encoded dummy video of vLLM {rules.release}")
        rows["video"] = _video(*fields, max_model_len, target, patch, merge, temporal)
    tower = Tower(
        hidden=num(vision, "hidden_size"),
        intermediate=num(vision, "out_hidden_size"),
        gated=True,
        layers=num(vision, "depth"),
        pixels_per_patch=3 * temporal * patch * patch,
        out_hidden=num(vision, "out_hidden_size"),
    )
    towers = {m: (tower, t * merge**2) for m, t in rows.items()}
    return per_item, towers, rows


def vision_tokens(frames: int, side: int, patch: int, merge: int, temporal: int, most: int) -> int:
    """vLLM's ``_get_vision_info``: a square of ``side`` pixels as ``frames`` frames resized
    under ``most`` pixels (as at least ``temporal`` frames), ⌈frames / temporal⌉ × (h / patch)²
    / merge² tokens."""
    new = smart_resize(max(frames, temporal), side, temporal, patch * merge, _MIN_PIXELS, most)
    grid_t = max((frames + frames % temporal) // temporal, 1)
    return grid_t * (new // patch) ** 2 // merge**2


def _video(
    rules: EngineRules,
    processor: dict[str, Any],
    video_processor: dict[str, Any] | None,
    seq: int,
    side: int,
    patch: int,
    merge: int,
    temporal: int,
) -> int:
    """Encoder rows (and ``<|video|>`` tokens) of the dummy video within ``seq`` tokens."""
    rule = rules.glm4v_video
    if rules.mm_dummy_tokens == "placeholder":
        raise NotMirrored(
            f"vLLM {rules.release} counts GLM-4.1V's dummy video by its whole placeholder "
            "(tokenized timestamps and begin/end tokens around each frame), which the tokenizer "
            "decides: give --limit-mm-per-prompt with video 0"
        )
    if rule not in _VIDEO_RULES:
        raise NotMirrored(
            f"GLM-4.1V's dummy video of vLLM {rules.release} (frames sampled by its video "
            "processor) is not mirrored: give --limit-mm-per-prompt with video 0"
        )
    named = processor.get("processor_class")
    if rule in _BUDGET_RULES and named != "Glm4vProcessor":
        raise NotMirrored(
            f"vLLM {rules.release} bounds a video of a processor other than Glm4vProcessor by "
            f"its tokenizer's timestamps; this one is {named or 'not named in the model folder'}"
            ": give --limit-mm-per-prompt with video 0"
        )
    if temporal != 2:
        raise NotMirrored("GLM-4.1V's dummy video with a temporal_patch_size other than 2")
    least, most = processor_edges(video_processor, "video")
    if rule == "most-budget":
        frames, best = 1, 0
        for count in range(1, MAX_FRAMES + 1):
            got = vision_tokens(count, side, patch, merge, temporal, most)
            if 0 < got <= seq and got > best:
                frames, best = count, got
    else:
        frames = 0
        while True:
            got = vision_tokens(frames + 1, side, patch, merge, temporal, _OLD_MAX_PIXELS)
            if got > seq or got == 0:
                break
            frames += 1
        frames = max(min(frames, MAX_FRAMES), 1)
    frames = max(frames, 2)
    new = smart_resize(frames, side, temporal, patch * merge, least, most)
    return -(-frames // temporal) * (new // patch) ** 2 // merge**2


__all__ = ["GLM4V", "MAX_FRAMES", "SUPPORTED_LIMITS", "glm4v", "smart_resize", "vision_tokens"]
