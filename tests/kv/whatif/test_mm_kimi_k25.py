"""Kimi K2.5's dummy vision chunk in the ``--gpu`` estimate's encoder profile
(:mod:`mmcli.kv.whatif.mm_kimi_k25`), on moonshotai/Kimi-K2.5's config and image processor
settings (tests/kv/whatif/models/kimi_k2_5, PROVENANCE.md there: MoonViT vt_hidden_size 1,152,
vt_intermediate_size 4,304, 27 layers, patch 14, merge 2 × 2; text hidden 7,168;
media_proc_cfg in_patch_limit 16,384, in_patch_limit_each_frame 4,096, patch_limit_on_one_side
512, temporal_merge_kernel_size 4, in_patch_limit_video and fixed_output_tokens null).

The dummy rule is one in every release that serves the model: vLLM 0.15.0 kimi_k25.py:72-75
(``MaxImageTokenMeta`` 3,000 × 3,000), :167-169 (``get_supported_mm_limits``: vision_chunk
only), :184-211 (``get_dummy_mm_items``: a chunk of ``num_frames_per_chunk`` frames and one
image, the chunk when its tokens are ≥ the image's); the same lines, reformatted, in 0.16.0 …
0.34.0 (0.34.0 kimi_k25.py:86-89, :176-179, :188-215); no ``get_mm_max_tokens_per_item`` in any
of them. The count is the image processor's ``media_tokens_calculator``: the checkpoint's remote
``KimiK25VisionProcessor`` (kimi_k25_vision_processing.py, ``cached_get_image_processor``) and,
from 0.25 where numba is installed, vLLM's fused copy of it (0.25.0 kimi_k25.py:115; 0.32.0
transformers_utils/processors/kimi_k25_vision_fused.py:71-146 ``navit_resize_image`` /
``navit_resize_video``, :192-233 ``get_resize_config``; the resize unchanged to 0.34.0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mm_folders import folder_batch, model_json

from mmcli.kv.releases import first_release
from mmcli.kv.whatif.mm_dummy import NotMirrored
from tests.kv_plan import cli_plan_json

FOLDER = Path("tests/kv/whatif/models/kimi_k2_5")


def _doc() -> dict[str, Any]:
    return model_json(FOLDER)


def _processor(**cfg: Any) -> dict[str, Any]:
    doc = model_json(FOLDER, "preprocessor_config.json")
    doc["media_proc_cfg"] = doc["media_proc_cfg"] | cfg
    return doc


def _batch(version: str = "0.20.0", **extra: Any) -> Any:
    return folder_batch(_doc(), version, **({"processor": _processor()} | extra))


def test_the_dummy_image_outweighs_the_video_chunk() -> None:
    """Image (in_patch_limit 16,384): ⌊3,000 / 14⌋ = 214 patches a side, scale
    min(1, √(16,384 / 214²) = 128 / 214 = 0.598, 512 × 14 / 3,000 = 2.39) → int(3,000 × 0.598)
    = 1,794 pixels, padded to a multiple of 28: 1,820 = 65 × 28 → 65² = 4,225 tokens, the
    encoder on (1,820 / 14)² = 130² = 16,900 patches. Chunk frame (in_patch_limit_each_frame
    4,096): 64 / 214 → 897 pixels → 924 = 33 × 28 → 33² = 1,089 tokens < 4,225: the image.
    The budget counts the item's encoder outputs (no ``get_mm_max_tokens_per_item``; 0.20.0
    multimodal/encoder_budget.py): max(8,192, 4,225) = 8,192, 8,192 // 4,225 = 1 item."""
    batch = _batch()
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == (
        "vision_chunk",
        4225,
        1,
        8192,
    )
    assert (batch.patches, batch.embeds) == (16900, 4225)
    tower = batch.tower
    assert (tower.hidden, tower.intermediate, tower.gated, tower.layers) == (1152, 4304, False, 27)
    assert (tower.pixels_per_patch, tower.out_hidden) == (3 * 14 * 14, 7168)
    # 16,384 // 4,225 = 3 items; a prompt holds 32,768 // 4,225 = 7.
    assert _batch(max_num_batched_tokens=16384).items == 3


