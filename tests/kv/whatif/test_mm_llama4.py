"""Llama 4's dummy image in the ``--gpu`` estimate's encoder profile
(:mod:`mmcli.kv.whatif.mm_llama4`), on Llama-4-Maverick-17B-128E's config
(tests/kv/whatif/models/llama_4_maverick, PROVENANCE.md there: vision tower hidden 1,408,
intermediate 5,632, 34 layers, GELU, image_size 336, patch 14, pixel_shuffle_ratio 0.5; text
hidden 5,120; the image processor's ``max_patches`` 16).

The rule is the same in every release that serves Llama 4 (mllama4.py of 0.10.0 to 0.34.0:
``Mllama4ProcessingInfo`` and ``Mllama4DummyInputsBuilder`` differ only in formatting, the
``use_fast`` argument and the dummy ``overrides`` of ``--limit-mm-per-prompt``); what the
encoder budget counts changes (``mm_dummy_tokens``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mm_folders import folder_batch, model_json
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.kv.releases import first_release
from mmcli.kv.whatif.mm_dummy import NotMirrored

FOLDER = Path("tests/kv/whatif/models/llama_4_maverick")


def _doc() -> dict[str, Any]:
    return model_json(FOLDER)


def _processor() -> dict[str, Any]:
    return model_json(FOLDER, "preprocessor_config.json")


def _batch(version: str, doc: dict[str, Any] | None = None, **extra: Any) -> Any:
    return folder_batch(doc or _doc(), version, **({"processor": _processor()} | extra))


def test_the_image_of_most_tiles_counted_by_its_encoder_outputs() -> None:
    """vLLM 0.20.0 mllama4.py:558-586: images only; ``get_image_size_with_most_features`` is
    ``max_patches`` (16, ``get_max_num_tiles``: the image processor's) × 336 high and 336 wide,
    the dummy image of ``get_dummy_mm_data`` (:699). ``_call_hf_processor`` (:621-635) fits it
    with ``get_best_fit`` to the aspect ratio (16, 1) (transformers image_processing_llama4.py:
    the only resolution of ≤ 16 tiles reached at scale 1) and 1 + 16 = 17 tiles.
    ``get_patch_per_chunk`` (:564-574): (336 // 14)² // round(1 / 0.5²) = 576 // 4 = 144
    ``<|patch|>`` tokens a tile, the embeds of ``select_text`` (:679): 17 × 144 = 2,448; Llama 4
    has no ``get_mm_max_tokens_per_item``, so encoder_budget.py:39 counts ``get_num_embeds``.
    The tower sees 17 × 576 = 9,792 patches (mllama4.py:516-520 adds a class token a tile, not
    counted). Budget max(8,192, 2,448) = 8,192: 8,192 // 2,448 = 3 items."""
    batch = _batch("0.20.0")
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("image", 2448, 3, 8192)
    assert (batch.patches, batch.embeds) == (9792, 2448)
    assert batch.inputs["tokens_by_modality"] == {"image": 2448}
    tower = batch.tower
    assert (tower.hidden, tower.intermediate, tower.gated, tower.layers) == (1408, 5632, False, 34)
    assert (tower.pixels_per_patch, tower.out_hidden) == (3 * 14 * 14, 5120)


def test_0_10_1_to_0_12_count_the_whole_placeholder() -> None:
    """vLLM 0.12.0 profiling.py:283 counts ``item.length`` (``get_mm_max_contiguous_tokens``)
    where 0.10.0 (profiling.py:187) and 0.13.0 on count ``get_num_embeds``. The placeholder is
    transformers' ``Llama4Processor._prompt_split_image`` for (16, 1): ``<|image_start|>``,
    16 rows of 144 ``<|patch|>`` each closed by ``<|tile_y_separator|>`` (one column: no
    ``<|tile_x_separator|>``), ``<|image|>``, 144 ``<|patch|>``, ``<|image_end|>``, each a
    single special token (transformers convert_llama4_weights_to_hf.py
    ``LLAMA4_VISION_SPECIAL_TOKENS``): 2,448 + 16 + 3 = 2,467 tokens, still 3 items
    (8,192 // 2,467); the encoder yields 2,448 rows."""
    assert first_release("mm_dummy_tokens", "placeholder") == "0.10.1"
    for version in ("0.10.1", "0.11.0", "0.12.0"):
        batch = _batch(version)
        assert (batch.tokens, batch.embeds, batch.items) == (2467, 2448, 3)
    for version in ("0.10.0", "0.13.0", "0.34.0"):
        assert (_batch(version).tokens, _batch(version).patches) == (2448, 9792)


def test_max_patches_sizes_the_image() -> None:
    """``get_max_num_tiles`` reads the image processor's ``max_patches``: with 4 the image is
    (4, 1) tiles plus the global tile, 5 × 144 = 720 tokens from 5 × 576 = 2,880 patches
    (8,192 // 720 = 11 items); with 1 no global tile is added (``1 if r_h * r_w == 1``):
    144 tokens from 576 patches, and the placeholder is 144 + 3 (no tile rows)."""
    four = _batch("0.20.0", processor=_processor() | {"max_patches": 4})
    assert (four.tokens, four.patches, four.items) == (720, 2880, 11)
    one = _batch("0.20.0", processor=_processor() | {"max_patches": 1})
    assert (one.tokens, one.patches, one.embeds) == (144, 576, 144)
    assert _batch("0.11.0", processor=_processor() | {"max_patches": 1}).tokens == 147


def test_settings_not_mirrored_are_refused() -> None:
    """No processor file (``max_patches`` unknown), ``--mm-processor-kwargs``, a processor
    ``size`` other than the config's tile and a tile off the patch grid are refused."""
    with pytest.raises(NotMirrored, match="preprocessor_config.json"):
        _batch("0.20.0", processor=None)
    with pytest.raises(NotMirrored, match="max_patches"):
        _batch("0.20.0", mm_kwargs={"max_patches": 4})
    with pytest.raises(NotMirrored, match="size"):
        _batch("0.20.0", processor=_processor() | {"size": {"height": 448, "width": 448}})
    doc = _doc()
    doc["vision_config"] = doc["vision_config"] | {"image_size": 340}
    with pytest.raises(NotMirrored, match="multiple"):
        _batch("0.20.0", doc=doc)


def test_the_plan_estimates_the_encoder_profile() -> None:
    """``kv-share plan`` on the model folder with ``--gpu`` estimates the encoder profile of 3
    images of 2,448 tokens (budget 8,192); the outputs kept, 3 × 2,448 rows × 5,120 × 2 bytes
    = 75,202,560, are the component, the forward (float32 pixels 3 × 9,792 × 588 × 4 plus the
    envelope) staying under the text peak."""
    args = ["kv-share", "plan", str(FOLDER), "--gpu", "H100", "--weights", "40GiB"]
    args += ["--vllm-version", "0.20", "--max-model-len", "32768", "--format", "json"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = json.dumps(json.loads(result.stdout))
    assert '"name": "encoder profile"' in text
    assert '"tokens_per_item": 2448' in text and '"items": 3' in text
    assert '"patches_per_item": 9792' in text and '"outputs_bytes": 75202560' in text
    assert '"pixel_values_bytes": 69092352' in text and '"bytes": 75202560' in text
