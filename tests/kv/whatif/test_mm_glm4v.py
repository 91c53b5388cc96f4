"""GLM-4.1V / GLM-4.5V / GLM-4.6V's dummy image in the ``--gpu`` estimate's encoder profile
(:mod:`mmcli.kv.whatif.mm_glm4v`), on the GLM-4.1V-9B-Thinking layout of
tests/kv/whatif/models/glm4_1v_9b (transformers' documented ``Glm4vConfig`` /
``Glm4vImageProcessor`` defaults, PROVENANCE.md there: vision hidden 1,536, depth 24, patch 14,
spatial_merge_size 2, temporal_patch_size 2, out_hidden_size 4,096; the image processor's
``size`` shortest_edge 12,544 and longest_edge 11,760,000 = 28 · 28 · 15,000)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mm_folders import folder_batch, model_json
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.kv.releases import first_release
from mmcli.kv.whatif.mm_dummy import NotMirrored
from mmcli.kv.whatif.mm_glm4v import smart_resize

FOLDER = Path("tests/kv/whatif/models/glm4_1v_9b")
NO_VIDEO = {"video": 0}


def _doc() -> dict[str, Any]:
    return model_json(FOLDER)


def _processor() -> dict[str, Any]:
    return model_json(FOLDER, "preprocessor_config.json")


def _batch(version: str, doc: dict[str, Any] | None = None, **extra: Any) -> Any:
    fields = {"processor": _processor(), "limits": NO_VIDEO}
    return folder_batch(doc or _doc(), version, **(fields | extra))


def test_smart_resize_of_a_square() -> None:
    """transformers 5.25.0 models/glm4v/image_processing_glm4v.py:53-85 ``smart_resize``: a
    9,999,999-pixel square as 2 frames under 11,760,000 pixels: β = √(2 · 9,999,999² /
    11,760,000), ⌊9,999,999 / β / 28⌋ = ⌊√5,880,000 / 28⌋ = ⌊86.6⌋ = 86 → 2,408; a square
    inside the bounds is only rounded to 28 (1,708 = 61 · 28 stays); one under 12,544 pixels
    grows: 2 · 56² = 6,272 < 12,544, β = √(12,544 / (2 · 56²)) = √2, ⌈79.2 / 28⌉ · 28 = 84."""
    assert smart_resize(2, 9999999, 2, 28, 12544, 11760000) == 2408
    assert smart_resize(2, 1708, 2, 28, 12544, 11760000) == 1708
    assert smart_resize(2, 56, 2, 28, 12544, 11760000) == 84


def test_from_0_17_the_image_is_the_processors_longest_edge() -> None:
    """vLLM 0.20.0 glm4_1v.py ``get_image_size_with_most_features`` (``num_frames=1``,
    ``max_image_pixels=_get_image_max_pixels()``, the image processor's
    ``size["longest_edge"]`` = 11,760,000) → ``_get_vision_info``: smart_resize of the
    9,999,999 square as max(1, temporal 2) = 2 frames → 2,408 × 2,408 (above); the HF image
    processor keeps it (2 · 2,408² = 11,597,128 ≤ 11,760,000). (2,408 / 14)² = 172² = 29,584
    patches, / merge² 4 = 7,396 ``<|image|>`` tokens (``get_image_replacement_glm4v``: one
    image token an encoder row). Budget max(8,192, 7,396) = 8,192: 8,192 // 7,396 = 1 item.
    The tower: ``Glm4vVisionBlock(dim=hidden_size, mlp_hidden_dim=out_hidden_size)``, a gated
    SiLU MLP (``Glm4vVisionMLP`` gate_up_proj, ``SiluAndMul``), ``depth`` blocks."""
    batch = _batch("0.20.0")
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("image", 7396, 1, 8192)
    assert (batch.patches, batch.embeds) == (29584, 7396)
    tower = batch.tower
    assert (tower.hidden, tower.intermediate, tower.gated, tower.layers) == (1536, 4096, True, 24)
    assert (tower.pixels_per_patch, tower.out_hidden) == (3 * 2 * 14 * 14, 4096)
    assert first_release("glm4v_image", "processor") == "0.17"
    assert _batch("0.34.0").tokens == _batch("0.17.0").tokens == 7396


def test_before_0_17_the_image_is_sixteen_frames_of_30000_units() -> None:
    """vLLM 0.10.0 glm4_1v.py:831-876 ``_get_vision_info`` defaults (``num_frames=16``,
    ``max_image_pixels=28 * 28 * 2 * 30000`` = 47,040,000), unchanged to 0.16.0
    (glm4_1v.py:872): β = √(16 · 9,999,999² / 47,040,000), ⌊√2,940,000 / 28⌋ = ⌊61.2⌋ = 61 →
    1,708 × 1,708; the HF processor keeps it (2 · 1,708² = 5,834,528 ≤ 11,760,000):
    122² = 14,884 patches, 3,721 tokens; 8,192 // 3,721 = 2 items. 0.10.1-0.12 count the
    placeholder (``get_mm_max_contiguous_tokens``), which is the image tokens alone
    (0.11.0 glm4_1v.py:1284-1285), so the same 3,721."""
    for version in ("0.10.0", "0.11.0", "0.12.0", "0.16.0"):
        batch = _batch(version)
        assert (batch.tokens, batch.items, batch.patches) == (3721, 2, 14884), version


def test_glm_4_5v_takes_the_same_rule() -> None:
    """``Glm4vMoeForConditionalGeneration`` is served by glm4_1v.py (vLLM 0.10.1
    model_executor/models/registry.py:212) with ``Glm4vProcessingInfo``: same image."""
    doc = _doc() | {"model_type": "glm4v_moe"}
    assert _batch("0.20.0", doc=doc).tokens == 7396


def _video_processor() -> dict[str, Any]:
    return model_json(FOLDER, "video_preprocessor_config.json")


def test_the_dummy_video_fits_beside_one_image() -> None:
    """vLLM 0.20.0 glm4_1v.py:943-976 (``_get_max_video_frames``,
    ``get_num_frames_with_most_features``, mm_counts image 1 and video 1:
    multimodal/encoder_budget.py:87-92): frames n grow from 1
    while ``_get_vision_info`` of the 2,408 square (above) as n frames at 28 · 28 · 2 · 30,000
    = 47,040,000 pixels fits 32,768 less one image (``get_num_image_tokens``, num_frames 1:
    7,396) = 25,372 tokens. 2,408² = 5,798,464: up to t̄ = 8 frames the side stays 2,408, each
    temporal pair 7,396 tokens; n = 6 → 3 pairs = 22,188 ≤ 25,372, n = 7 → 4 pairs = 29,584 >
    25,372: 6 frames (``_get_dummy_videos``: at least 2). The HF video processor (transformers
    5.25.0 video_processing_glm4v.py:170-197, size from video_preprocessor_config.json) keeps
    2,408 (6 · 5,798,464 ≤ 47,040,000): 3 · 7,396 = 22,188 rows, one ``<|video|>`` token each
    (glm4_1v.py:1363-1366 ``select_token_id``): the video has more tokens than the image, budget
    22,188, 1 item. The item the profile run encodes is the video built alone at 32,768
    (``_get_mm_dummy_batch``: mm_counts {"video": 1}, gpu_model_runner.py:5221-5233, at
    max_model_len, multimodal/registry.py:232): 8 frames, 4 pairs = 29,584 rows and 118,336
    patches. Video off the image of 7,396 is profiled (above)."""
    batch = _batch("0.20.0", limits={}, video_processor=_video_processor())
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("video", 22188, 1, 22188)
    assert (batch.patches, batch.embeds) == (118336, 29584)
    assert batch.inputs["tokens_by_modality"] == {"image": 7396, "video": 22188}
    assert batch.inputs["limit_mm_per_prompt"] == 1
    alone = _batch("0.20.0", limits={"image": 0}, video_processor=_video_processor())
    # 32,768 alone: n = 8 → 4 pairs = 29,584; n = 9 → 5 pairs = 36,980 > 32,768.
    assert (alone.tokens, alone.patches) == (29584, 118336)
    assert first_release("glm4v_video", "fit") == "0.13"


def test_before_0_17_the_image_bound_is_sixteen_frames() -> None:
    """vLLM 0.16.0 glm4_1v.py:878-889 ``get_num_image_tokens``: the 1,708 square as 16 frames
    under 28 · 28 · 2 · 6,144 = 9,633,792 pixels: ⌊√(9,633,792 / 16) / 28⌋ = ⌊27.7⌋ = 27 → 756,
    8 pairs × 54² / 4 = 5,832; 32,768 − 5,832 = 26,936. 1,708² = 2,917,264 stays up to 16
    frames, 3,721 tokens a pair: n = 14 → 7 pairs = 26,047 ≤ 26,936, n = 15 → 8 pairs = 29,768:
    14 frames, kept by the video processor (14 · 2,917,264 ≤ 47,040,000): 26,047. Encoded alone
    at 32,768: n = 16 → 8 pairs = 29,768 (n = 17 → 33,489), 16 · 2,917,264 ≤ 47,040,000 kept:
    29,768 rows, 119,072 patches."""
    for version in ("0.13.0", "0.16.0"):
        batch = _batch(version, limits={}, video_processor=_video_processor())
        assert (batch.modality, batch.tokens, batch.patches) == ("video", 26047, 119072), version


def test_from_0_26_the_frame_count_of_most_tokens() -> None:
    """vLLM 0.26.0 glm4_1v.py ``_get_max_video_frames``: of 1 … 600 frames
    (``_MAX_FRAMES_PER_VIDEO`` = 600, glm4_1v.py:130) the first of most tokens within 25,372,
    at the video processor's ``longest_edge`` (47,040,000): 505 frames, √(47,040,000 / 505) =
    305.2 → ⌊305.2 / 28⌋ = 10 units = 280 pixels, (505 + 1) / 2 = 253 pairs × 10² = 25,300.
    From 0.23 (``get_mm_max_tokens_per_item``) only a ``Glm4vProcessor`` is counted so: the
    processor class must be named. Encoded alone at 32,768: of most tokens within 32,768, 11
    frames (12 with the temporal rounding over 47,040,000: scale √(11 · 2,408² / 47,040,000) =
    1.164, ⌊2,408 / 1.164 / 28⌋ = 73 units = 2,044 pixels), 6 pairs × 146² / 4 = 31,974 rows,
    127,896 patches."""
    named = _processor() | {"processor_class": "Glm4vProcessor"}
    batch = _batch("0.26.0", limits={}, video_processor=_video_processor(), processor=named)
    assert (batch.modality, batch.tokens, batch.patches) == ("video", 25300, 127896)
    assert (
        _batch("0.34.0", limits={}, video_processor=_video_processor(), processor=named).tokens
        == 25300
    )
    assert (
        _batch("0.23.0", limits={}, video_processor=_video_processor(), processor=named).tokens
        == 22188
    )
    with pytest.raises(NotMirrored, match="Glm4vProcessor"):
        _batch("0.23.0", limits={}, video_processor=_video_processor())
    other = _processor() | {"processor_class": "Glm46VProcessor"}
    with pytest.raises(NotMirrored, match="Glm46VProcessor"):
        _batch("0.26.0", limits={}, video_processor=_video_processor(), processor=other)
    assert first_release("glm4v_video", "most-budget") == "0.26"


def test_what_is_not_mirrored_is_refused() -> None:
    """0.10.1 – 0.12 count the video's whole placeholder (tokenized timestamps: 0.11.0
    glm4_1v.py ``_construct_video_placeholder``); 0.10.0's dummy video has no
    ``do_sample_frames`` (frames sampled by the video processor); a folder without
    video_preprocessor_config.json names it; --mm-processor-kwargs (``max_pixels`` / ``size``
    read from 0.25) are refused; a config without the processor file names it."""
    with pytest.raises(NotMirrored, match="placeholder"):
        _batch("0.11.0", limits={}, video_processor=_video_processor())
    with pytest.raises(NotMirrored, match="sampled"):
        _batch("0.10.0", limits={}, video_processor=_video_processor())
    with pytest.raises(NotMirrored, match="video_preprocessor_config.json"):
        _batch("0.20.0", limits={})
    with pytest.raises(NotMirrored, match="max_pixels"):
        _batch("0.20.0", mm_kwargs={"max_pixels": 1003520})
    with pytest.raises(NotMirrored, match="preprocessor_config.json"):
        _batch("0.20.0", processor=None)
    assert _batch("0.20.0", limits={"image": 0, "video": 0}) is None


def test_plan_estimates_the_encoder_profile() -> None:
    """``kv-share plan --gpu H100`` on the model folder, video on (the default): the encoder
    profile is estimated (one video of 22,188 tokens, as above); in 0.11 it is named, not
    estimated (the placeholder's timestamps)."""
    args = ["kv-share", "plan", "--gpu", "H100", "--weights", "20GiB", "--vllm-version", "0.20"]
    args += ["--", "vllm", "serve", str(FOLDER), "--max-model-len", "32768"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "encoder profile (estimate)" in result.output
    assert "not mirrored" not in result.output
    refused = CliRunner().invoke(app, [*args[:7], "0.11", *args[8:]])
    assert refused.exit_code == 0, refused.output
    assert "placeholder" in refused.output
