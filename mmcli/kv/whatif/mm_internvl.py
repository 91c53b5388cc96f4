"""InternVL's dummy image in its original format (``model_type`` ``internvl_chat``,
``InternVLChatModel``: internvl.py ``InternVLProcessingInfo`` and ``InternVLDummyInputsBuilder``;
the processor in internvl.py, from 0.19 transformers_utils/processors/internvl.py), for the
encoder profile's dummy batch (:mod:`mmcli.kv.whatif.mm_dummy`).

The image processor's settings are the config's ``min_dynamic_patch``, ``max_dynamic_patch``,
``dynamic_image_size`` and ``use_thumbnail`` (``--mm-processor-kwargs`` may set the first
three); tiles are squares of ``vision_config.image_size``. The image of most features is cut
into the most tiles the target ratios allow: ``max_dynamic_patch`` (1 without
``dynamic_image_size``), plus one thumbnail tile when ``use_thumbnail`` and more than one tile.
Each tile is (image_size / patch)² patches for the InternViT tower (a class token besides,
not counted) and ``image_seq_length`` = (image_size // patch)² × downsample_ratio² encoder
outputs after the pixel shuffle; the placeholder's ``<IMG_CONTEXT>`` tokens are those outputs,
between ``<img>`` and ``</img>``.

A video is served when the text model's type is one vLLM gives a video token
(``internvl_video_text``) and the tokenizer has that token, which is not read here: such a
config is refused unless ``--limit-mm-per-prompt`` turns video off. Releases that count an item
by its whole placeholder (``<img>`` / ``</img>`` too, as the tokenizer splits them) are refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from mmcli.kv.whatif.mm_common import NotMirrored, Tower, num, vision_tower

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules

#: The text model types whose InternVL gets a video token, by ``internvl_video_text`` rule.
VIDEO_TEXT_TYPES: Final = {
    "qwen2": ("qwen2",),
    "qwen2-qwen3-gpt-oss": ("qwen2", "qwen3", "qwen3_moe", "gpt_oss"),
}
#: The processor kwargs vLLM hands the image processor in every release.
_KWARGS: Final = ("min_dynamic_patch", "max_dynamic_patch", "dynamic_image_size")


def internvl_chat(
    doc: dict[str, Any],
    rules: EngineRules,
    limits: dict[str, int],
    kwargs: dict[str, Any],
    default_limit: int,
) -> tuple[dict[str, int], dict[str, tuple[Tower, int]], dict[str, int]]:
    """Tokens an item, (tower, patches) an item and encoder output rows an item."""
    vision, text = doc.get("vision_config"), doc.get("llm_config")
    if not isinstance(vision, dict) or not isinstance(text, dict):
        raise NotMirrored("the InternVL config lacks vision_config or llm_config")
    arches = text.get("architectures") or [""]
    if isinstance(arches, list) and arches and arches[0] == "InternLM2VEForCausalLM":
        raise NotMirrored("Mono-InternVL (InternLM2VEForCausalLM) is not mirrored")
    if extra := sorted(set(kwargs) - set(_KWARGS)):
        raise NotMirrored(f"--mm-processor-kwargs {extra[0]} of InternVL's processor")
    if rules.mm_dummy_tokens != "embeds":
        raise NotMirrored(
            f"vLLM {rules.release} counts an InternVL image by its whole placeholder (<img> and "
            "</img> around the <IMG_CONTEXT> tokens), which the tokenizer decides"
        )
    text_type = str(text.get("model_type", ""))
    video_types = VIDEO_TEXT_TYPES.get(rules.internvl_video_text)
    if video_types is None:
        raise NotMirrored("InternVL's video support of this release is not mirrored")
    if text_type in video_types and limits.get("video", default_limit) > 0:
        raise NotMirrored(
            f"InternVL with a {text_type} text model serves videos if its tokenizer has the "
            "video token, which is not read: give --limit-mm-per-prompt with video 0"
        )
    side, patch = num(vision, "image_size"), num(vision, "patch_size")
    forced = doc.get("force_image_size")
    if forced is not None and forced != side:
        raise NotMirrored(f"force_image_size {forced} other than vision_config.image_size")
    if side % patch:
        raise NotMirrored(f"an image_size {side} not a multiple of patch_size {patch}")
    ratio = doc.get("downsample_ratio")
    if not isinstance(ratio, int | float) or not 0 < ratio <= 1:
        raise NotMirrored("the InternVL config lacks downsample_ratio as a number in (0, 1]")
    seq_length = int((side // patch) ** 2 * ratio**2)
    tiles = _tiles(doc, kwargs)
    select = doc.get("select_layer")
    if not isinstance(select, int) or isinstance(select, bool):
        raise NotMirrored("the InternVL config lacks select_layer as an integer")
    layers = num(vision, "num_hidden_layers")
    layers = layers + select + 1 if select < 0 else select + 1
    layers = num({"layers": layers}, "layers")
    tower = vision_tower(
        vision, gated=False, patch=patch, out_hidden=num(text, "hidden_size"), layers=layers
    )
    tokens = tiles * seq_length
    return {"image": tokens}, {"image": (tower, tiles * (side // patch) ** 2)}, {"image": tokens}


def _tiles(doc: dict[str, Any], kwargs: dict[str, Any]) -> int:
    """The tiles of the image of most features (``get_image_size_with_most_features``: the
    target ratio of the most tiles, ``calculate_internvl_targets``' thumbnail added)."""
    settings = {key: kwargs.get(key, doc.get(key)) for key in _KWARGS}
    thumbnail = doc.get("use_thumbnail")
    dynamic = settings["dynamic_image_size"]
    if not isinstance(dynamic, bool) or not isinstance(thumbnail, bool):
        raise NotMirrored("the InternVL config lacks dynamic_image_size / use_thumbnail")
    if not dynamic:
        return 1
    low, high = num(settings, "min_dynamic_patch"), num(settings, "max_dynamic_patch")
    if low > high:
        raise NotMirrored(f"min_dynamic_patch {low} above max_dynamic_patch {high}")
    return high + 1 if thumbnail and high != 1 else high


__all__ = ["VIDEO_TEXT_TYPES", "internvl_chat"]
