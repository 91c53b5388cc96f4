"""InternVL's dummy image (original format, ``internvl_chat``) in the ``--gpu`` estimate's
encoder profile (:mod:`mmcli.kv.whatif.mm_internvl`), on InternVL2_5-2B's config
(tests/kv/whatif/models/internvl2_5_2b, PROVENANCE.md there: InternViT hidden 1,024,
intermediate 4,096, 24 layers, image_size 448, patch 14; downsample_ratio 0.5, select_layer -1,
min / max_dynamic_patch 1 / 12, dynamic_image_size and use_thumbnail true; an ``internlm2``
text model of hidden 2,048)."""

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

FOLDER = Path("tests/kv/whatif/models/internvl2_5_2b")


def _doc(**changes: Any) -> dict[str, Any]:
    return model_json(FOLDER) | changes


def _batch(version: str, doc: dict[str, Any] | None = None, **extra: Any) -> Any:
    return folder_batch(doc or _doc(), version, **extra)


def test_the_image_of_most_tiles_counted_by_its_encoder_outputs() -> None:
    """vLLM 0.20.0 internvl.py:147-170 ``get_image_size_with_most_features``: over the target
    ratios of 1 ≤ i × j ≤ 12 + 1 (transformers_utils/processors/internvl.py:65-76
    ``resolve_internvl_min_max_num``: one more with use_thumbnail), the most features are
    ``calculate_internvl_targets`` (processors/internvl.py:95-122) at 12 blocks plus the
    thumbnail = 13 tiles; ``get_num_image_tokens`` (processors/internvl.py:417-436) is tiles ×
    ``image_seq_length`` = (448 // 14)² × 0.5² = 256 (internvl.py:372): 3,328 tokens, all
    ``<IMG_CONTEXT>`` (``get_image_repl`` selects them), counted by ``get_num_embeds``
    (multimodal/encoder_budget.py:15-40; InternVL has no ``get_mm_max_tokens_per_item``). The
    InternViT tower sees 13 × 32² = 13,312 patches. Budget max(8,192, 3,328) = 8,192: 2 items.
    An ``internlm2`` text model has no video token (internvl.py:346-362): image only."""
    batch = _batch("0.20.0")
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("image", 3328, 2, 8192)
    assert (batch.patches, batch.embeds) == (13312, 3328)
    assert batch.inputs["tokens_by_modality"] == {"image": 3328}
    tower = batch.tower
    assert (tower.hidden, tower.intermediate, tower.gated, tower.layers) == (1024, 4096, False, 24)
    assert (tower.pixels_per_patch, tower.out_hidden) == (3 * 14 * 14, 2048)


def test_0_10_0_and_0_13_count_the_encoder_outputs_0_10_1_to_0_12_are_refused() -> None:
    """vLLM 0.10.0 profiling.py:187 and 0.13.0 profiling.py:281 count ``get_num_embeds``
    (3,328); 0.11.0 profiling.py:189 counts each placeholder's whole length, ``<img>`` and
    ``</img>`` too (internvl.py ``get_image_repl``), as the tokenizer splits them: named only."""
    assert _batch("0.10.0").tokens == 3328
    assert _batch("0.13.0").tokens == 3328
    assert _batch("0.34.0").tokens == 3328
    for version in ("0.10.1", "0.11.0", "0.12.0"):
        with pytest.raises(NotMirrored, match="whole placeholder"):
            _batch(version)


def test_the_processor_kwargs_that_size_the_image() -> None:
    """vLLM 0.20.0 internvl.py:323-334 (``get_image_processor``): ``--mm-processor-kwargs``
    ``max_dynamic_patch`` 6 → 6 + 1 thumbnail = 7 tiles, 7 × 256 = 1,792 tokens from
    7 × 1,024 patches;
    ``dynamic_image_size`` false → one tile, no thumbnail (calculate_internvl_targets adds it
    only to more than one block): 256 tokens. ``use_thumbnail`` is a processor kwarg only from
    0.19 (internvl.py:332) and ``image_size`` changes the tile: both refused."""
    six = _batch("0.20.0", mm_kwargs={"max_dynamic_patch": 6})
    assert (six.tokens, six.patches) == (1792, 7168)
    one = _batch("0.13.0", mm_kwargs={"dynamic_image_size": False})
    assert (one.tokens, one.patches, one.items) == (256, 1024, 32)
    for key in ("use_thumbnail", "image_size"):
        with pytest.raises(NotMirrored, match=key):
            _batch("0.20.0", mm_kwargs={key: 1})


def test_a_text_model_with_a_video_token_needs_video_turned_off() -> None:
    """vLLM 0.10.0 internvl.py ``get_video_token``: a video token for a ``qwen2`` text model
    only; 0.10.2 for ``qwen2``, ``qwen3``, ``qwen3_moe``, ``gpt_oss``; served only if the
    tokenizer has it (0.20.0 internvl.py:358-359), which mmcli does not read: refused unless
    ``--limit-mm-per-prompt`` video is 0. A ``qwen3`` text model on 0.10.0 is image only."""
    assert first_release("internvl_video_text", "qwen2-qwen3-gpt-oss") == "0.10.2"
    qwen3 = _doc(llm_config=_doc()["llm_config"] | {"model_type": "qwen3"})
    assert _batch("0.10.0", doc=qwen3).tokens == 3328
    with pytest.raises(NotMirrored, match="video token"):
        _batch("0.13.0", doc=qwen3)
    assert _batch("0.13.0", doc=qwen3, limits={"video": 0}).modality == "image"
    qwen2 = _doc(llm_config=_doc()["llm_config"] | {"model_type": "qwen2"})
    with pytest.raises(NotMirrored, match="video token"):
        _batch("0.10.0", doc=qwen2)


def test_settings_not_mirrored_are_refused() -> None:
    """A ``force_image_size`` other than the tower's (internvl.py:568 sizes the model's tokens
    by it, the processor by ``vision_config.image_size``), Mono-InternVL
    (``InternLM2VEForCausalLM``, internvl.py:577) and a config without ``select_layer``."""
    with pytest.raises(NotMirrored, match="force_image_size"):
        _batch("0.20.0", doc=_doc(force_image_size=224))
    mono = _doc(llm_config=_doc()["llm_config"] | {"architectures": ["InternLM2VEForCausalLM"]})
    with pytest.raises(NotMirrored, match="Mono"):
        _batch("0.20.0", doc=mono)
    doc = _doc()
    del doc["select_layer"]
    with pytest.raises(NotMirrored, match="select_layer"):
        _batch("0.20.0", doc=doc)


def test_the_plan_reads_llm_config_and_estimates_the_encoder() -> None:
    """vLLM remaps a config's ``llm_config`` to ``text_config`` (transformers_utils/config.py
    ``_CONFIG_ATTRS_MAPPING`` = {"llm_config": "text_config"}, 0.10.0 :107, 0.20.0 :130,
    0.34.0 :200), so ``kv-share plan`` plans InternVL2.5-2B's internlm2 text model (24 layers,
    8 KV heads of 128) and, with ``--gpu``, estimates the encoder profile of the dummy image
    above (2 images of 3,328 tokens, video off as the image-only text model has no video)."""
    args = ["kv-share", "plan", str(FOLDER), "--gpu", "H100", "--weights", "4.4GiB"]
    args += ["--vllm-version", "0.20", "--max-model-len", "32768", "--format", "json"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = json.dumps(json.loads(result.stdout))
    assert '"name": "encoder profile"' in text
    assert '"tokens_per_item": 3328' in text and '"items": 2' in text
