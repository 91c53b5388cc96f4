"""Qwen3-VL's dummy image and video (``Qwen3VLProcessingInfo``, qwen3_vl.py), for the encoder
profile's dummy batch (:mod:`mmcli.kv.whatif.mm_dummy`); Qwen3.5 / Qwen3.6 take the same
(qwen3_5.py subclasses it, with Qwen3-VL's dummy builder and vision tower).

The image of most features is Qwen2-VL's (the image processor's ``size["longest_edge"]``
pixels, patch × merge units). The video of most features starts from that image's size and,
frame count by frame count from two, keeps the most frames whose video tokens fit
``max_model_len`` (at most 24576 frames a video), each frame count resized by the video
processor's own ``smart_resize`` (transformers' ``video_processing_qwen3_vl``): while frames ×
height × width exceed the video processor's ``size["longest_edge"]``, the frame is scaled down
by sqrt(frames × area / longest_edge), floored to the unit (never under one unit). A video's
tokens are ⌈frames / temporal⌉ × (height / patch) × (width / patch) / merge². The video item's
placeholder tokens were its encoder tokens × 12.5 (``"frames-12.5"``: "<t seconds>" timestamps
and vision start / end tokens around each token, on average), then the encoder tokens
(``"frames"``). The later dummy video (``"two-frames"``) is two frames whatever
``max_model_len``: the image of most features at the video processor's ``longest_edge`` //
its ``temporal_patch_size`` pixels, resized as a two-frame video by the same ``smart_resize``,
one encoder token a placeholder token; a video processor that caps pixels a frame
(``cap_pixels_per_frame``) is not mirrored.

The encoder (``Qwen3_VisionTransformer``): ``depth`` blocks of ``hidden_size``, a non-gated
MLP (``linear_fc1`` → activation → ``linear_fc2``, ``intermediate_size`` wide), and outputs of
``out_hidden_size`` × (1 + len(``deepstack_visual_indexes``)) a token (the merger's output
concatenated with each deepstack merger's).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

from mmcli.kv.whatif.mm_common import (
    FamilyItems,
    NotMirrored,
    Tower,
    image_shape,
    num,
    processor_edges,
    vision_section,
)

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules

#: ``_MAX_FRAMES_PER_VIDEO`` of qwen3_vl.py: the most frames of the dummy video.
MAX_FRAMES: Final = 24576
#: The first frame count tried (``_get_max_video_frames(start_num_frames=2)``).
START_FRAMES: Final = 2
#: Placeholder tokens a video encoder token, by rule (timestamps and start / end tokens).
_TOKEN_FACTOR: Final = {"frames-12.5": 12.5, "frames": 1.0, "two-frames": 1.0}


def _video_side(
    frames: int, height: int, width: int, temporal: int, unit: int, least: int, most: int
) -> tuple[int, int]:
    """transformers' Qwen3-VL video ``smart_resize`` of a ``frames``-frame video whose frames
    are ``height`` × ``width`` (multiples of ``unit`` already)."""
    h_bar, w_bar = round(height / unit) * unit, round(width / unit) * unit
    t_bar = round(frames / temporal) * temporal
    if t_bar * h_bar * w_bar > most:
        beta = math.sqrt(frames * height * width / most)
        h_bar = max(unit, math.floor(height / beta / unit) * unit)
        w_bar = max(unit, math.floor(width / beta / unit) * unit)
    elif t_bar * h_bar * w_bar < least:
        beta = math.sqrt(least / (frames * height * width))
        h_bar = math.ceil(height * beta / unit) * unit
        w_bar = math.ceil(width * beta / unit) * unit
    return h_bar, w_bar


def qwen3_vl(
    doc: dict[str, Any],
    rules: EngineRules,
    max_model_len: int,
    limits: dict[str, int],
    processor: dict[str, Any] | None,
    video_processor: dict[str, Any] | None,
    default_limit: int,
) -> FamilyItems:
    """Tokens an item, (tower, patches) an item and encoder output rows an item, by modality."""
    rule = rules.qwen3_vl_video
    if rule not in _TOKEN_FACTOR:
        raise NotMirrored("Qwen3-VL's dummy items of this release are not mirrored")
    vision = vision_section(doc)
    patch, merge = num(vision, "patch_size"), num(vision, "spatial_merge_size")
    temporal = num(vision, "temporal_patch_size")
    unit = patch * merge
    _, longest = processor_edges(processor, "image")
    height, width = image_shape(longest, unit, rules.qwen_vl_image)
    image = (height // patch) * (width // patch) // merge**2
    per_item, rows = {"image": image}, {"image": image}
    if limits.get("video", default_limit) > 0:
        least, most = processor_edges(video_processor, "video")
        if rule == "two-frames":
            video = _two_frames(
                video_processor or {}, least, most, patch, merge, temporal, rules.qwen_vl_image
            )
            rows["video"] = per_item["video"] = video
            return per_item, _towers(vision, rows, temporal, patch, merge), rows

        def tokens(frames: int) -> int:
            h, w = _video_side(frames, height, width, temporal, unit, least, most)
            padded = frames + frames % temporal
            return max(padded // temporal, 1) * (h // patch) * (w // patch) // merge**2

        count = START_FRAMES
        # vLLM stops at the first count over max_model_len; past MAX_FRAMES the cap binds.
        while count < MAX_FRAMES and tokens(count + 1) <= max_model_len:
            count += 1
        video = tokens(max(min(count, MAX_FRAMES), 1))
        rows["video"] = video
        per_item["video"] = int(video * _TOKEN_FACTOR[rule])
    return per_item, _towers(vision, rows, temporal, patch, merge), rows


def _two_frames(
    video_processor: dict[str, Any],
    least: int,
    most: int,
    patch: int,
    merge: int,
    temporal: int,
    image_rule: str,
) -> int:
    """Encoder tokens of the two-frame dummy video: the image of most features at
    ``longest_edge`` // the video processor's ``temporal_patch_size`` pixels (the closest
    factor pair), resized as two frames (frames padded to ``temporal``, the vision config's)."""
    if video_processor.get("cap_pixels_per_frame"):
        raise NotMirrored("the video processor's cap_pixels_per_frame (pixels capped a frame)")
    step = video_processor.get("temporal_patch_size")
    if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
        raise NotMirrored(
            "the video processor's temporal_patch_size is not known: give the model folder "
            "(with its video_preprocessor_config.json)"
        )
    unit = patch * merge
    height, width = image_shape(most // step, unit, image_rule)
    h, w = _video_side(START_FRAMES, height, width, temporal, unit, least, most)
    padded = -(-START_FRAMES // temporal) * temporal
    return max(padded // temporal, 1) * (h // patch) * (w // patch) // merge**2


def _towers(
    vision: dict[str, Any], rows: dict[str, int], temporal: int, patch: int, merge: int
) -> dict[str, tuple[Tower, int]]:
    deepstack = vision.get("deepstack_visual_indexes", [])
    if not isinstance(deepstack, list):
        raise NotMirrored("the encoder config's deepstack_visual_indexes is not a list")
    tower = Tower(
        hidden=num(vision, "hidden_size"),
        intermediate=num(vision, "intermediate_size"),
        gated=False,
        layers=num(vision, "depth"),
        pixels_per_patch=3 * temporal * patch * patch,
        out_hidden=num(vision, "out_hidden_size") * (1 + len(deepstack)),
    )
    return {m: (tower, t * merge * merge) for m, t in rows.items()}


def vision_peak(
    vision: dict[str, Any], attention: tuple[int, int, int, bool], reduces: bool, tp: int, d: int
) -> int:
    """Bytes a patch holds at the peak of Qwen3-VL's vision tower (``Qwen3_VisionTransformer``,
    also Qwen3.5's) under a release rule (``qwen3_vl_vision_stage``): the attention is
    Qwen2.5-VL's (``Qwen2_5_VisionAttention``), so ``attention`` is that rule's stage in
    :data:`~mmcli.kv.whatif.encoder.VISION_STAGES` (the block's input and its normed copy
    whole, as there) and ``reduces`` whether it peaks at the output projection (its all-reduce
    at tp > 1, :data:`~mmcli.kv.whatif.encoder.REDUCES`). The block's norms are
    ``nn.LayerNorm`` (new tensors, no custom op, so ``--enforce-eager`` changes nothing) and
    its MLP is not gated: at the activation the block's
    input, the new residual and its normed copy whole beside fc1's output and its GELU (per
    rank); at fc2 the GELU (per rank) beside fc2's output whole. Kept through the block loop:
    the position embeddings (whole) and the deepstack mergers' outputs of the layers before the
    last (``out_hidden_size`` / merge² a patch each). After the loop, the merger (its input and
    normed copy whole beside fc1's output and its GELU, hidden-wide per rank, or the GELU and
    fc2's output) and the final cat of the merger's and the deepstack outputs. At tp > 1 each
    row-parallel all-reduce returns a new whole tensor beside the rank's partial sum. The
    rotary cos / sin tables (a head's width a patch) are not counted, as for Qwen2.5-VL."""
    hidden, intermediate = num(vision, "hidden_size"), num(vision, "intermediate_size")
    depth, merge = num(vision, "depth"), num(vision, "spatial_merge_size")
    out = num(vision, "out_hidden_size") * d // merge**2
    layers = [i for i in vision.get("deepstack_visual_indexes", []) if isinstance(i, int)]
    reduce = hidden * d if tp > 1 else 0
    whole, rank, fp32, gathers = attention
    at_call = whole * hidden * d + (rank * hidden * d + fp32 * hidden * 4) // tp
    blocks = [at_call + (reduce if reduces else 0)]
    if gathers and tp > 1:
        blocks[0] += 3 * hidden * d
        blocks.append((whole + 6) * hidden * d + 3 * hidden * d // tp)
    blocks.append(3 * hidden * d + 2 * intermediate * d // tp)
    blocks.append(4 * hidden * d + reduce + intermediate * d // tp)
    kept = hidden * d + sum(i < depth - 1 for i in layers) * out
    merger = 2 * hidden * d + max(2 * hidden * d // tp, hidden * d // tp + out * min(tp, 2))
    tail = [hidden * d + len(layers) * out + merger, hidden * d + 2 * (1 + len(layers)) * out]
    return max([kept + block for block in blocks] + tail)
