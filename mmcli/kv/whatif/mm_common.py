"""What the encoder profile's dummy-batch modules share: the encoder geometry, the refusal of
what is not mirrored, Qwen2-VL's image of most features (which Qwen3-VL's reuses) and the
reading of a processor's JSON file."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

#: The aspect-ratio bound of the image with most features (``get_image_size_with_most_features``
#: from 0.13: the closest factor pair of the token count whose ratio is at most 200).
_MAX_RATIO: Final = 200
#: The square side ``_get_vision_info`` resizes before 0.13 (``image_width=9999999``).
_HUGE: Final = 9999999


@dataclass(frozen=True)
class Tower:
    """The encoder's geometry: hidden size, MLP width and whether it is gated (3 wide tensors
    live in a gated MLP: gate, up and their product; 2 in fc1 → activation), and the pixel
    values one patch carries (channels × temporal × patch²)."""

    hidden: int
    intermediate: int
    gated: bool
    layers: int
    pixels_per_patch: int
    #: The width of what the encoder hands the language model (the text hidden size).
    out_hidden: int


#: What a family's reading of a config gives, by modality: tokens an item, (tower, patches) an
#: item and encoder output rows an item.
FamilyItems = tuple[dict[str, int], dict[str, tuple[Tower, int]], dict[str, int]]


def processor_edges(section: dict[str, Any] | None, what: str) -> tuple[int, int]:
    """The ``size`` ``shortest_edge`` and ``longest_edge`` pixels of the ``what`` ("image" or
    "video") processor's settings file (refused where the file or its size is missing)."""
    size = (section or {}).get("size")
    if not isinstance(size, dict):
        raise NotMirrored(
            f"the {what} processor's size is not known: give the model folder (with its "
            f"{'video_' if what == 'video' else ''}preprocessor_config.json)"
        )
    return num(size, "shortest_edge"), num(size, "longest_edge")


def vision_section(doc: dict[str, Any]) -> dict[str, Any]:
    """The config's ``vision_config`` (refused where it has none)."""
    vision = doc.get("vision_config")
    if not isinstance(vision, dict):
        raise NotMirrored("the config has no vision_config")
    return vision


def vision_tower(
    vision: dict[str, Any],
    *,
    gated: bool,
    patch: int,
    out_hidden: int,
    layers: int | None = None,
) -> Tower:
    """The tower of a vision config's ``hidden_size``, ``intermediate_size`` and
    ``num_hidden_layers`` (or the ``layers`` the model runs), over RGB patches of patch²."""
    return Tower(
        hidden=num(vision, "hidden_size"),
        intermediate=num(vision, "intermediate_size"),
        gated=gated,
        layers=num(vision, "num_hidden_layers") if layers is None else layers,
        pixels_per_patch=3 * patch * patch,
        out_hidden=out_hidden,
    )


class NotMirrored(Exception):
    """The family or a setting whose dummy batch is not mirrored (the message says which)."""


def num(section: dict[str, Any], key: str, default: int | None = None) -> int:
    value = section.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise NotMirrored(f"the encoder config lacks {key} as a positive integer")
    return value


def image_shape(max_pixels: int, unit: int, rule: str) -> tuple[int, int]:
    """Height and width of the image with most features: before 0.13 a huge square resized by
    transformers' ``smart_resize`` (floor of the side over ``unit``); from 0.13 the largest
    count ≤ max_pixels // unit² with a factor pair of ratio ≤ 200 (height the smaller)."""
    if rule == "square":
        beta = math.sqrt(_HUGE * _HUGE / max_pixels)
        side = max(unit, math.floor(_HUGE / beta / unit) * unit)
        return side, side
    for count in range(max_pixels // unit**2, 0, -1):
        low = math.isqrt(count)
        while count % low:
            low -= 1
        if count // low / low <= _MAX_RATIO:
            return unit * low, unit * (count // low)
    return unit, unit


def read_json(path: Path | None) -> dict[str, Any] | None:
    """The JSON object in ``path`` (None: no file, or not a JSON object)."""
    import json

    if path is None or not path.is_file():
        return None
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None
