"""SGLang 0.4.6.post5 – 0.5.17: which models ``ModelConfig.is_multimodal`` calls multimodal, and
what that does to Gemma 3's default ``mem_fraction_static``.

configs/model_config.py (each wheel): an unset --enable-multimodal is False when the first
architecture is on ``mm_disabled_models`` = Gemma3ForConditionalGeneration,
Llama4ForConditionalGeneration, Step3VLForConditionalGeneration (0.5.3 :123, 0.5.4 :136,
0.5.11 :186, 0.5.17 :331). ``is_multimodal`` is then ``enable_multimodal and`` …

* 0.5.3 – 0.5.9: ``is_multimodal_model(architectures)``, the list ``multimodal_model_archs``
  alone (0.5.3 :158 / :780, 0.5.4 :171 / :888, 0.5.9 :168 / :1211): a vision_config does not count;
* 0.5.10: that, or ``has_multimodal_subconfig`` = a text sub-config, or ``hasattr`` vision_config
  or audio_config (:183);
* 0.5.11 – 0.5.17: that, or a text sub-config (``hf_config is not hf_text_config``; the
  vision_config / audio_config test only under the transformers backend: 0.5.11 :218, 0.5.17
  :429); from 0.5.12 a MiMo-V2 config without both a vision_config and an audio_config is
  text-only (0.5.12 :229).

The list gains names release by release (0.5.4 DeepSeek-OCR, …; MiMoV2ForCausalLM from 0.5.11,
configs/model_config.py:46 MIMO_V2_MULTIMODAL_ARCHS) and 0.5.5 drops VILAForConditionalGeneration
(for NVILA, :911).

server_args.py ``_handle_gpu_memory_settings`` scales the default fraction for a multimodal
model (0.5.3 :682, 0.5.5 :829, 0.5.13 :1645 ``adjust_mem_fraction_for_vlm``), and 0.5.10 –
0.5.13 turn the piecewise graphs off for one (0.5.13 :1375; the breakable rules likewise in
0.5.15 – 0.5.17). H100 81,559 MiB; at tp 1 chunk 8192, decode max_bs 256 (0.5.3 :597 the
< 90 GiB tier): 512 + 8192 × 1.5 + 256 × 2 + 1024 / 8 = 13,440 MiB reserved, + 58 prefill
counts × 8 MiB = 13,904 where the piecewise / breakable graphs are reserved (0.5.10 on).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang, sglang_rules
from mmcli.kv.sglang.multimodal import is_multimodal

REALWORLD = Path(__file__).parent / "realworld" / "configs"
GEMMA3 = REALWORLD / "google--gemma-3-27b-it_config.json"
QWEN3_VL = REALWORLD / "Qwen--Qwen3-VL-30B-A3B.nested-subset.json"
GiB = 2**30
MiB = 2**20
H100 = 81_559 * MiB
NO_PREFILL_GRAPHS = ["0.5.3", "0.5.4", "0.5.5", "0.5.6", "0.5.7", "0.5.8", "0.5.9"]
PREFILL_GRAPHS = ["0.5.10", "0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17"]


def _plan(path: Path, release: str, weights: int) -> tuple[int, str]:
    options = SglangOptions(release=release, gpu_bytes=H100, gpu_name="H100", weights_bytes=weights)
    figure = plan_sglang(load_config(path), read_document(path), options).figures["budget_bytes"]
    assert isinstance(figure.value, int)
    return figure.value, figure.estimate or ""


@pytest.mark.parametrize("release", NO_PREFILL_GRAPHS + PREFILL_GRAPHS)
def test_gemma3_is_text_only_by_default(release: str) -> None:
    # Gemma3ForConditionalGeneration is on mm_disabled_models: not multimodal, so no ViT
    # scaling (it was 0.909736328125 × the fraction when any vision_config counted).
    assert not is_multimodal(read_document(GEMMA3), sglang_rules(release), from_gpu=True)
    # 13,440 MiB → 68,119 / 81,559 = 0.8352 → 0.835; with the prefill graphs kept (Gemma 3 is
    # on no list that turns them off) 13,904 MiB → 67,655 / 81,559 = 0.8295 → 0.830.
    fraction = 0.835 if release in NO_PREFILL_GRAPHS else 0.830
    budget, why = _plan(GEMMA3, release, 54 * GiB)
    assert budget == int(H100 * fraction) - 54 * GiB
    assert "as if SGLang treats" not in why


@pytest.mark.parametrize("release", NO_PREFILL_GRAPHS + PREFILL_GRAPHS)
def test_qwen3_vl_without_vision_config_is_multimodal(release: str) -> None:
    # Qwen3VLMoeForConditionalGeneration is on the list from 0.5.3 (:780): multimodal though
    # the subset has no vision_config, so adjust_mem_fraction_for_vlm returns unscaled and the
    # prefill graphs are off: 13,440 MiB → 0.835 on every one of these releases.
    assert is_multimodal(read_document(QWEN3_VL), sglang_rules(release), from_gpu=True)
    assert _plan(QWEN3_VL, release, 60 * GiB)[0] == int(H100 * 0.835) - 60 * GiB


NEW = {"architectures": ["SomeNewForConditionalGeneration"]}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        # An unlisted architecture with a text sub-config: 0.5.10 on (:183, :218).
        ({**NEW, "text_config": {}}, {"0.5.9": False, "0.5.10": True, "0.5.11": True}),
        # With a vision_config alone: only 0.5.10's hasattr test counts it.
        ({**NEW, "vision_config": {}}, {"0.5.9": False, "0.5.10": True, "0.5.11": False}),
        ({**NEW, "audio_config": {}}, {"0.5.9": False, "0.5.10": True, "0.5.17": False}),
        # Llama 4 and Step3-VL are off by default like Gemma 3, sub-config or not.
        (
            {"architectures": ["Llama4ForConditionalGeneration"], "text_config": {}},
            {"0.5.3": False, "0.5.10": False, "0.5.17": False},
        ),
        (
            {"architectures": ["Step3VLForConditionalGeneration"], "vision_config": {}},
            {"0.5.3": False, "0.5.10": False, "0.5.17": False},
        ),
        # VILA leaves the list in 0.5.5; NVILA joins it there.
        ({"architectures": ["VILAForConditionalGeneration"]}, {"0.5.4": True, "0.5.5": False}),
        ({"architectures": ["NVILAForConditionalGeneration"]}, {"0.5.4": False, "0.5.5": True}),
        # Qwen3.5 joins in 0.5.9, Gemma 4 in 0.5.11 (both text_config: 0.5.10 on anyway).
        ({"architectures": ["Qwen3_5ForConditionalGeneration"]}, {"0.5.8": False, "0.5.9": True}),
        (
            {"architectures": ["Gemma4ForConditionalGeneration"]},
            {"0.5.10": False, "0.5.11": True},
        ),
        # A text-only MiMo-V2: on the list from 0.5.11, gated off from 0.5.12 (:229).
        (
            {"architectures": ["MiMoV2ForCausalLM"]},
            {"0.5.10": False, "0.5.11": True, "0.5.12": False},
        ),
        (
            {"architectures": ["MiMoV2ForCausalLM"], "vision_config": {}, "audio_config": {}},
            {"0.5.12": True, "0.5.17": True},
        ),
        # Llava*ForCausalLM read their own config as the text config (no sub-config).
        ({"architectures": ["LlavaLlamaForCausalLM"], "text_config": {}}, {"0.5.11": True}),
        ({"architectures": ["LlamaForCausalLM"]}, {"0.5.3": False, "0.5.17": False}),
        # Inkling is served from 0.5.16, text-only unless --enable-multimodal (0.5.16
        # configs/model_config.py:313 mm_disabled_models), its text_config notwithstanding.
        (
            {"architectures": ["InklingForConditionalGeneration"], "text_config": {}},
            {"0.5.16": False, "0.5.17": False, "0.5.23": False},
        ),
    ],
)
def test_which_models_are_multimodal(doc: dict[str, Any], expected: dict[str, bool]) -> None:
    found = {r: is_multimodal(doc, sglang_rules(r), from_gpu=True) for r in expected}
    assert found == expected


def test_the_lists_grow_as_read() -> None:
    # multimodal_model_archs: 33 names in 0.5.3 (:780), 36 in 0.5.4, 37 in 0.5.5 (VILA out,
    # two NVILA in), 51 in 0.5.9, 53 in 0.5.10, 59 in 0.5.11 (with MIMO_V2_MULTIMODAL_ARCHS),
    # 68 in 0.5.16 and 0.5.17.
    sizes = {r: len(sglang_rules(r).multimodal_archs) for r in ("0.5.3", "0.5.4", "0.5.5")}
    sizes |= {r: len(sglang_rules(r).multimodal_archs) for r in ("0.5.9", "0.5.10", "0.5.11")}
    sizes |= {r: len(sglang_rules(r).multimodal_archs) for r in ("0.5.16", "0.5.17")}
    assert sizes == {
        "0.5.3": 33,
        "0.5.4": 36,
        "0.5.5": 37,
        "0.5.9": 51,
        "0.5.10": 53,
        "0.5.11": 59,
        "0.5.16": 68,
        "0.5.17": 68,
    }


#: 0.4.9.post2 server_args.py:331: ``mem_fraction_static *= 0.90`` for a multimodal model
#: (``is_multimodal`` at configs/model_config.py:136: the list :612 alone; mm_disabled_models
#: :112 Gemma 3 and Llama 4). H100 at tp 1 (:282): (9.5 + 1/2) GiB = 10,240 MiB reserved,
#: 71,319 / 81,559 = 0.8745 → 0.874.
def test_gemma3_on_0_4_9_is_not_scaled() -> None:
    assert not is_multimodal(read_document(GEMMA3), sglang_rules("0.4.9.post2"), from_gpu=True)
    budget, why = _plan(GEMMA3, "0.4.9.post2", 54 * GiB)
    assert budget == int(H100 * 0.874) - 54 * GiB
    assert "as if SGLang treats" not in why


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        # 0.4.6.post5 :534 lists 20 names, 0.4.7 :559 adds Phi-4-MM, 0.4.9.post2 :612 adds
        # Gemma 3n, Qwen2-Audio and VILA; Qwen3-VL joins in 0.5.3 (:780).
        (
            {"architectures": ["Qwen2_5_VLForConditionalGeneration"]},
            {"0.4.6.post5": True, "0.4.9.post2": True},
        ),
        ({"architectures": ["Phi4MMForCausalLM"]}, {"0.4.6.post5": False, "0.4.7": True}),
        (
            {"architectures": ["Qwen3VLMoeForConditionalGeneration"], "vision_config": {}},
            {"0.4.9.post2": False, "0.5.3": True},
        ),
        (
            {"architectures": ["Llama4ForConditionalGeneration"], "vision_config": {}},
            {"0.4.6.post5": False, "0.4.9.post2": False},
        ),
    ],
)
def test_which_models_are_multimodal_on_0_4(doc: dict[str, Any], expected: dict[str, bool]) -> None:
    found = {r: is_multimodal(doc, sglang_rules(r), from_gpu=True) for r in expected}
    assert found == expected