@pytest.mark.parametrize(
    "version", ["0.15.0", "0.16.0", "0.17.0", "0.19.0", "0.25.0", "0.31.0", "0.32.0", "0.34.0"]
)
def test_every_release_that_serves_it_builds_the_same_item(version: str) -> None:
    """kimi_k25.py first ships in 0.15.0; its dummy builder differs later only in how the
    dummy text and options are typed (module docstring), so each variant gives 4,225 tokens."""
    batch = _batch(version)
    assert (batch.modality, batch.tokens, batch.patches) == ("vision_chunk", 4225, 16900)


def test_before_0_15_the_model_is_not_served() -> None:
    """0.14.0 has no vllm/model_executor/models/kimi_k25.py."""
    assert first_release("kimi_k25_dummy", "image-or-chunk") == "0.15"
    with pytest.raises(NotMirrored, match="does not serve Kimi K2.5"):
        _batch("0.14.0")


def test_the_video_chunk_on_a_tie_and_its_frames_patches() -> None:
    """With in_patch_limit 4,096 the image is 33² = 1,089 tokens like a chunk frame: the
    chunk (``>=``), 4 frames of (924 / 14)² = 66² = 4,356 patches = 17,424 through the encoder,
    pooled in time to 1,089 tokens. in_patch_limit_video 8,192 caps a frame at round(8,192 / 4)
    = 2,048 patches: √(2,048) / 214 = 0.2115 → 634 pixels → 23 × 28 → 529 tokens, so the
    image (1,089 tokens, 66² patches) wins; with in_patch_limit 2,048 too they tie at 529 and
    the chunk's 4 × 46² patches run."""
    tie = _batch(processor=_processor(in_patch_limit=4096))
    assert (tie.tokens, tie.patches, tie.embeds) == (1089, 4 * 66 * 66, 1089)
    image = _batch(processor=_processor(in_patch_limit=4096, in_patch_limit_video=8192))
    assert (image.tokens, image.patches) == (1089, 66 * 66)
    capped = _batch(processor=_processor(in_patch_limit=2048, in_patch_limit_video=8192))
    assert (capped.tokens, capped.patches) == (529, 4 * 46 * 46)


def test_what_is_not_mirrored_is_refused() -> None:
    """The media processor is built from the checkpoint's files alone (``mm_processor_kwargs``
    never reach ``media_tokens_calculator``), ``vision_chunk`` is the one modality, and a
    bare config.json gives no ``media_proc_cfg``: each is named, not estimated."""
    with pytest.raises(NotMirrored, match="in_patch_limit"):
        _batch(mm_kwargs={"in_patch_limit": 4096})
    with pytest.raises(NotMirrored, match="vision_chunk"):
        _batch(limits={"image": 2})
    with pytest.raises(NotMirrored, match="preprocessor_config.json media_proc_cfg"):
        _batch(processor=None)
    with pytest.raises(NotMirrored, match="fixed_output_tokens"):
        _batch(processor=_processor(fixed_output_tokens=256))
    assert _batch(limits={"vision_chunk": 0}) is None


def test_kv_share_plan_estimates_the_encoder_profile() -> None:
    """``kv-share plan`` on the model folder at one H100: the encoder profile is estimated from
    one 4,225-token item (above): float32 pixel values 16,900 × 588 × 4 = 39,748,800 B, outputs
    4,225 × 7,168 × 2 B = 60,569,600 B, the component max(forward − text peak, outputs)."""
    doc = cli_plan_json(
        str(FOLDER),
        "--gpu",
        "H100",
        "--weights",
        "60GiB",
        "--vllm-version",
        "0.20",
        "--max-model-len",
        "32768",
        "--max-num-batched-tokens",
        "8192",
    )
    (part,) = [p for p in doc["memory_estimate"]["components"] if p["name"] == "encoder profile"]
    got = part["inputs"]
    assert (got["modality"], got["items"], got["tokens_per_item"]) == ("vision_chunk", 1, 4225)
    assert (got["pixel_values_bytes"], got["outputs_bytes"]) == (39_748_800, 60_569_600)
    expected = max(got["forward_bytes"] - got["text_peak_bytes"], got["outputs_bytes"])
    assert part["bytes"] == expected > 0
