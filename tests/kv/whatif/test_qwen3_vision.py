"""Qwen3-VL's (and Qwen3.5's) vision block in the ``--gpu`` estimate's encoder profile, tallied
per release (:func:`mmcli.kv.whatif.mm_qwen3.vision_peak`, ``qwen3_vl_vision_stage``), on
Qwen/Qwen3-VL-30B-A3B-Instruct's vision config (tests/kv/gpu_logs/configs, PROVENANCE.md
there: hidden 1,152, intermediate 4,304, 16 heads, depth 27, merge 2, out_hidden 2,048,
deepstack layers [8, 16, 24]), 2-byte model dtype.

What every release 0.11.0 … 0.34.0 shares (vllm/model_executor/models/qwen3_vl.py):

* the block (0.34.0:499-508, 0.17.0:254-263, 0.12.0:237-245, 0.11.0:200-206) is
  ``x = x + self.attn(self.norm1(x), …)`` then ``x = x + self.mlp(self.norm2(x))``; the
  norms are ``partial(nn.LayerNorm, eps=norm_eps)`` (0.34.0:622, 0.11.0:296): torch's
  out-of-place LayerNorm, no vLLM custom op, so ``--enforce-eager`` changes nothing;
* the attention is qwen2_5_vl.py's ``Qwen2_5_VisionAttention`` (imported at 0.34.0:140-141,
  0.11.0:76), whose stage is tallied for Qwen2.5-VL (``VISION_STAGES``); its forward
  (0.34.0 qwen2_5_vl.py:406-464) is unchanged from 0.17.0 but for a type hint (0.22.0);
* the MLP (0.34.0:443, 0.11.0:151) is ``linear_fc2(act_fn(linear_fc1(x)))``, the
  activation ``nn.GELU(approximate="tanh")`` for ``gelu_pytorch_tanh`` on CUDA (0.34.0
  layers/activation.py:798, 811-830; 0.17.0:641-652): a new tensor, fc1's output held as its
  argument;
* the transformer keeps ``pos_embeds`` (one hidden-size unit a patch) through the block loop
  (0.34.0:884, 0.11.0:494) and appends each deepstack merger's output to a list kept to the
  final cat (0.34.0:903-905, 0.11.0:527-529): ``out_hidden_size`` / merge² a patch each.

At one GPU, 0.17.0 … 0.34.0 and 0.12.0 … 0.16.0: at the attention's output projection 3
hidden-size units whole (the block's input, its normed copy, the projection's output) and 8
per rank (qkv 3, the q/k copy 2, its rotated copy 2, the attention output 1): 11 × 1,152 × 2
= 25,344 bytes, over the MLP's GELU (3 × 1,152 + 2 × 4,304) × 2 = 24,128; kept: 1,152 × 2 +
3 × 2,048 / 4 × 2 = 5,376; 30,720 bytes a patch (the generic envelope's (2 × 1,152 + 3 ×
1,152 + 2 × 4,304) × 2 = 28,736).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmcli.kv.releases import rules_for
from mmcli.kv.whatif.encoder import (
    OUT_OF_PLACE_NORM,
    REDUCES,
    VISION_STAGES,
    MmSettings,
    encoder_profile,
)
from mmcli.kv.whatif.mm_qwen3 import vision_peak as qwen3_peak

CONFIG = Path("tests/kv/gpu_logs/configs/Qwen--Qwen3-VL-30B-A3B-Instruct.subset.json")
FOLDER = Path("tests/kv/whatif/models/qwen3_vl")
KEPT = 1152 * 2 + 3 * 2048 // 4 * 2


def _doc() -> dict[str, Any]:
    return dict(json.loads(CONFIG.read_text()))


def _vision() -> dict[str, Any]:
    return dict(_doc()["vision_config"])


def vision_peak(vision: dict[str, Any], rule: str, tp: int, d: int) -> int:
    """Bytes a patch at the peak under ``rule``, as encoder_profile routes it."""
    return qwen3_peak(vision, VISION_STAGES[rule], rule in REDUCES, tp, d)


@pytest.mark.parametrize(
    ("version", "rule"),
    [
        ("0.10.2", "envelope"),
        ("0.11.0", "rotary-cat-fp32"),
        ("0.11.1", "rotary-reshape-fp32"),
        ("0.11.2", "rotary-reshape-fp32"),
        ("0.12.0", "rotary-reshape-model"),
        ("0.16.0", "rotary-reshape-model"),
        ("0.17.0", "rotary-copy-model"),
        ("0.24.0", "rotary-copy-model"),
        ("0.34.0", "rotary-copy-model"),
    ],
)
def test_the_rule_per_release(version: str, rule: str) -> None:
    """qwen3_vl.py appears in 0.11.0; ``Qwen2_5_VisionAttention.forward`` changes in 0.11.1
    (a rearranged copy of q/k rotated in float32), 0.12.0 (rotated out of place in the model
    dtype) and 0.17.0 (a contiguous copy), as Qwen2.5-VL's rule says."""
    assert rules_for(version).qwen3_vl_vision_stage == rule


