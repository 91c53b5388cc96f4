"""Gemma 4's dummy batch in the ``--gpu`` estimate's encoder profile
(:mod:`mmcli.kv.whatif.mm_gemma4`), on gemma-4-31B-it's config (tests/kv/whatif/models/
gemma_4_31b, PROVENANCE.md there: vision patch 16, pooling_kernel_size 3,
default_output_length 280, hidden 1,152, intermediate 4,304, 27 layers; no audio_config).
Facts: vLLM 0.19.0 / 0.21.0 vllm/model_executor/models/gemma4_mm.py (``_VIDEO_MAX_SOFT_TOKENS``
70, ``_VIDEO_MAX_FRAMES`` 32, ``get_mm_max_tokens_per_item``, ``get_dummy_mm_data``'s 224 × 224
default, ``_compute_num_soft_tokens``), unchanged in substance through 0.34.0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mm_folders import folder_batch, model_json

from mmcli.kv import PlanRequest, plan_run
from mmcli.kv.releases import first_release
from mmcli.kv.whatif.mm_dummy import NotMirrored
from mmcli.kv.whatif.mm_gemma4 import soft_tokens

FOLDER = Path("tests/kv/whatif/models/gemma_4_31b")


def _doc() -> dict[str, Any]:
    return model_json(FOLDER)


def _batch(version: str, **extra: Any) -> Any:
    return folder_batch(_doc(), version, **extra)


@pytest.mark.parametrize("version", ["0.19", "0.20", "0.21", "0.34"])
def test_the_dummy_video_is_the_item_profiled(version: str) -> None:
    """get_mm_max_tokens_per_item: image 280 (default_output_length), video 32 × (70 + 2 + 6)
    = 2,496, so the video. Budget max(8192, 2496) = 8192; items max(1, min(8192 // 2496,
    256 × min(999, 32768 // 2496))) = 3. The encoder runs 32 frames × 70 × 3² = 20,160 patches
    (each frame padded to max_soft_tokens × k²); a 224 × 224 frame at 70 soft tokens is
    scaled by √(630 / 196), floor(224 × 1.793 / 48) × 48 = 384 a side, (384 / 16)² / 9 = 64
    rows, 32 × 64 = 2,048 rows a video."""
    batch = _batch(version)
    assert (batch.modality, batch.tokens, batch.items) == ("video", 2496, 3)
    assert (batch.patches, batch.embeds, batch.budget) == (20160, 2048, 8192)
    assert batch.forward_note is not None


def test_the_dummy_image_without_video() -> None:
    """--limit-mm-per-prompt video 0: the image, 280 tokens; items min(8192 // 280 = 29,
    256 × min(999, 32768 // 280)) = 29; 280 × 9 = 2,520 patches; a 224 × 224 image at 280
    soft tokens: scale √(2520 / 196), floor(224 × 3.586 / 48) × 48 = 768, (768 / 16)² / 9 =
    256 rows."""
    batch = _batch("0.20", limits={"video": 0})
    assert (batch.modality, batch.tokens, batch.items, batch.patches) == ("image", 280, 29, 2520)
    assert batch.embeds == 256


def test_soft_tokens_of_a_frame() -> None:
    """_compute_num_soft_tokens at 224 × 224, patch 16, k 3: 64 at 70, 256 at 280."""
    assert soft_tokens(224, 224, 16, 3, 70) == 64
    assert soft_tokens(224, 224, 16, 3, 280) == 256


def test_max_soft_tokens_counts_from_0_21() -> None:
    """vLLM 0.21.0 get_mm_max_tokens_per_item: max_soft_tokens from --mm-processor-kwargs when
    in (70, 140, 280, 560, 1120); 0.19.0 - 0.20 count default_output_length whatever it is,
    so there the kwarg is refused (the dummy image's patches change, not its count)."""
    assert first_release("gemma4_image_tokens", "kwargs") == "0.21"
    kwargs = {"max_soft_tokens": 560}
    batch = _batch("0.21", limits={"video": 0}, mm_kwargs=kwargs)
    assert (batch.tokens, batch.patches) == (560, 560 * 9)
    with pytest.raises(NotMirrored, match="max_soft_tokens"):
        _batch("0.20", limits={"video": 0}, mm_kwargs=kwargs)
    with pytest.raises(NotMirrored, match="max_soft_tokens 300"):
        _batch("0.21", mm_kwargs={"max_soft_tokens": 300})


def test_refusals() -> None:
    """Before 0.19 vLLM has no gemma4_mm.py; other processor kwargs and an image processor
    size are refused by name."""
    assert first_release("gemma4_image_tokens", "config") == "0.19"
    with pytest.raises(NotMirrored, match="no Gemma 4 multimodal model"):
        _batch("0.18")
    with pytest.raises(NotMirrored, match="other than max_soft_tokens"):
        _batch("0.21", mm_kwargs={"do_resize": False})
    with pytest.raises(NotMirrored, match="size"):
        _batch("0.21", processor={"size": {"width": 896, "height": 896}})


def test_plan_names_the_encoder_profile_with_the_batch_reason() -> None:
    """End to end: the 31B on an H100 with vLLM 0.20: the encoder profile is named, not
    estimated, and the note says why: the tower is transformers' Gemma4VisionModel
    (gemma4_mm.py, vLLM 0.19.0 - 0.34.0: ``AutoModel.from_config(config=config.vision_config)``)
    and its peak depends on the transformers release (see the next test)."""
    request = PlanRequest(
        str(FOLDER),
        gpu="H100",
        weights="58GiB",
        vllm_version="0.20",
        max_model_len=32768,
        max_num_batched_tokens=8192,
    )
    est = plan_run(request).estimate
    assert est is not None
    (part,) = [p for p in est.components if p.name == "encoder profile"]
    assert part.estimated is False
    (note,) = [note for note in est.notes if "Gemma 4's vision tower" in note]
    assert "transformers 5.9.0" in note and "from 5.10.1" in note


def test_the_forward_stays_named_because_transformers_decides_the_peak() -> None:
    """Why the forward is not estimated. transformers 5.5.0 - 5.9.0
    models/gemma4/modeling_gemma4.py ``Gemma4VisionPatchEmbedder._position_embeddings``:
    ``one_hot = F.one_hot(clamped_positions, num_classes=self.position_embedding_size)`` then
    ``.permute(0, 2, 1, 3).to(self.position_embedding_table)`` and ``one_hot @ table``: int64
    (batch, patches, 2, 10,240) beside its bfloat16 cast, (16 + 4) × 10,240 = 204,800 bytes a
    patch on the 31B (position_embedding_size 10,240), against the envelope's
    2 × (5 × 1,152 + 3 × 4,304) = 37,344; transformers 5.10.1 (PR 46176, merged for issue
    46175) uses two ``F.embedding`` lookups instead. vLLM 0.34.0 gemma4_mm.py ``_embed_patches``
    still calls ``embedder._position_embeddings``, and vLLM 0.27.1 requires
    ``transformers>=5.5.3`` with no upper bound (github.com/timothystewart6/vllm-gb10 issue 97),
    so one vLLM release runs either: the batch is derived, the forward note stays."""
    batch = _batch("0.34")
    assert batch.forward_note is not None
    assert "position one-hot" in batch.forward_note
    assert "embedding lookup" in batch.forward_note
