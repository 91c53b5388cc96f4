"""InternVL's dummy video (original format, ``internvl_chat``) in the ``--gpu`` estimate's
encoder profile (:mod:`mmcli.kv.whatif.mm_internvl`), on InternVL3-1B's config and tokenizer
(tests/kv/whatif/models/internvl3_1b, PROVENANCE.md there: InternViT hidden 1,024,
intermediate 4,096, 24 layers, image_size 448, patch 14, downsample_ratio 0.5,
max_dynamic_patch 12 with a thumbnail; a ``qwen2`` text model of hidden 896; the tokenizer's
added token 151656 ``<|video_pad|>``).

Facts from vLLM 0.20.0 model_executor/models/internvl.py (the same functions in every release
0.10.0 - 0.34.0 but for the text types, ``internvl_video_text``): ``ctx_video_token``
(:346-362) maps ``qwen2`` to ``<|video_pad|>`` and serves video only if the tokenizer's vocab
has it; ``get_num_frames_with_most_features`` (:391-406) is max((max_model_len - the image's
tokens × images counted) // ``image_seq_length``, 1) frames for one video; the video processor
makes one 448 tile a frame (transformers_utils/processors/internvl.py:322-335: min_num = max_num
= 1, no thumbnail) and ``get_video_repl`` (:453-465) selects ``image_seq_length`` = 256
``<|video_pad|>`` tokens a frame (``FrameN: <img>`` / ``</img>`` around them are not selected).
"""

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
from mmcli.kv.whatif.mm_internvl import video_tokens

FOLDER = Path("tests/kv/whatif/models/internvl3_1b")
VIDEO = frozenset({"<|video_pad|>"})


def _doc() -> dict[str, Any]:
    return model_json(FOLDER)


def _batch(version: str, **extra: Any) -> Any:
    return folder_batch(_doc(), version, **({"tokenizer": VIDEO} | extra))


def test_the_tokenizer_files_say_whether_the_video_token_is_there() -> None:
    """InternVL3-1B's tokenizer lists ``<|video_pad|>`` (id 151656) among its added tokens
    (PROVENANCE.md); without it, or with a ``tokenizer.json`` whose ``added_tokens`` and
    ``model.vocab`` lack it, the video is not served; neither file: not known (None)."""
    config = json.loads((FOLDER / "tokenizer_config.json").read_text())
    assert video_tokens({"tokenizer_config.json": config}.get) == VIDEO
    decoder = {k: v for k, v in config["added_tokens_decoder"].items() if k != "151656"}
    no_video = {"tokenizer_config.json": {"added_tokens_decoder": decoder}}
    assert video_tokens(no_video.get) == frozenset()
    fast = {"added_tokens": [{"content": "<|reserved_200000|>"}], "model": {"vocab": {"a": 0}}}
    assert video_tokens({"tokenizer.json": fast}.get) == {"<|reserved_200000|>"}
    assert video_tokens({"tokenizer.json": {"added_tokens": []}}.get) == frozenset()
    assert video_tokens({}.get) is None


@pytest.mark.parametrize(("version", "frames"), [
    ("0.10.0", 115), ("0.13.0", 128), ("0.20.0", 128), ("0.34.0", 128),
])  # fmt: skip
def test_the_dummy_video_per_release(version: str, frames: int) -> None:
    """The image: 12 tiles + a thumbnail = 13 × 256 = 3,328 tokens. The video counted beside
    it: (32,768 - 3,328) // 256 = 115 frames, 29,440 tokens (``get_num_embeds``), more than the
    image: budget 29,440, 1 item. The item encoded: 0.10.0 builds it at the tokens counted
    (0.10.0 v1/worker/gpu_model_runner.py:2386-2391, seq_len=max_tokens_per_mm_item): 115
    frames; from 0.11 at max_model_len with the video alone (0.13.0 gpu_model_runner.py:3950,
    0.20.0 multimodal/registry.py:232, 0.34.0 multimodal/encoder_budget.py:206-209 and
    processing/processor.py:1103): 32,768 // 256 = 128 frames. 1,024 patches a frame."""
    batch = _batch(version)
    assert batch.inputs["tokens_by_modality"] == {"image": 3328, "video": 29440}
    assert (batch.modality, batch.tokens, batch.items, batch.budget) == ("video", 29440, 1, 29440)
    assert (batch.patches, batch.embeds) == (frames * 1024, frames * 256)
    assert first_release("mm_encoded_item_len", "max-model-len") == "0.11"


def test_images_off_leave_the_whole_length_to_the_video() -> None:
    """With images off the video counted is 32,768 // 256 = 128 frames (``mm_counts`` holds
    one item of each enabled modality, 0.20.0 multimodal/encoder_budget.py:88-92), and at
    max_model_len 4,096 with images on, (4,096 - 3,328) // 256 = 3 frames: 768 tokens, the
    image (3,328) profiled, 8,192 // 3,328 = 2 items."""
    batch = _batch("0.20.0", limits={"image": 0})
    assert (batch.modality, batch.tokens, batch.patches, batch.embeds) == (
        "video",
        32768,
        128 * 1024,
        32768,
    )
    short = _batch("0.20.0", max_model_len=4096)
    assert short.inputs["tokens_by_modality"] == {"image": 3328, "video": 768}
    assert (short.modality, short.items) == ("image", 2)


def test_a_tokenizer_without_the_token_or_none_read() -> None:
    """No ``<|video_pad|>`` in the tokenizer: image only (``get_supported_mm_limits`` has no
    video, 0.20.0 internvl.py:387-389). No tokenizer file read: refused, naming the files.
    0.10.1 - 0.12 count the whole placeholder (``FrameN: <img>`` too): refused.
    ``--mm-processor-kwargs`` with the video on: refused (the video processor gets them)."""
    batch = _batch("0.20.0", tokenizer=frozenset())
    assert (batch.modality, batch.tokens) == ("image", 3328)
    with pytest.raises(NotMirrored, match="tokenizer_config.json or tokenizer.json"):
        _batch("0.20.0", tokenizer=None)
    with pytest.raises(NotMirrored, match="whole placeholder"):
        _batch("0.11.0")
    with pytest.raises(NotMirrored, match="mm-processor-kwargs"):
        _batch("0.20.0", mm_kwargs={"max_dynamic_patch": 6})


def test_the_plan_of_the_folder_estimates_the_video() -> None:
    """``kv-share plan`` of the folder reads its tokenizer_config.json beside config.json and,
    with ``--gpu``, estimates the encoder profile of the dummy video above (0.20: 1 video of
    29,440 tokens, encoded as 128 frames)."""
    args = ["kv-share", "plan", str(FOLDER), "--gpu", "H100", "--weights", "4.4GiB"]
    args += ["--vllm-version", "0.20", "--max-model-len", "32768", "--format", "json"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = json.dumps(json.loads(result.stdout))
    assert '"name": "encoder profile"' in text
    assert '"tokens_per_item": 29440' in text and '"items": 1' in text
    assert '"estimated": false' not in text
