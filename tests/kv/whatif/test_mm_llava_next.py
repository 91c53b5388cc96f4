"""LLaVA-NeXT's dummy image in the ``--gpu`` estimate's encoder profile
(:mod:`mmcli.kv.whatif.mm_llava_next`), on llava-hf/llava-v1.6-mistral-7b-hf's config
(tests/kv/whatif/models/llava_v1_6_mistral_7b, PROVENANCE.md there: a CLIP tower of hidden
1,024, intermediate 4,096, 24 layers, image_size 336, patch 14; image_grid_pinpoints
[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]; vision_feature_layer -2;
vision_feature_select_strategy default; text hidden 4,096)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mm_folders import folder_batch, model_json
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.kv.whatif.mm_dummy import NotMirrored
from mmcli.kv.whatif.mm_llava_next import best_fit

FOLDER = Path("tests/kv/whatif/models/llava_v1_6_mistral_7b")


def _doc() -> dict[str, Any]:
    return model_json(FOLDER)


def _batch(version: str, doc: dict[str, Any] | None = None, **extra: Any) -> Any:
    return folder_batch(doc or _doc(), version, **extra)


@pytest.mark.parametrize("version", ["0.10.0", "0.11.0", "0.20.0", "0.34.0"])
def test_the_largest_image_is_the_pinpoint_of_most_tokens(version: str) -> None:
    """vLLM 0.20.0 llava_next.py:104-190 (the same function bodies in 0.10.0 - 0.34.0, only
    reformatted): for each pinpoint (h, w) the tokens are the base image's (clip.py:84-90:
    (336 / 14)² + 1 = 577, less one under the ``default`` strategy, vision.py:173-191: 576)
    plus the anyres features: the pinpoint fits itself, so (h / 336) × (w / 336) tiles of 24 × 24
    features, none padded, plus one newline a feature row. [336, 672]: 24 × 48 + 24 + 576 =
    1,752; [672, 336]: 1,152 + 48 + 576 = 1,776; [672, 672]: 48 × 48 + 48 + 576 = 2,928;
    [1008, 336]: 1,728 + 72 + 576 = 2,376; [336, 1008]: 1,728 + 24 + 576 = 2,328. The largest,
    672 × 672, is 2,928 image tokens (all of them embeddings, so 0.10.1 - 0.12's placeholder
    count is the same). The tower encodes 2 × 2 tiles and the base image, 5 × 577 = 2,885
    positions. Budget max(8,192, 2,928): 8,192 // 2,928 = 2 items. vision_feature_layer -2:
    24 - 2 + 1 = 23 layers run (llava.py:438-452, utils.py:876-886)."""
    batch = _batch(version)
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("image", 2928, 2, 8192)
    assert batch.patches == 2885 and batch.embeds is None
    tower = batch.tower
    assert (tower.hidden, tower.intermediate, tower.gated, tower.layers) == (1024, 4096, False, 23)
    assert (tower.pixels_per_patch, tower.out_hidden) == (3 * 14 * 14, 4096)


def test_a_single_wide_pinpoint() -> None:
    """With only [336, 1008]: 1 × 3 tiles, 576 + 24 × 72 + 24 = 2,328 tokens, (3 + 1) × 577 =
    2,308 positions; a 500 × 500 image fits [672, 672] best of the checkpoint's pinpoints
    (scale 1.344 keeps all 250,000 pixels; [336, 1008] and [1008, 336] keep 112,896)."""
    doc = _doc() | {"image_grid_pinpoints": [[336, 1008]]}
    batch = _batch("0.20.0", doc=doc)
    assert (batch.tokens, batch.patches) == (2328, 2308)
    pins = [(h, w) for h, w in _doc()["image_grid_pinpoints"]]
    assert best_fit(500, 500, pins) == (672, 672)


def test_what_is_not_mirrored_is_refused() -> None:
    """--mm-processor-kwargs (e.g. the processor's image_grid_pinpoints) change the tiles: refused;
    a processor tiling at another crop_size is refused; a Pixtral tower is refused."""
    with pytest.raises(NotMirrored, match="image_grid_pinpoints"):
        _batch("0.20.0", mm_kwargs={"image_grid_pinpoints": [[336, 336]]})
    with pytest.raises(NotMirrored, match="crop_size"):
        _batch("0.20.0", processor={"crop_size": {"height": 224, "width": 224}})
    assert _batch("0.20.0", processor={"crop_size": {"height": 336, "width": 336}}).tokens == 2928
    doc = _doc()
    doc["vision_config"] = doc["vision_config"] | {"model_type": "pixtral"}
    with pytest.raises(NotMirrored, match="pixtral"):
        _batch("0.20.0", doc=doc)


def test_plan_estimates_the_encoder_profile() -> None:
    """``kv-share plan --gpu H100`` on the model folder: the encoder profile is estimated (2
    images of 2,928 tokens from 2,885 positions, as above); it was named, not estimated."""
    args = ["kv-share", "plan", str(FOLDER), "--gpu", "H100", "--weights", "15GiB"]
    args += ["--vllm-version", "0.20", "--max-model-len", "32768"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "encoder profile (estimate)" in result.output
    assert "not mirrored" not in result.output
