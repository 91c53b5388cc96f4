"""Mistral 3's dummy image (``Mistral3ProcessingInfo``, mistral3.py, and
``PixtralHFEncoderInfo``, pixtral.py), for the encoder profile's dummy batch
(:mod:`mmcli.kv.whatif.mm_dummy`).

The image of most features is a square of side S: ``vision_config.image_size``
(``"vision-config"``) or, from 0.29, the image processor's ``size["longest_edge"]``
(``"processor"``, ``Mistral3HFEncoderInfo``; ``--mm-processor-kwargs`` ``size`` overrides it).
Its placeholder is a grid of ⌈S / (patch × merge)⌉ columns and as many rows of ``[IMG]``
tokens, each row closed by ``[IMG_BREAK]`` and the last by ``[IMG_END]``: columns × rows
encoder outputs, (columns + 1) × rows placeholder tokens. vLLM counts an item by its placeholder
tokens (``"placeholder"``) or its encoder outputs (``"embeds"``), by release.

The encoder (``PixtralHFVisionModel``): ``num_hidden_layers`` blocks of ``hidden_size``
(RMSNorm, 2D RoPE, a gated SiLU MLP ``intermediate_size`` wide) over (S / patch)² patches,
then the patch merger and the projector to the text hidden size. Mistral's own-format
checkpoints (``params.json``, ``PixtralForConditionalGeneration``) are not mirrored.
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


def own_format(doc: dict[str, Any]) -> bool:
    """A Mistral own-format checkpoint (``params.json``'s ``vision_encoder``, or Pixtral's
    own architecture), whose processor is mistral_common's, not mirrored."""
    arches = doc.get("architectures") or []
    return (
        "vision_encoder" in doc
        or str(doc.get("model_type", "")) == "pixtral"
        or (isinstance(arches, list) and "PixtralForConditionalGeneration" in arches)
    )


def mistral3(
    doc: dict[str, Any],
    rules: EngineRules,
    processor: dict[str, Any] | None,
    kwargs: dict[str, Any],
    text_hidden: int,
) -> FamilyItems:
    """Tokens an item, (tower, patches) an item and encoder output rows an item."""
    vision = vision_section(doc)
    if str(vision.get("model_type", "pixtral")) != "pixtral":
        raise NotMirrored("a Mistral 3 vision tower other than Pixtral's")
    if set(kwargs) - {"size"}:
        raise NotMirrored("--mm-processor-kwargs of Mistral 3's processor other than size")
    patch, merge = num(vision, "patch_size"), num(doc, "spatial_merge_size")
    side = num(vision, "image_size")
    if rules.mistral3_image_size == "processor":
        size = dict((processor or {}).get("size") or {})
        size.update(kwargs.get("size") or {})
        if not isinstance(size.get("longest_edge"), int):
            raise NotMirrored(
                "Mistral 3's image processor size longest_edge is not known: give the model "
                "folder (with its preprocessor_config.json) or mm_processor_kwargs size"
            )
        side = num(size, "longest_edge")
    elif kwargs:
        raise NotMirrored("--mm-processor-kwargs size of Mistral 3 with this release")
    unit = patch * merge
    if side % unit:
        raise NotMirrored(f"an image side {side} not a multiple of patch x merge {unit}")
    grid = side // unit
    embeds = grid * grid
    if rules.mm_dummy_tokens not in ("placeholder", "embeds"):
        raise NotMirrored("Mistral 3's dummy image of this release is not mirrored")
    tokens = (grid + 1) * grid if rules.mm_dummy_tokens == "placeholder" else embeds
    tower = vision_tower(vision, gated=True, patch=patch, out_hidden=text_hidden)
    return {"image": tokens}, {"image": (tower, embeds * merge * merge)}, {"image": embeds}


__all__ = ["mistral3", "own_format"]
