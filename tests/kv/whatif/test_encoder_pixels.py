"""The encoder profile's pixel values: float32 from the processor, or the image's raw ``uint8``
bytes where the GPU rescales and normalises them (``--mm-device-do-normalize``).

vLLM 0.30.0 config/model.py:962-1000 ``_resolve_mm_device_do_normalize``: unset, the setting
is the model class's ``supports_mm_device_do_normalize`` (False by default,
model_executor/models/interfaces.py:186); set on a model without it, it is forced off.
config/multimodal.py (0.32.0 :724-735) then turns the processor's ``do_normalize`` and
``do_rescale`` off, so the pixel values travel as ``uint8`` and ``FusedMMInputNorm`` (0.32.0
model_executor/layers/fusion/mm_input_norm.py:200-215: "It is ``uint8`` when
``mm_device_do_normalize`` is enabled") rescales them on the GPU, in the vision tower's
forward (0.32.0 qwen2_5_vl.py:1089 ``self.input_norm(x.to(device=self.device), self.dtype)``;
0.29.0 qwen2_5_vl.py:1079 cast the float32 values instead). The classes that set it:
0.30.0 qwen2_vl.py:1205, qwen2_5_vl.py:1258; 0.32.0 adds qwen3_vl.py:1964 (which
Qwen3_5ForConditionalGeneration, qwen3_5.py:473, and Qwen3VLMoe, qwen3_vl_moe.py:230,
subclass), kimi_k25.py:309, mistral3.py:413, glm4_1v.py:1764; 0.34.0 adds gemma3_mm.py and
gemma4_mm.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmcli.kv.releases import rules_for
from mmcli.kv.serve import parse_serve_line
from mmcli.kv.whatif.encoder import MmSettings, encoder_profile, raw_pixels

FOLDER = Path("tests/kv/whatif/models/qwen2_5_vl_7b")


def _doc() -> dict[str, Any]:
    return dict(json.loads((FOLDER / "config.json").read_text()))


def _profile(version: str, normalize: bool | None = None) -> dict[str, Any]:
    processor = json.loads((FOLDER / "preprocessor_config.json").read_text())
    settings = MmSettings(
        32768, limits={"video": 0}, processor=processor, device_normalize=normalize
    )
    part, _ = encoder_profile(
        _doc(),
        rules_for(version),
        max_num_batched_tokens=8192,
        max_num_seqs=256,
        tp=1,
        dtype_bytes=2,
        text_peak=0,
        settings=settings,
    )
    assert part is not None and part.estimated
    return part.inputs


@pytest.mark.parametrize(
    ("version", "model_type", "raw"),
    [
        ("0.29.0", "qwen2_5_vl", False),
        ("0.30.0", "qwen2_5_vl", True),
        ("0.30.0", "qwen2_vl", True),
        ("0.31.0", "qwen3_vl", False),
        ("0.32.0", "qwen3_vl", True),
        ("0.32.0", "qwen3_5_moe", True),
        ("0.32.0", "kimi_k25", True),
        ("0.32.0", "mistral3", True),
        ("0.33.0", "gemma3", False),
        ("0.34.0", "gemma3", True),
        ("0.34.0", "llava_next", False),
    ],
)
def test_the_models_whose_pixels_stay_bytes(version: str, model_type: str, raw: bool) -> None:
    assert raw_pixels({"model_type": model_type}, rules_for(version), None) is raw


def test_the_flag_turns_it_off_and_cannot_turn_it_on() -> None:
    """``--no-mm-device-do-normalize`` keeps float32 pixels; ``--mm-device-do-normalize`` on a
    model without support is forced off (config/model.py:990-998 in 0.30.0)."""
    rules = rules_for("0.30.0")
    assert raw_pixels({"model_type": "qwen2_5_vl"}, rules, False) is False
    assert raw_pixels({"model_type": "qwen2_5_vl"}, rules, True) is True
    assert raw_pixels({"model_type": "gemma3"}, rules, True) is False


def test_qwen25_vl_pixels_are_a_quarter_from_0_30() -> None:
    """Qwen2.5-VL-7B's dummy image of 16,384 tokens (max_pixels 12,845,056 / 28²): 65,536
    patches of 3 × 2 × 14² = 1,176 values: 4 bytes each on 0.29.0 (308,281,344 bytes), one
    byte each on 0.30.0 (77,070,336), and 4 again with ``--no-mm-device-do-normalize``; the
    rest of the forward is the same."""
    old, new, off = _profile("0.29.0"), _profile("0.30.0"), _profile("0.30.0", False)
    assert old["patches_per_item"] == new["patches_per_item"] == 65536
    assert (old["pixel_values_dtype"], new["pixel_values_dtype"]) == ("float32", "uint8")
    assert old["pixel_values_bytes"] == 65536 * 1176 * 4
    assert new["pixel_values_bytes"] == 65536 * 1176
    assert off["pixel_values_bytes"] == old["pixel_values_bytes"]
    gap = old["pixel_values_bytes"] - new["pixel_values_bytes"]
    assert old["forward_bytes"] - new["forward_bytes"] == gap


def test_the_serve_line_flag_is_applied() -> None:
    """vLLM's argument parser reads ``--mm-device-do-normalize`` as a boolean with its
    ``--no-`` form (engine/arg_utils.py from 0.30.0); the plan request takes it."""
    got = parse_serve_line(f"vllm serve {FOLDER} --no-mm-device-do-normalize", "0.30")
    assert got.applied == {"mm_device_do_normalize": False}
    assert got.request_fields() == {"mm_device_do_normalize": False}
    assert "--mm-device-do-normalize" not in got.not_affecting
