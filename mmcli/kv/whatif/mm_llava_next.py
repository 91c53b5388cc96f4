"""LLaVA-NeXT's dummy image (``LlavaNextProcessingInfo``, llava_next.py, on
``BaseLlavaProcessingInfo`` / ``LlavaDummyInputsBuilder``, llava.py), for the encoder
profile's dummy batch (:mod:`mmcli.kv.whatif.mm_dummy`). The same in every release that serves
the model (vLLM 0.10.0 - 0.34.0: the functions differ only in formatting and typing).

The image of most features is the ``image_grid_pinpoints`` entry (height, width) whose token
count is largest (``get_image_size_with_most_features``). An image of height h and width w
counts (``get_num_image_tokens``): the base image's tokens (the tower's grid², plus CLIP's
class token, less one under ``vision_feature_select_strategy`` ``"default"``), plus the anyres
grid's: the pinpoint the image fits best (transformers' ``select_best_resolution``: the most
effective pixels, then the least padding) over the tower's ``image_size`` gives rows × columns
tiles, grid × rows by grid × columns features, the side the image does not fill unpadded, and
one newline a feature row. Every placeholder token is an image token, so the count is the same
whether vLLM counts the placeholder or its embeddings.

The encoder (``init_vision_tower_for_llava``): CLIP or SigLIP, ``vision_feature_layer`` deciding
how many layers run (a negative index i: num_hidden_layers + i + 1), a non-gated MLP; it encodes
the base image and every tile (the processor's ``crop_size`` tiles of the best pinpoint): tiles
+ 1 images, each grid² patches (CLIP adds its class token: grid² + 1 positions, counted as
patches here, so the pixel values are over-counted by one patch an image).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmcli.kv.whatif.mm_common import NotMirrored, Tower, num, vision_section, vision_tower

#: The vision towers mirrored, by ``vision_config.model_type``: whether a class token is added.
_TOWERS = {"clip_vision_model": True, "siglip_vision_model": False}


def best_fit(height: int, width: int, pinpoints: list[tuple[int, int]]) -> tuple[int, int]:
    """The pinpoint an image of ``height`` × ``width`` is resized into: the most effective
    pixels (the image scaled to fit, capped at its own), then the least wasted."""
    best, most, least = pinpoints[0], -1, 0
    for pin_h, pin_w in pinpoints:
        scale = min(pin_w / width, pin_h / height)
        effective = min(int(width * scale) * int(height * scale), width * height)
        wasted = pin_w * pin_h - effective
        if effective > most or (effective == most and wasted < least):
            best, most, least = (pin_h, pin_w), effective, wasted
    return best


def unpadded(height: int, width: int, grid: int, rows: int, cols: int) -> tuple[int, int]:
    """The feature rows and columns of an image ``height`` × ``width`` on a tile grid of
    ``rows`` × ``cols``, its padding taken off (``_get_num_unpadded_features`` of llava_next.py
    and llava_onevision.py)."""
    cur_h, cur_w = grid * rows, grid * cols
    if width / height > cur_w / cur_h:
        new_h = int(round(height * (cur_w / width), 7))
        cur_h -= 2 * ((cur_h - new_h) // 2)
    else:
        new_w = int(round(width * (cur_h / height), 7))
        cur_w -= 2 * ((cur_w - new_w) // 2)
    return cur_h, cur_w


def _features(height: int, width: int, grid: int, rows: int, cols: int) -> int:
    """Unpadded features and their newlines (one a feature row)."""
    cur_h, cur_w = unpadded(height, width, grid, rows, cols)
    return cur_h * cur_w + cur_h


@dataclass(frozen=True)
class Anyres:
    """What LLaVA-NeXT and LLaVA-OneVision read alike from a config: the vision config, the
    tile side (``image_size``) and ``patch_size``, the ``image_grid_pinpoints``, the grid side a
    tile, the tower's positions a tile (grid², and a CLIP class token) and the base image's
    tokens (less the class token under the ``"default"`` feature select strategy)."""

    vision: dict[str, Any]
    size: int
    patch: int
    pins: list[Any]
    grid: int
    positions: int
    base: int


def anyres(doc: dict[str, Any], kwargs: dict[str, Any], family: str, strategy: str) -> Anyres:
    """The :class:`Anyres` reading of ``doc`` (``strategy``: the family's default
    ``vision_feature_select_strategy``); refused for another tower, processor kwargs, or a
    config without pinpoints."""
    vision = vision_section(doc)
    tower_type = str(vision.get("model_type", ""))
    if tower_type not in _TOWERS:
        raise NotMirrored(f"a {family} vision tower {tower_type!r} (CLIP and SigLIP are)")
    if kwargs:
        raise NotMirrored(f"--mm-processor-kwargs {', '.join(sorted(kwargs))} of {family}")
    size, patch = num(vision, "image_size"), num(vision, "patch_size")
    pins = doc.get("image_grid_pinpoints")
    if not isinstance(pins, list) or not pins:
        raise NotMirrored("the config lacks image_grid_pinpoints")
    grid = size // patch
    positions = grid * grid + (1 if _TOWERS[tower_type] else 0)
    strategy = doc.get("vision_feature_select_strategy", strategy)
    if strategy not in ("default", "full"):
        raise NotMirrored(f"vision_feature_select_strategy {strategy!r}")
    base = positions - 1 if strategy == "default" else positions
    return Anyres(vision, size, patch, pins, grid, positions, base)


def llava_next(
    doc: dict[str, Any], processor: dict[str, Any] | None, kwargs: dict[str, Any], text_hidden: int
) -> tuple[dict[str, int], dict[str, tuple[Tower, int]]]:
    """Tokens an item and (tower, patches) an item of LLaVA-NeXT's largest image."""
    got = anyres(doc, kwargs, "LLaVA-NeXT", "default")
    vision, size, patch = got.vision, got.size, got.patch
    grid, positions, base = got.grid, got.positions, got.base
    pinpoints = [(int(h), int(w)) for h, w in got.pins]
    if processor is not None:
        _check_processor(processor, got.pins, size)
    best = (0, 0)  # tokens and tiles of the first pinpoint of most tokens
    for height, width in pinpoints:
        fit_h, fit_w = best_fit(height, width, pinpoints)
        rows, cols = fit_h // size, fit_w // size
        tokens = base + _features(height, width, grid, rows, cols)
        if tokens > best[0]:
            best = (tokens, rows * cols)
    tokens, tiles = best
    layers = _layers(doc.get("vision_feature_layer", -2), num(vision, "num_hidden_layers"))
    tower = vision_tower(vision, gated=False, patch=patch, out_hidden=text_hidden, layers=layers)
    return {"image": tokens}, {"image": (tower, (tiles + 1) * positions)}


def _check_processor(processor: dict[str, Any], pins: list[Any], size: int) -> None:
    """The image processor tiles by its own pinpoints and ``crop_size``: refused unless they
    are the config's pinpoints and the tower's ``image_size``."""
    own = processor.get("image_grid_pinpoints")
    if own is not None and [list(p) for p in own] != [list(p) for p in pins]:
        raise NotMirrored("preprocessor_config.json image_grid_pinpoints unlike the config's")
    crop = processor.get("crop_size")
    crop = crop if isinstance(crop, dict) else {}
    if any(crop.get(k, size) != size for k in ("height", "width")):
        raise NotMirrored("preprocessor_config.json crop_size unlike vision_config.image_size")


def _layers(feature_layer: Any, total: int) -> int:
    """The tower layers that run (llava.py ``_get_num_hidden_layers``)."""
    picks = feature_layer if isinstance(feature_layer, list) else [feature_layer]
    if not picks or not all(isinstance(i, int) and not isinstance(i, bool) for i in picks):
        raise NotMirrored("vision_feature_layer is not an integer or a list of them")
    return int(max(total + i + 1 if i < 0 else i for i in picks))


__all__ = ["best_fit", "llava_next"]
