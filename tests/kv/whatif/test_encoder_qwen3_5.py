"""Qwen3.5 / Qwen3.6's encoder profile in the ``--gpu`` estimate: Qwen3-VL's dummy batch and
vision tower (:mod:`mmcli.kv.whatif.mm_qwen3`).

vLLM 0.17.0 … 0.34.0 qwen3_5.py: ``Qwen3_5ProcessingInfo`` / ``Qwen3_5MoeProcessingInfo``
subclass ``Qwen3VLProcessingInfo`` (0.34.0 qwen3_5.py:109-119), both architectures register
``Qwen3VLMultiModalProcessor`` with ``Qwen3VLDummyInputsBuilder`` (0.34.0 qwen3_5.py:467-469,
697-699), and the tower is qwen3_vl.py's ``Qwen3_VisionTransformer`` (0.17.0 qwen3_5.py:653),
whose deepstack layers are read only where the vision config has
``deepstack_visual_indexes`` (0.17.0 qwen3_vl.py:335-337): Qwen3.5's vision config has none
(0.17.0 transformers_utils/configs/qwen3_5.py:119-149, ``Qwen3_5VisionConfig``), so an
encoder token is ``out_hidden_size`` wide. Releases before 0.17.0 do not serve the model
(refused elsewhere).

The config: Qwen3.6-35B-A3B's text geometry as tests/kv/realworld reconstructs it, with the
vision config of ``Qwen3_5VisionConfig``'s defaults (depth 27, hidden 1,152, intermediate
4,304, patch 16, merge 2, temporal 2; a published Qwen3.6 config.json prints depth 27 in
public copies) and ``out_hidden_size`` = the text hidden size 2,048 (the merger's output is
scattered into the text embeddings). The processor files are Qwen3-VL's
(tests/kv/whatif/models/qwen3_vl): the image of most features is 16,384 tokens, which the
published Qwen3.5 / 3.6 / 3.8 logs of noonghunna/club-3090 print: "Encoder cache will be
initialized with a budget of 16384 tokens, and profiled with 1 image items of the maximum
feature size." (issues #120, #745, #1047, #1107, with ``compile range (1, 8192)``: a
max_num_batched_tokens of 8,192).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.kv.releases import rules_for
from mmcli.kv.whatif.encoder import MmSettings, encoder_profile, mm_settings
from mmcli.kv.whatif.mm_dummy import dummy_batch

TEXT = Path("tests/kv/realworld/configs/Qwen--Qwen3.6-35B-A3B.text_config.RECONSTRUCTED.json")
PROCESSORS = Path("tests/kv/whatif/models/qwen3_vl")
VISION: dict[str, Any] = {
    "depth": 27,
    "hidden_size": 1152,
    "hidden_act": "gelu_pytorch_tanh",
    "intermediate_size": 4304,
    "num_heads": 16,
    "in_channels": 3,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 2048,
    "num_position_embeddings": 2304,
}


def _doc(model_type: str = "qwen3_5_moe") -> dict[str, Any]:
    doc = dict(json.loads(TEXT.read_text()))
    doc["model_type"] = model_type
    doc["vision_config"] = dict(VISION)
    return doc


def _files() -> tuple[dict[str, Any], dict[str, Any]]:
    image = json.loads((PROCESSORS / "preprocessor_config.json").read_text())
    video = json.loads((PROCESSORS / "video_preprocessor_config.json").read_text())
    return image, video


@pytest.mark.parametrize("model_type", ["qwen3_5", "qwen3_5_moe"])
@pytest.mark.parametrize("version", ["0.17.0", "0.24.0", "0.34.0"])
def test_the_image_of_most_features_is_profiled(model_type: str, version: str) -> None:
    """club-3090#612's settings (vLLM 0.24.0 non-default args: max_model_len 131,072,
    max_num_batched_tokens 8,192, max_num_seqs 1, limit_mm_per_prompt {'image': 2,
    'audio': 0}): the image's 128² × 4 = 65,536 patches merge to 16,384 tokens; the two-frame
    dummy video (the rule of 0.15 onwards) has 12,288 and loses. Budget max(8,192, 16,384), one
    item (16,384 // 16,384), the "budget of 16384 tokens ... 1 image items" of the Qwen3.x
    logs."""
    image, video = _files()
    batch = dummy_batch(
        _doc(model_type),
        rules_for(version),
        max_model_len=131072,
        max_num_batched_tokens=8192,
        max_num_seqs=1,
        limits={"image": 2, "audio": 0},
        processor=image,
        video_processor=video,
    )
    assert batch is not None
    assert batch.inputs["tokens_by_modality"] == {"image": 16384, "video": 12288}
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("image", 16384, 1, 16384)
    assert batch.patches == 65536


def test_no_deepstack_outputs_one_width_a_token() -> None:
    """Without ``deepstack_visual_indexes`` the outputs are 16,384 rows × 2,048 × 2 bytes (a
    Qwen3-VL config with three deepstack layers has four times as many); the forward at
    tensor parallel 1 is the float32 pixels (65,536 × 3 × 2 × 16² × 4 bytes; vLLM 0.24 does
    not normalise Qwen3.5's on the GPU) plus 65,536 × the tallied vision block (0.24.0
    ``qwen3_vl_vision_stage`` rotary-copy-model, tests/kv/whatif/test_qwen3_vision.py): 11
    hidden-size units at the attention's output projection beside the kept position embeddings
    (1 unit; no deepstack outputs), 12 × 1,152 × 2 bytes, over a text peak of zero."""
    image, video = _files()
    settings = MmSettings(32768, processor=image, video_processor=video)
    fields: dict[str, Any] = {
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 256,
        "tp": 1,
        "dtype_bytes": 2,
        "text_peak": 0,
        "settings": settings,
    }
    part, _ = encoder_profile(_doc(), rules_for("0.24.0"), **fields)
    assert part is not None and part.estimated
    forward = 65536 * 1536 * 4 + 65536 * 12 * 1152 * 2
    assert part.bytes == forward
    assert part.inputs["outputs_bytes"] == 16384 * 2048 * 2
    deep = _doc()
    deep["vision_config"]["deepstack_visual_indexes"] = [8, 16, 24]
    part, _ = encoder_profile(deep, rules_for("0.24.0"), **(fields | {"text_peak": forward}))
    assert part is not None and part.bytes == 16384 * 2048 * 4 * 2


def test_the_video_processor_file_is_read(tmp_path: Path) -> None:
    """mm_settings reads video_preprocessor_config.json beside the config for Qwen3.5 as for
    Qwen3-VL (the dummy video's size comes from it)."""
    got = mm_settings(_doc(), lambda: 32768, lambda name: PROCESSORS / name)
    assert got.video_processor is not None
    assert got.video_processor["size"]["longest_edge"] == 25165824


def test_plan_estimates_the_encoder_profile(tmp_path: Path) -> None:
    """``kv-share plan FOLDER --gpu H100`` on a Qwen3.6-35B-A3B folder (config + the two
    processor files): the encoder profile is an estimated component, its inputs the image
    batch above (max_num_batched_tokens 8,192 is ``vllm serve``'s default on an H100)."""
    (tmp_path / "config.json").write_text(json.dumps(_doc()))
    for name in ("preprocessor_config.json", "video_preprocessor_config.json"):
        shutil.copy(PROCESSORS / name, tmp_path / name)
    args = ["kv-share", "plan", str(tmp_path), "--gpu", "H100", "--weights", "20GiB"]
    args += ["--vllm-version", "0.24", "--max-model-len", "32768", "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    text = json.dumps(doc)
    assert '"name": "encoder profile"' in text
    parts = _components(doc)
    encoder = next(p for p in parts if p["name"] == "encoder profile")
    assert encoder["bytes"] > 0
    assert encoder["inputs"]["modality"] == "image"
    assert (encoder["inputs"]["items"], encoder["inputs"]["tokens_per_item"]) == (1, 16384)


def _components(doc: Any) -> list[dict[str, Any]]:
    """The component dicts anywhere in the plan's JSON."""
    found: list[dict[str, Any]] = []
    if isinstance(doc, dict):
        if "name" in doc and "bytes" in doc and "inputs" in doc:
            found.append(doc)
        for value in doc.values():
            found += _components(value)
    elif isinstance(doc, list):
        for value in doc:
            found += _components(value)
    return found
