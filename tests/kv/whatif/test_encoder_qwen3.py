"""Qwen3-VL's dummy image and video in the ``--gpu`` estimate's encoder profile
(:mod:`mmcli.kv.whatif.mm_qwen3`), on Qwen/Qwen3-VL-30B-A3B-Instruct's config
(tests/kv/gpu_logs/configs, PROVENANCE.md there: vision hidden 1,152, intermediate 4,304,
depth 27, patch 16, merge 2, temporal 2, out_hidden 2,048, deepstack layers [8, 16, 24]) and
the Qwen3-VL processor files (tests/kv/whatif/models/qwen3_vl: image longest_edge 16,777,216,
video longest_edge 25,165,824 / shortest_edge 4,096)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmcli.kv.releases import rules_for
from mmcli.kv.whatif.encoder import MmSettings, encoder_profile
from mmcli.kv.whatif.mm_dummy import NotMirrored, dummy_batch

CONFIG = "tests/kv/gpu_logs/configs/Qwen--Qwen3-VL-30B-A3B-Instruct.subset.json"
FOLDER = Path("tests/kv/whatif/models/qwen3_vl")


def _doc() -> dict[str, Any]:
    return dict(json.loads(Path(CONFIG).read_text()))


def _files() -> tuple[dict[str, Any], dict[str, Any]]:
    image = json.loads((FOLDER / "preprocessor_config.json").read_text())
    video = json.loads((FOLDER / "video_preprocessor_config.json").read_text())
    return image, video


def _batch(version: str, length: int = 65536, **extra: Any) -> Any:
    image, video = _files()
    fields: dict[str, Any] = {
        "max_model_len": length,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 256,
        "processor": image,
        "video_processor": video,
    }
    return dummy_batch(_doc(), rules_for(version), **(fields | extra))


def test_the_video_of_most_frames_before_timestamps_were_counted_apart() -> None:
    """vLLM 0.12.0 qwen3_vl.py:693-709 ``get_max_video_tokens``: the video of the image of most
    features (a 4,096-pixel square: 9999999² resized to 16,777,216 pixels, 32-pixel units,
    qwen2_vl.py:961) with ``get_num_frames_with_most_features`` frames (qwen2_vl.py:1000-1013:
    the most frames from 2 whose tokens fit max_model_len 65,536, capped at
    ``_MAX_FRAMES_PER_VIDEO`` = 24,576, qwen3_vl.py:123). transformers 4.57.1
    video_processing_qwen3_vl.py:34-64 ``smart_resize`` scales 24,576 frames × 4,096² down by
    sqrt(24,576 × 4,096² / 25,165,824) = 128 to 32 × 32 frames: 12,288 frame pairs × (32/16)² /
    2² = 12,288 encoder tokens (49,152 patches), × 12.5 = 153,600 placeholder tokens, the
    budget and one item of the 30B log (v1-mm-h100-qwen3vl30b-tp2). The image has 128² =
    16,384 tokens."""
    batch = _batch("0.12.0")
    assert batch.inputs["tokens_by_modality"] == {"image": 16384, "video": 153600}
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("video", 153600, 1, 153600)
    assert (batch.patches, batch.embeds) == (49152, 12288)


def test_one_placeholder_token_an_encoder_token_from_0_13() -> None:
    """vLLM 0.13.0 qwen3_vl.py:710 ``get_max_video_tokens`` returns the encoder tokens (no
    × 12.5): the video's 12,288 tokens lose to the image's 16,384, which is profiled (budget
    max(8,192, 16,384), one item, 128² × 2² = 65,536 patches)."""
    batch = _batch("0.13.0")
    assert batch.inputs["tokens_by_modality"] == {"image": 16384, "video": 12288}
    assert (batch.modality, batch.items, batch.budget, batch.patches) == ("image", 1, 16384, 65536)


def test_the_frame_search_starts_at_two_frames() -> None:
    """vLLM 0.12.0 qwen3_vl.py:679-682 starts the frame search at 2 frames, and 3 frames
    (qwen2_vl.py:984-996) already pass max_model_len 4,096: transformers 4.57.1 smart_resize
    of 3 frames scales 4,096 by sqrt(3 × 4,096² / 25,165,824) = sqrt(2) to floor(90.5) × 32 =
    2,880 pixels, 2 frame pairs × 180² / 4 = 16,200 tokens. The 2 frames scale by sqrt(4/3) to
    floor(110.9) × 32 = 3,520 pixels: one frame pair of 220² / 4 = 12,100 encoder tokens,
    × 12.5 = 151,250 placeholder tokens (over max_model_len: two frames is the least)."""
    batch = _batch("0.12.0", length=4096)
    assert batch.inputs["tokens_by_modality"]["video"] == 151250
    assert (batch.embeds, batch.patches) == (12100, 48400)


def test_releases_before_qwen3_vl_are_refused() -> None:
    """Before 0.11 vLLM has no Qwen3-VL (0.11.0 model_executor/models/registry.py:271-272 first
    maps Qwen3VL*ForConditionalGeneration)."""
    with pytest.raises(NotMirrored, match="Qwen3-VL"):
        _batch("0.10.2")


@pytest.mark.parametrize("version", ["0.15.0", "0.16.0", "0.17.0", "0.20", "0.29.0", "0.34.0"])
def test_the_two_frame_dummy_video_from_0_15(version: str) -> None:
    """From vLLM 0.15.0 ``get_max_video_tokens`` (qwen3_vl.py:696-714 in 0.15.0, :707 in 0.16.0,
    :723-748 in 0.17.0 with the merged --mm-processor-kwargs, empty here; :1013 in 0.29.0;
    :1038 in 0.32.0 / :1041 in 0.34.0 through ``_get_vision_size``) takes the image of most
    features at the video processor's longest_edge // temporal_patch_size = 25,165,824 // 2 =
    12,582,912 pixels: 12,288 units of 32², closest factor pair 96 × 128 (qwen2_vl.py:895-936,
    0.15.0), so 3,072 × 4,096 pixels, and counts it as 2 frames (``num_frames=2``):
    transformers' video ``smart_resize`` keeps it (2 × 3,072 × 4,096 = 25,165,824, not over
    longest_edge), one frame pair of 192 × 256 patches / 2² = 12,288 tokens whatever
    max_model_len (here 4,096, where 0.13's frame search gives 12,100). The dummy data is the
    same video (qwen3_vl.py:799 ``target_num_frames = 2``, :820-834). The image (16,384) is
    profiled."""
    batch = _batch(version, length=4096)
    assert batch.inputs["tokens_by_modality"] == {"image": 16384, "video": 12288}
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("image", 16384, 1, 16384)
    assert _batch("0.14.0", length=4096).inputs["tokens_by_modality"]["video"] == 12100


def test_the_two_frame_video_alone() -> None:
    """With images off the two-frame video is profiled: 12,288 placeholder tokens, one an
    encoder token (``get_max_video_tokens`` returns ``num_video_soft_tokens``, qwen3_vl.py:714,
    0.15.0), 12,288 × 2² = 49,152 patches; budget max(8,192, 12,288)."""
    batch = _batch("0.15.0", limits={"image": 0})
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("video", 12288, 1, 12288)
    assert (batch.patches, batch.embeds) == (49152, 12288)


def test_the_two_frame_video_takes_the_closest_factor_pair() -> None:
    """A video processor of longest_edge 1,000,000: 1,000,000 // 2 // 32² = 488 units, closest
    factor pair 8 × 61 (ratio 7.6 ≤ 200, qwen2_vl.py:921-936, 0.15.0): 256 × 1,952 pixels, 2 ×
    256 × 1,952 = 999,424 under longest_edge, so 16 × 122 / 2² = 488 tokens."""
    image, video = _files()
    video = video | {"size": {"longest_edge": 1000000, "shortest_edge": 4096}}
    batch = _batch("0.20", limits={"image": 0}, video_processor=video)
    assert (batch.tokens, batch.patches) == (488, 1952)


def test_the_two_frame_video_refuses_what_it_does_not_mirror() -> None:
    """vLLM 0.29.0 qwen3_vl.py:1166-1185: with ``cap_pixels_per_frame`` the dummy has more
    frames (transformers#48071); and the video processor's temporal_patch_size divides
    longest_edge (qwen3_vl.py:705-707, 0.15.0)."""
    _, video = _files()
    with pytest.raises(NotMirrored, match="cap_pixels_per_frame"):
        _batch("0.29.0", video_processor=video | {"cap_pixels_per_frame": True})
    del video["temporal_patch_size"]
    with pytest.raises(NotMirrored, match="temporal_patch_size"):
        _batch("0.15.0", video_processor=video)


def test_the_video_needs_its_processor_file_unless_disabled() -> None:
    """Without video_preprocessor_config.json the video's size is unknown (transformers'
    class default, 786,432, is not what the checkpoints ship): refused; with video 0 the image
    alone is profiled."""
    with pytest.raises(NotMirrored, match="video_preprocessor_config.json"):
        _batch("0.12.0", video_processor=None)
    batch = _batch("0.12.0", video_processor=None, limits={"video": 0})
    assert (batch.modality, batch.tokens) == ("image", 16384)


def test_processor_kwargs_are_not_mirrored() -> None:
    with pytest.raises(NotMirrored, match="mm-processor-kwargs"):
        _batch("0.12.0", mm_kwargs={"max_pixels": 1003520})


def test_the_tower_and_its_deepstack_outputs() -> None:
    """vLLM 0.12.0 qwen3_vl.py:155-185 ``Qwen3_VisionMLP``: linear_fc1 → activation →
    linear_fc2 (not gated, 2 wide tensors); qwen3_vl.py:325 and 573-576: the merger's output
    concatenated with one deepstack merger's per deepstack layer, out_hidden_size × (1 + 3) =
    8,192 a token. The outputs are the 12,288 encoder rows (not the 153,600 placeholder
    tokens): 12,288 × 8,192 × 2 bytes; the forward is the float32 pixels (49,152 patches × 3 ×
    2 × 16² values × 4 bytes) plus 49,152 × the tallied vision block at tensor parallel 2
    (``qwen3_vl_vision_stage`` rotary-reshape-model, tests/kv/whatif/test_qwen3_vision.py): at
    the attention's output projection 3 whole + 8 / 2 + 1 all-reduced hidden-size units (8
    × 1,152 × 2 bytes), beside the kept position embeddings (1,152 × 2) and the three deepstack
    outputs (3 × 2,048 / 2² × 2): 18,432 + 2,304 + 3,072 = 23,808 bytes a patch."""
    image, video = _files()
    part, note = encoder_profile(
        _doc(),
        rules_for("0.12.0"),
        max_num_batched_tokens=8192,
        max_num_seqs=256,
        tp=2,
        dtype_bytes=2,
        text_peak=0,
        settings=MmSettings(65536, processor=image, video_processor=video),
    )
    assert note is None or "not estimated" not in note
    assert part is not None and part.estimated
    outputs = 12288 * 8192 * 2
    forward = 49152 * 1536 * 4 + 49152 * (8 * 1152 + 1152 + 3 * 2048 // 4) * 2
    assert part.bytes == max(forward, outputs)


def test_the_video_processor_file_is_read_for_qwen3_vl_only() -> None:
    """``mm_settings`` reads video_preprocessor_config.json beside the image processor's for a
    Qwen3-VL config, and not for another family (Gemma 3 has none to read)."""
    from mmcli.kv.whatif.encoder import mm_settings

    got = mm_settings(_doc(), lambda: 65536, lambda name: FOLDER / name)
    assert got.video_processor is not None
    assert got.video_processor["size"]["longest_edge"] == 25165824
    other = {"model_type": "gemma3", "vision_config": {"hidden_size": 1152}}
    got = mm_settings(other, lambda: 4096, lambda name: FOLDER / name)
    assert got.video_processor is None
