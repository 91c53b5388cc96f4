"""Mistral 3's dummy image in the ``--gpu`` estimate's encoder profile
(:mod:`mmcli.kv.whatif.mm_mistral3`), on Mistral-Small-3.1-24B-Instruct-2503's config
(tests/kv/whatif/models/mistral_small_3_1, PROVENANCE.md there: Pixtral tower hidden 1,024,
intermediate 4,096, 24 layers, patch 14, image_size 1,540; spatial_merge_size 2; text hidden
5,120; the processor's ``size`` longest_edge 1,540)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mm_folders import folder_batch, model_json

from mmcli.kv.releases import first_release
from mmcli.kv.whatif.mm_dummy import NotMirrored

FOLDER = Path("tests/kv/whatif/models/mistral_small_3_1")


def _doc() -> dict[str, Any]:
    return model_json(FOLDER)


def _processor() -> dict[str, Any]:
    return model_json(FOLDER, "preprocessor_config.json")


def _batch(version: str, doc: dict[str, Any] | None = None, **extra: Any) -> Any:
    return folder_batch(doc or _doc(), version, **({"processor": _processor()} | extra))


def test_the_largest_image_counted_by_its_encoder_outputs() -> None:
    """vLLM 0.20.0 mistral3.py:198-201 ``get_image_size_with_most_features``: a square of
    ``vision_config.image_size`` (pixtral.py:1108-1109) = 1,540; pixtral.py:1111-1144: patches
    of patch_size × spatial_merge_size = 28 pixels, ⌈1,540 / 28⌉ = 55 columns and rows;
    mistral3.py:300-303: 55 × (55 ``[IMG]`` + one break / end) placeholder tokens of which the
    55² = 3,025 ``[IMG]`` are embeds; Mistral 3 has no ``get_mm_max_tokens_per_item``
    (processing/context.py:486-510 returns None), so encoder_budget.py:25-40 counts the dummy
    item's ``get_num_embeds``: 3,025 tokens. The Pixtral tower sees (1,540 / 14)² = 12,100
    patches. Budget max(8,192, 3,025) = 8,192: 8,192 // 3,025 = 2 items."""
    batch = _batch("0.20.0")
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("image", 3025, 2, 8192)
    assert (batch.patches, batch.embeds) == (12100, 3025)
    tower = batch.tower
    assert (tower.hidden, tower.intermediate, tower.gated, tower.layers) == (1024, 4096, True, 24)
    assert (tower.pixels_per_patch, tower.out_hidden) == (3 * 14 * 14, 5120)


def test_the_largest_image_counted_by_its_placeholder_tokens_in_0_10_1_to_0_12() -> None:
    """vLLM 0.11.0 registry.py:124-143 ``get_max_tokens_per_item_by_modality`` calls
    ``get_mm_max_contiguous_tokens`` (profiling.py:266, ``mm_embeddings_only=False``), which
    counts each placeholder's length (profiling.py:189): 55 × 56 = 3,080 tokens (the row breaks
    and end token, mistral3.py:300-301); the encoder still yields 3,025 rows. 0.10.0
    (profiling.py:187) and 0.13.0 (profiling.py:281) count ``get_num_embeds``: 3,025."""
    assert (_batch("0.11.0").tokens, _batch("0.11.0").embeds) == (3080, 3025)
    assert _batch("0.12.0").tokens == 3080
    assert _batch("0.10.0").tokens == 3025
    assert _batch("0.13.0").tokens == 3025
    assert first_release("mm_dummy_tokens", "placeholder") == "0.10.1"


def test_from_0_29_the_side_is_the_processors_longest_edge() -> None:
    """vLLM 0.34.0 mistral3.py:263: the dummy image side is the image processor's
    ``size["longest_edge"]`` (``--mm-processor-kwargs`` ``size`` merged over it), the grid
    ⌈side / 28⌉ (``Mistral3HFEncoderInfo.get_patch_grid_size``, mistral3.py:212-240). With
    1,540 the batch is 0.20's; with a longest_edge of 1,120 (40 × 28) it is 40² = 1,600 tokens
    and (1,120 / 14)² = 6,400 patches. 0.28 still takes ``vision_config.image_size``."""
    assert first_release("mistral3_image_size", "processor") == "0.29"
    assert (_batch("0.29.0").tokens, _batch("0.29.0").patches) == (3025, 12100)
    small = _batch("0.34.0", mm_kwargs={"size": {"longest_edge": 1120}})
    assert (small.tokens, small.patches) == (1600, 6400)
    with pytest.raises(NotMirrored, match="this release"):
        _batch("0.28.0", mm_kwargs={"size": {"longest_edge": 1120}})
    with pytest.raises(NotMirrored, match="preprocessor_config.json"):
        _batch("0.29.0", processor=None)
    assert _batch("0.28.0", processor=None).tokens == 3025


def test_own_format_checkpoints_are_refused() -> None:
    """Mistral's own format (``params.json`` with a ``vision_encoder`` section,
    ``PixtralForConditionalGeneration``) goes through mistral_common's processor: not mirrored."""
    with pytest.raises(NotMirrored, match="own-format"):
        _batch("0.20.0", doc={"vision_encoder": {"image_size": 1540}, "dim": 5120})
    doc = _doc() | {"architectures": ["PixtralForConditionalGeneration"]}
    with pytest.raises(NotMirrored, match="own-format"):
        _batch("0.20.0", doc=doc)


def test_an_image_side_off_the_merged_patch_grid_is_refused() -> None:
    """A side not a multiple of patch × merge would be cropped or padded by the processor
    (not mirrored)."""
    doc = _doc()
    doc["vision_config"] = doc["vision_config"] | {"image_size": 1024}
    with pytest.raises(NotMirrored, match="multiple"):
        _batch("0.20.0", doc=doc)