@pytest.mark.parametrize("version", ["0.11.0", "0.11.1", "0.12.0", "0.17.0", "0.34.0"])
def test_the_attention_stage_is_qwen2_5_vl_s(version: str) -> None:
    """The same attention class: Qwen3-VL's rule is Qwen2.5-VL's attention stage, without
    Qwen2.5-VL's out-of-place fused residual norm (Qwen3-VL's norms are LayerNorms)."""
    rules = rules_for(version)
    qwen25 = rules.qwen_vl_vision_stage
    assert OUT_OF_PLACE_NORM.get(qwen25, qwen25) == rules.qwen3_vl_vision_stage


@pytest.mark.parametrize("rule", ["rotary-copy-model", "rotary-reshape-model"])
def test_the_output_projection_peaks_at_one_gpu(rule: str) -> None:
    """11 hidden-size units at the output projection beside the kept tensors (docstring)."""
    assert vision_peak(_vision(), rule, 1, 2) == 11 * 1152 * 2 + KEPT == 30720


def test_the_float32_rotary_of_0_11_1() -> None:
    """0.11.1 qwen2_5_vl.py:362 (the forward): at the rotary call 2 whole units, 7 in the model
    dtype (qkv 3, the rearranged q/k copy 2, its ``type_as`` result 2) and 4 in float32 (the
    float32 copy 2, the kernel's float32 output 2): 2 × 2,304 + 7 × 2,304 + 4 × 1,152 × 4 =
    39,168."""
    assert vision_peak(_vision(), "rotary-reshape-fp32", 1, 2) == 39168 + KEPT


def test_the_float32_cat_of_0_11_0() -> None:
    """0.11.0 qwen2_5_vl.py:335 (the forward): at the rotary call 2 whole, 10 in the model dtype
    (qkv 3, the contiguous q/k/v 3, their cat 2, its ``type_as`` 2), 4 in float32: 46,080; at
    tensor parallel 2 the rank's qkv is gathered (3 whole units more, kept through the views):
    2 × 2,304 + (10 × 2,304 + 4 × 4,608) / 2 + 3 × 2,304 = 32,256."""
    assert vision_peak(_vision(), "rotary-cat-fp32", 1, 2) == 46080 + KEPT
    assert vision_peak(_vision(), "rotary-cat-fp32", 2, 2) == 32256 + KEPT


def test_tensor_parallel_2_adds_the_all_reduce() -> None:
    """0.34.0 at tp 2: 3 whole + 8 / 2 per rank + the all-reduced output (1 whole) = 8 units;
    the MLP's fc2 stage (4 whole + 1 all-reduced + 4,304 / 2) × 2 = 15,824 stays below."""
    assert vision_peak(_vision(), "rotary-copy-model", 2, 2) == 8 * 1152 * 2 + KEPT


def test_deepstack_outputs_are_kept() -> None:
    """Without deepstack layers only the position embeddings are kept: 3 × 1,024 bytes less."""
    vision = _vision()
    vision["deepstack_visual_indexes"] = []
    assert vision_peak(vision, "rotary-copy-model", 1, 2) == 12 * 1152 * 2


@pytest.mark.parametrize("model_type", ["qwen3_vl_moe", "qwen3_vl", "qwen3_5", "qwen3_5_moe"])
def test_encoder_profile_takes_the_tally(model_type: str) -> None:
    """The four model types route to the tally; ``--enforce-eager`` changes nothing (LayerNorm).
    vLLM 0.34.0 normalises Qwen3-VL's pixels on the GPU (uint8, 1 byte a value): the image of
    most features, 65,536 patches (tests/kv/whatif/test_encoder_qwen3_5.py)."""
    image = json.loads((FOLDER / "preprocessor_config.json").read_text())
    video = json.loads((FOLDER / "video_preprocessor_config.json").read_text())
    doc = _doc()
    doc["model_type"] = model_type
    fields: dict[str, Any] = {
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 256,
        "tp": 1,
        "dtype_bytes": 2,
        "text_peak": 0,
        "settings": MmSettings(32768, limits={"video": 0}, processor=image, video_processor=video),
    }
    part, _ = encoder_profile(doc, rules_for("0.34.0"), **fields)
    eager, _ = encoder_profile(doc, rules_for("0.34.0"), enforce_eager=True, **fields)
    assert part is not None and eager is not None
    assert part.inputs["encoder_forward_rule"] == "rotary-copy-model"
    assert part.inputs["forward_bytes"] == 65536 * 1536 + 65536 * (22 * 1152 + KEPT)
    assert eager.bytes == part.bytes
