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

The dummy video (frames sampled by the video processor, placeholders with tokenized
timestamps) is not mirrored: it is refused unless ``--limit-mm-per-prompt`` turns video off.

The encoder (``Glm4vVisionTransformer``): ``depth`` blocks of the vision ``hidden_size`` whose
gated SiLU MLP (``Glm4vVisionMLP``) is ``out_hidden_size`` wide, then the downsample and the
patch merger to ``out_hidden_size``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

from mmcli.kv.whatif.mm_common import NotMirrored, Tower, num

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules

#: The model types served by glm4_1v.py (GLM-4.1V; GLM-4.5V / GLM-4.6V).
GLM4V: Final = ("glm4v", "glm4v_moe")
#: The side of the square vLLM resizes (``image_width=9999999``).
_HUGE: Final = 9999999
#: ``_get_vision_info``'s default frames and max pixels (``"frames-16"``).
_OLD_FRAMES: Final = 16
_OLD_MAX_PIXELS: Final = 28 * 28 * 2 * 30000


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
) -> tuple[dict[str, int], dict[str, tuple[Tower, int]], dict[str, int]]:
    """Tokens an item, (tower, patches) an item and encoder output rows an item."""
    if rules.glm4v_image not in ("frames-16", "processor"):
        raise NotMirrored("GLM-4.1V's dummy image of this release is not mirrored")
    if kwargs:
        raise NotMirrored(
            f"--mm-processor-kwargs {', '.join(sorted(kwargs))} of GLM-4.1V's processor"
        )
    if limits.get("video", default_limit) > 0:
        raise NotMirrored(
            "GLM-4.1V's dummy video (frames sampled by its video processor, tokenized "
            "timestamps) is not mirrored: give --limit-mm-per-prompt with video 0"
        )
    vision = doc.get("vision_config")
    if not isinstance(vision, dict):
        raise NotMirrored("the config has no vision_config")
    patch, merge = num(vision, "patch_size"), num(vision, "spatial_merge_size")
    temporal = num(vision, "temporal_patch_size")
    size = (processor or {}).get("size")
    if not isinstance(size, dict):
        raise NotMirrored(
            "GLM-4.1V's image processor size is not known: give the model folder (with its "
            "preprocessor_config.json)"
        )
    least, most = num(size, "shortest_edge"), num(size, "longest_edge")
    factor = patch * merge
    if rules.glm4v_image == "frames-16":
        side = smart_resize(_OLD_FRAMES, _HUGE, temporal, factor, 0, _OLD_MAX_PIXELS)
    else:
        side = smart_resize(temporal, _HUGE, temporal, factor, 0, most)
    side = smart_resize(temporal, side, temporal, factor, least, most)
    patches = (side // patch) ** 2
    tokens = patches // merge**2
    tower = Tower(
        hidden=num(vision, "hidden_size"),
        intermediate=num(vision, "out_hidden_size"),
        gated=True,
        layers=num(vision, "depth"),
        pixels_per_patch=3 * temporal * patch * patch,
        out_hidden=num(vision, "out_hidden_size"),
    )
    return {"image": tokens}, {"image": (tower, patches)}, {"image": tokens}


__all__ = ["GLM4V", "glm4v", "smart_resize"]
