"""LLaVA-OneVision's dummy image and video (``LlavaOnevisionProcessingInfo`` and
``LlavaOnevisionDummyInputsBuilder``, llava_onevision.py, on LLaVA-NeXT's
``get_num_image_tokens``, llava_next.py), for the encoder profile's dummy batch
(:mod:`mmcli.kv.whatif.mm_dummy`). Served by vLLM 0.10.0 - 0.34.0; the functions are the same
in every release but one: the dummy video's frames (release field ``llava_ov_video``).

The image of most features is a fixed 1,153 (wide) × 944 (high) image
(``get_image_size_with_most_features``). Its tokens: the base image's (the tower's grid², CLIP's
class token less one under ``vision_feature_select_strategy`` ``"default"``), plus the anyres
grid's: the ``image_grid_pinpoints`` entry the image fits best over the tower's ``image_size``
gives rows × columns tiles, grid × rows by grid × columns features, the side the image does not
fill unpadded, one newline a feature row, and where the features exceed 9 tiles' by a ratio
over 1.1 (``anyres_max_9``), both sides divided by that ratio (``_get_num_unpadded_features``).
The encoder runs the tiles and the base image, grid² patches each (CLIP: one more).

The video of most features: frames of ``ceil(grid / 2)²`` tokens (``_get_num_frame_tokens``,
the config's ``spatial_pool_stride``, 2 by default, which the model's pooling always uses) and
one newline; as many frames as fit ``max_model_len`` (0.10.0 - 0.10.1: less one image's tokens
when images are on), at most 16 (``_MAX_FRAMES_PER_VIDEO``), at least 1. The encoder runs every
frame at grid² patches (CLIP: one more). Every placeholder token is an encoder output row, so
0.10.1 - 0.12's whole-placeholder count is the same.

Pixel values are counted as patches × 3 × patch² (a 384-pixel SigLIP tile at patch 14 keeps
27 × 14 = 378 pixels a side: the tile's 384² pixels are undercounted by 3 %).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

from mmcli.kv.whatif.mm_common import NotMirrored, Tower, num, vision_tower
from mmcli.kv.whatif.mm_llava_next import _layers, anyres, best_fit, unpadded

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules

#: The dummy image (``get_image_size_with_most_features``: height, width).
IMAGE: Final = (944, 1153)
#: The most frames a dummy video has (``_MAX_FRAMES_PER_VIDEO``).
MAX_FRAMES: Final = 16
#: The tiles the anyres features are scaled down to beyond a ratio of 1.1 (``anyres_max_9``).
_MAX_TILES: Final = 9


def image_tokens(height: int, width: int, grid: int, rows: int, cols: int) -> int:
    """Unpadded anyres features and their newlines of an image ``height`` × ``width`` on a
    tile grid of ``rows`` × ``cols`` (llava_onevision.py ``_get_num_unpadded_features``)."""
    cur_h, cur_w = unpadded(height, width, grid, rows, cols)
    features, newlines = cur_h * cur_w, cur_h
    ratio = math.sqrt(cur_h * cur_w / (_MAX_TILES * grid**2))
    if ratio > 1.1:
        features, newlines = int(cur_h // ratio) * int(cur_w // ratio), int(cur_h // ratio)
    return features + newlines


def llava_onevision(
    doc: dict[str, Any],
    rules: EngineRules,
    max_model_len: int,
    limits: dict[str, int],
    processor: dict[str, Any] | None,
    video_processor: dict[str, Any] | None,
    kwargs: dict[str, Any],
    text_hidden: int,
    default_limit: int,
) -> tuple[dict[str, int], dict[str, tuple[Tower, int]]]:
    """Tokens an item and (tower, patches) an item of LLaVA-OneVision's dummy image and video."""
    got = anyres(doc, kwargs, "LLaVA-OneVision", "full")
    if doc.get("spatial_pool_stride", 2) != 2:
        raise NotMirrored("spatial_pool_stride other than 2 (the model pools video frames by 2)")
    vision, size, patch, pins = got.vision, got.size, got.patch, got.pins
    grid, positions, base = got.grid, got.positions, got.base
    _check_processors(processor, video_processor, pins, size)
    height, width = IMAGE
    fit_h, fit_w = best_fit(height, width, [(int(h), int(w)) for h, w in pins])
    rows, cols = fit_h // size, fit_w // size
    image = base + image_tokens(height, width, grid, rows, cols)
    image_on = limits.get("image", default_limit) > 0
    room = max_model_len - (image if rules.llava_ov_video == "less-image" and image_on else 0)
    frame = math.ceil(grid / 2) ** 2
    frames = max(min(max(room - 1, 0) // frame, MAX_FRAMES), 1)
    layers = _layers(doc.get("vision_feature_layer", -1), num(vision, "num_hidden_layers"))
    tower = vision_tower(vision, gated=False, patch=patch, out_hidden=text_hidden, layers=layers)
    per_item = {"image": image, "video": frame * frames + 1}
    towers = {"image": (tower, (rows * cols + 1) * positions), "video": (tower, frames * positions)}
    return per_item, towers


def _check_processors(
    processor: dict[str, Any] | None, video: dict[str, Any] | None, pins: list[Any], size: int
) -> None:
    """The image processor tiles by its own pinpoints at ``crop_size`` (else ``size``) and the
    video processor resizes frames to its ``size``: refused unless they are the config's
    pinpoints and the tower's ``image_size``."""
    if processor is not None:
        own = processor.get("image_grid_pinpoints")
        if own is not None and [list(p) for p in own] != [list(p) for p in pins]:
            raise NotMirrored("preprocessor_config.json image_grid_pinpoints unlike the config's")
        crop = processor.get("crop_size")
        tile = crop if isinstance(crop, dict) and crop.get("height") else processor.get("size")
        _check_side(tile, size, "preprocessor_config.json crop_size / size")
    if video is not None:
        _check_side(video.get("size"), size, "video_preprocessor_config.json size")


def _check_side(side: Any, size: int, name: str) -> None:
    side = side if isinstance(side, dict) else {}
    sides = [side[k] for k in ("height", "width", "shortest_edge") if k in side]
    if any(s != size for s in sides):
        raise NotMirrored(f"{name} unlike vision_config.image_size")


__all__ = ["IMAGE", "MAX_FRAMES", "image_tokens", "llava_onevision"]
