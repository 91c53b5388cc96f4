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
(``internvl_video_text``, :data:`VIDEO_TOKENS`) and the tokenizer has that token
(``ctx_video_token``: ``get_vocab()``), read from the model's ``tokenizer_config.json``
(``added_tokens_decoder``) or ``tokenizer.json`` (``added_tokens`` and ``model.vocab``) by
:func:`video_tokens`; without either file such a config is refused unless
``--limit-mm-per-prompt`` turns video off. The dummy video counted
(``get_num_frames_with_most_features``, one item of each enabled modality) has
(max_model_len − the image's tokens when images are on) // ``image_seq_length`` frames, at
least 1, each one tile of ``image_size`` (the video processor: min = max = 1 tile, no
thumbnail) and ``image_seq_length`` ``ctx_video_token`` tokens, counted by its encoder outputs;
the item the profile run encodes is built again with the video alone, at the length
``mm_encoded_item_len`` names (its frames may differ from those counted). Releases that count
an item by its whole placeholder (``<img>`` / ``</img>``, ``FrameN:`` too, as the tokenizer
splits them) are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from mmcli.kv.whatif.mm_common import FamilyItems, NotMirrored, num, vision_tower

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules

#: The text model types whose InternVL gets a video token, by ``internvl_video_text`` rule.
VIDEO_TEXT_TYPES: Final = {
    "qwen2": ("qwen2",),
    "qwen2-qwen3-gpt-oss": ("qwen2", "qwen3", "qwen3_moe", "gpt_oss"),
}
#: The video token of each text model type (internvl.py ``ctx_video_token_map``; 0.10.0
#: ``get_video_token``: ``qwen2`` only, the same token).
VIDEO_TOKENS: Final = {
    "qwen2": "<|video_pad|>",
    "qwen3": "<|video_pad|>",
    "qwen3_moe": "<|video_pad|>",
    "gpt_oss": "<|reserved_200000|>",
}
#: The tokenizer files read for the video token, in order.
TOKENIZER_FILES: Final = ("tokenizer_config.json", "tokenizer.json")
#: The processor kwargs vLLM hands the image processor in every release.
_KWARGS: Final = ("min_dynamic_patch", "max_dynamic_patch", "dynamic_image_size")


def internvl_chat(
    doc: dict[str, Any],
    rules: EngineRules,
    limits: dict[str, int],
    kwargs: dict[str, Any],
    default_limit: int,
    lengths: tuple[int | None, int] = (None, 0),
    tokenizer: frozenset[str] | None = None,
) -> FamilyItems:
    """Tokens an item, (tower, patches) an item and encoder output rows an item; ``lengths``:
    max_model_len and max_num_batched_tokens; ``tokenizer``: the video tokens the tokenizer
    has (:func:`video_tokens`; None: not read)."""
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
    video = text_type in video_types and limits.get("video", default_limit) > 0
    if video and tokenizer is None:
        raise NotMirrored(
            f"InternVL with a {text_type} text model serves videos if its tokenizer has the "
            f"video token {VIDEO_TOKENS[text_type]}: give the model folder with its "
            f"{' or '.join(TOKENIZER_FILES)}, or --limit-mm-per-prompt with video 0"
        )
    video = video and tokenizer is not None and VIDEO_TOKENS[text_type] in tokenizer
    if video and kwargs:
        raise NotMirrored(
            f"--mm-processor-kwargs with InternVL's dummy video ({sorted(kwargs)[0]})"
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
    tokens, grid = tiles * seq_length, (side // patch) ** 2
    per_item, towers = {"image": tokens}, {"image": (tower, tiles * grid)}
    rows = {"image": tokens}
    if video:
        counted, encoded = _frames(rules, lengths, seq_length, limits, default_limit, tokens)
        per_item["video"], rows["video"] = counted * seq_length, encoded * seq_length
        towers["video"] = (tower, encoded * grid)
    return per_item, towers, rows


def _frames(
    rules: EngineRules,
    lengths: tuple[int | None, int],
    seq_length: int,
    limits: dict[str, int],
    default_limit: int,
    image: int,
) -> tuple[int, int]:
    """Frames of the dummy video counted (beside one image when images are on) and encoded
    (the video alone, built at the length ``mm_encoded_item_len`` names), each at least 1."""
    max_len, batched = lengths
    if max_len is None:
        raise NotMirrored("InternVL's video of most features needs max_model_len")
    room = max_len - (image if limits.get("image", default_limit) > 0 else 0)
    counted = max(room // seq_length, 1)
    rule = rules.mm_encoded_item_len
    length = {"item": counted * seq_length, "batched": batched, "max-model-len": max_len}[rule]
    return counted, max(length // seq_length, 1)


def video_tokens(read: Callable[[str], dict[str, Any] | None]) -> frozenset[str] | None:
    """The :data:`VIDEO_TOKENS` the model's tokenizer has, from the first of
    :data:`TOKENIZER_FILES` ``read`` gives that lists its tokens (None: neither does)."""
    for name in TOKENIZER_FILES:
        doc = read(name) or {}
        decoder, added, model = (
            doc.get("added_tokens_decoder"),
            doc.get("added_tokens"),
            doc.get("model"),
        )
        found: set[Any] = set()
        if isinstance(decoder, dict):
            found |= {v.get("content") for v in decoder.values() if isinstance(v, dict)}
        if isinstance(added, list):
            found |= {v.get("content") for v in added if isinstance(v, dict)}
        if isinstance(model, dict) and isinstance(model.get("vocab"), dict):
            found |= set(model["vocab"])
        if isinstance(decoder, dict) or isinstance(added, list):
            return frozenset(t for t in VIDEO_TOKENS.values() if t in found)
    return None


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


__all__ = ["TOKENIZER_FILES", "VIDEO_TEXT_TYPES", "VIDEO_TOKENS", "internvl_chat", "video_tokens"]
