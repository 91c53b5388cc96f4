"""Llama 4's dummy image (Scout, Maverick: ``model_type`` ``llama4``, mllama4.py
``Mllama4ProcessingInfo`` and ``Mllama4DummyInputsBuilder``, the same rule in every release
that serves it, 0.10.0 to 0.34.0), for the encoder profile's dummy batch
(:mod:`mmcli.kv.whatif.mm_dummy`).

Images only (``get_supported_mm_limits``). The image of most features is ``max_patches``
tiles of ``vision_config.image_size`` S stacked (height max_patches × S, width S,
``get_image_size_with_most_features``), ``max_patches`` being the image processor's
(``preprocessor_config.json``; ``--mm-processor-kwargs`` are not mirrored). Its best fit
(``find_supported_resolutions`` / ``get_best_fit``) is exactly n = max_patches tiles in one
column, and the processor adds a global tile when n > 1: n + 1 tiles (1 when n = 1). Each tile
is (S / patch)² patches for the vision tower (a class token besides, not counted) and
(S / patch)² // round(1 / pixel_shuffle_ratio²) encoder outputs after the pixel shuffle, each
one ``<|patch|>`` token. The placeholder (transformers' ``Llama4Processor._prompt_split_image``)
wraps them in ``<|image_start|>``, ``<|image|>`` and ``<|image_end|>`` and closes each of the
n tile rows with ``<|tile_y_separator|>`` (one column: no ``<|tile_x_separator|>``), all single
special tokens: outputs + n + 3 placeholder tokens when n > 1, outputs + 3 otherwise. vLLM
counts an item by its outputs or its placeholder, by release (``mm_dummy_tokens``).

The tower (``Llama4VisionModel``): ``num_hidden_layers`` encoder layers of ``hidden_size``
(LayerNorm, a non-gated GELU MLP ``intermediate_size`` wide) over the patches, then the pixel
shuffle MLP and the projector to the text hidden size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mmcli.kv.whatif.mm_common import (
    FamilyItems,
    NotMirrored,
    num,
    vision_section,
    vision_tower,
)

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules


def llama4(
    doc: dict[str, Any],
    rules: EngineRules,
    processor: dict[str, Any] | None,
    kwargs: dict[str, Any],
    text_hidden: int,
) -> FamilyItems:
    """Tokens an item, (tower, patches) an item and encoder output rows an item."""
    vision = vision_section(doc)
    if kwargs:
        raise NotMirrored(f"--mm-processor-kwargs {sorted(kwargs)[0]} of Llama 4's processor")
    side, patch = num(vision, "image_size"), num(vision, "patch_size")
    if side % patch:
        raise NotMirrored(f"an image_size {side} not a multiple of patch_size {patch}")
    ratio = vision.get("pixel_shuffle_ratio")
    if not isinstance(ratio, int | float) or not 0 < ratio <= 1:
        raise NotMirrored("the vision config lacks pixel_shuffle_ratio as a number in (0, 1]")
    if processor is None or "max_patches" not in processor:
        raise NotMirrored(
            "Llama 4's image processor max_patches is not known: give the model folder (with "
            "its preprocessor_config.json)"
        )
    tiles = num(processor, "max_patches")
    size = processor.get("size")
    if size is not None and size != {"height": side, "width": side}:
        raise NotMirrored(
            f"a Llama 4 image processor size {size} other than vision_config.image_size {side}"
        )
    grid = (side // patch) ** 2
    per_tile = grid // round(1 / ratio**2)
    encoded = tiles + 1 if tiles > 1 else 1
    embeds = encoded * per_tile
    if rules.mm_dummy_tokens == "embeds":
        tokens = embeds
    elif rules.mm_dummy_tokens == "placeholder":
        tokens = embeds + (tiles if tiles > 1 else 0) + 3
    else:
        raise NotMirrored("Llama 4's dummy image of this release is not mirrored")
    tower = vision_tower(vision, gated=False, patch=patch, out_hidden=text_hidden)
    return {"image": tokens}, {"image": (tower, encoded * grid)}, {"image": embeds}


__all__ = ["llama4"]
