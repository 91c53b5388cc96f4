"""LLaVA-OneVision's dummy image and video in the ``--gpu`` estimate's encoder profile
(:mod:`mmcli.kv.whatif.mm_llava_onevision`), on the llava-onevision-qwen2-7b-ov layout
(tests/kv/whatif/models/llava_onevision_qwen2_7b, PROVENANCE.md there: a SigLIP tower of hidden
1,152, intermediate 4,304, 26 layers, image_size 384, patch 14; the 36 image_grid_pinpoints
384 - 2304 by 384; vision_feature_layer -1; vision_feature_select_strategy full; Qwen2-7B text
of hidden 3,584).

Facts from vLLM's llava_onevision.py (the same in 0.10.0 - 0.34.0 but for
``get_num_frames_with_most_features``, which in 0.10.0 / 0.10.1 subtracts one image's tokens
from max_model_len before counting frames; md5 of each function of
``LlavaOnevisionProcessingInfo`` / ``LlavaOnevisionDummyInputsBuilder`` compared across all 27
releases): the dummy image is 1,153 wide × 944 high (``get_image_size_with_most_features``,
0.20.0 llava_onevision.py:183-185); a video frame is ceil(27 / 2)² = 196 tokens
(``_get_num_frame_tokens``), a video frames × 196 + 1 (``get_num_video_tokens``), as many
frames as fit max_model_len, at most 16 (``_MAX_FRAMES_PER_VIDEO``), at least 1; the unpadded
features are scaled down past sqrt(h × w / (9 × 27²)) > 1.1 (``_get_num_unpadded_features``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mm_folders import folder_batch, model_json
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.kv.whatif.mm_dummy import NotMirrored
from mmcli.kv.whatif.mm_llava_onevision import image_tokens

FOLDER = Path("tests/kv/whatif/models/llava_onevision_qwen2_7b")


def _doc() -> dict[str, Any]:
    return model_json(FOLDER)


def _batch(version: str, doc: dict[str, Any] | None = None, **extra: Any) -> Any:
    return folder_batch(doc or _doc(), version, **extra)


@pytest.mark.parametrize("version", ["0.10.0", "0.10.1", "0.12.0", "0.20.0", "0.34.0"])
def test_the_dummy_image_is_profiled(version: str) -> None:
    """The 944 × 1,153 image fits the pinpoint [1152, 1536] best (transformers'
    ``select_best_resolution``: it and every larger one keep all 1,088,432 pixels, it wastes the
    least; [1152, 1152] is 1 pixel too narrow): 3 × 4 tiles. Features 81 × 108: the image is
    narrower (1,153 / 944 = 1.221 < 108 / 81), new width int(1,153 × 81 / 944) = 98, padding
    (108 - 98) // 2 = 5, so 81 × 98 = 7,938 features and 81 newlines; sqrt(7,938 / 6,561) =
    1.09995, not over 1.1. Base image (0.20.0 siglip.py:265-271 ``SiglipEncoderInfo``: 27²) 729
    under ``full``: 7,938 + 81 + 729 = 8,748 tokens, all embeddings. The video: 16 frames
    (32,767 // 196 = 167) of 196 + 1 = 3,137 tokens; the image has more. Budget max(8,192,
    8,748) = 8,748: 1 item. The tower runs 12 tiles and the base image, 13 × 729 = 9,477
    patches, all 26 layers (vision_feature_layer -1, 0.20.0 llava.py:438
    ``_get_num_hidden_layers``: 26 - 1 + 1)."""
    batch = _batch(version)
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("image", 8748, 1, 8748)
    assert batch.inputs["tokens_by_modality"] == {"image": 8748, "video": 3137}
    assert batch.patches == 9477 and batch.embeds is None
    tower = batch.tower
    assert (tower.hidden, tower.intermediate, tower.gated, tower.layers) == (1152, 4304, False, 26)
    assert (tower.pixels_per_patch, tower.out_hidden) == (3 * 14 * 14, 3584)


@pytest.mark.parametrize(("version", "tokens", "items", "patches"), [
    ("0.10.0", 2549, 3, 13 * 729),
    ("0.10.1", 2549, 3, 13 * 729),
    ("0.10.2", 3137, 2, 16 * 729),
    ("0.34.0", 3137, 2, 16 * 729),
])  # fmt: skip
def test_the_dummy_video_per_release(version: str, tokens: int, items: int, patches: int) -> None:
    """With one pinpoint, [384, 384], the image is 1 tile: features 27 × 27, the image wider
    (1.221 > 1), new height int(944 × 27 / 1,153) = 22, padding (27 - 22) // 2 = 2, 23 × 27 =
    621 features and 23 newlines, + 729 = 1,373 tokens. At max_model_len 4,096 the video has more:
    0.10.0 / 0.10.1 (llava_onevision.py:196-210 there) count frames in 4,096 - 1,373 = 2,723
    tokens: (2,723 - 1) // 196 = 13 frames, 13 × 196 + 1 = 2,549 tokens, 8,192 // 2,549 = 3
    items; from 0.10.2 in 4,096: 20 frames, capped at 16, 3,137 tokens, 8,192 // 3,137 = 2 items.
    Each frame is 729 patches."""
    doc = _doc() | {"image_grid_pinpoints": [[384, 384]]}
    batch = _batch(version, doc=doc, max_model_len=4096)
    assert batch.inputs["tokens_by_modality"]["image"] == 1373
    assert (batch.modality, batch.tokens, batch.items) == ("video", tokens, items)
    assert batch.patches == patches


def test_images_off_leave_the_whole_length_to_the_video() -> None:
    """0.10.0 subtracts the image only when images are on (``mm_counts`` holds 1 of each
    enabled modality): with images off, 16 frames at 4,096 (3,137 tokens, 8,192 // 3,137 = 2
    items, 11,664 patches). At max_model_len 2,000: (2,000 - 1) // 196 = 10 frames, 1,961 tokens,
    4 items."""
    batch = _batch("0.10.0", max_model_len=4096, limits={"image": 0})
    assert (batch.modality, batch.tokens, batch.items, batch.patches) == ("video", 3137, 2, 11664)
    batch = _batch("0.20.0", max_model_len=2000, limits={"image": 0})
    assert (batch.tokens, batch.items, batch.patches) == (1961, 4, 10 * 729)


def test_the_features_past_nine_tiles_are_scaled_down() -> None:
    """A 1,000 × 1,000 image on 4 × 4 tiles: 108 × 108 features, sqrt(11,664 / 6,561) = 1.333
    > 1.1, so int(108 // 1.333) = 81 a side: 6,561 features and 81 newlines."""
    assert image_tokens(1000, 1000, 27, 4, 4) == 81 * 81 + 81


def test_what_is_not_mirrored_is_refused() -> None:
    """--mm-processor-kwargs are refused by name; processor files tiling by other pinpoints or
    at another side, a video processor resizing to another side, a pooling stride other than
    the model's 2 and a tower other than CLIP / SigLIP are refused; so is a plan without
    max_model_len (the video needs it)."""
    with pytest.raises(NotMirrored, match="num_frames"):
        _batch("0.20.0", mm_kwargs={"num_frames": 8})
    with pytest.raises(NotMirrored, match="image_grid_pinpoints"):
        _batch("0.20.0", processor={"image_grid_pinpoints": [[384, 384]]})
    with pytest.raises(NotMirrored, match="crop_size / size"):
        _batch("0.20.0", processor={"size": {"height": 336, "width": 336}})
    with pytest.raises(NotMirrored, match="video_preprocessor_config.json size"):
        _batch("0.20.0", video_processor={"size": {"height": 336, "width": 336}})
    with pytest.raises(NotMirrored, match="spatial_pool_stride"):
        _batch("0.20.0", doc=_doc() | {"spatial_pool_stride": 3})
    doc = _doc()
    doc["vision_config"] = doc["vision_config"] | {"model_type": "pixtral"}
    with pytest.raises(NotMirrored, match="pixtral"):
        _batch("0.20.0", doc=doc)
    with pytest.raises(NotMirrored, match="max_model_len"):
        _batch("0.20.0", max_model_len=None)
    pins = _doc()["image_grid_pinpoints"]
    same = {"size": {"height": 384, "width": 384}, "image_grid_pinpoints": pins}
    assert _batch("0.20.0", processor=same, video_processor=same).tokens == 8748


def test_plan_estimates_the_encoder_profile() -> None:
    """``kv-share plan --gpu H100`` on the model folder: the encoder profile is estimated (one
    image of 8,748 tokens from 9,477 patches, as above); it was named, not estimated."""
    args = ["kv-share", "plan", str(FOLDER), "--gpu", "H100", "--weights", "16GiB"]
    args += ["--vllm-version", "0.20", "--max-model-len", "32768"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "encoder profile (estimate)" in result.output
    assert "not mirrored" not in result.output
