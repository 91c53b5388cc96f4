"""SGLang 0.5.18 – 0.5.23: each release's own ``multimodal_model_archs`` and prefill-graph
allowlists decide whether a model is multimodal and whether its prefill CUDA graphs stay on.

configs/model_config.py ``multimodal_model_archs`` (with MIMO_V2_MULTIMODAL_ARCHS): 0.5.18 :1822
(70 names), 0.5.19 :1886 (71, + Dots3NoteForCausalLM), 0.5.20 :2103 (75, + Cosmos3Edge,
Glm5Next, NemotronH_Omni_Reasoning_V3, Qwen4Exp), 0.5.21 :2199 (79, + BailingMM, BailingMM2,
BailingMoeV3VL, DiffusionGemmaForBlockDiffusion), 0.5.22 :2279 (80, + EmbeddingGemma2Model),
0.5.23 :2391 (81, + MuseSparkForConditionalGeneration).

``multimodal_breakable_cuda_graph_supported_model_archs``: 0.5.18 :1921 (InternS2Mobius,
Qwen3.5 / 3.6, MuseGlimmer, KimiK3, KimiK25), 0.5.19 :1985 (+ Cohere2Vision, PaddleOCRVL),
0.5.20 :2207 (+ Glm5Next), 0.5.21 :2307 (the same 9), 0.5.22 :2388 (+ MiniMaxM3Sparse both forms,
Qwen4Exp), 0.5.23 :2501 (+ MuseSpark; 14 entries, MiniMaxM3SparseForConditionalGeneration twice).

``multimodal_piecewise_cuda_graph_supported_model_archs``: 0.5.18 :1908 (Cohere2Vision, KimiK25,
MiniMaxM3Sparse both forms), 0.5.19 :1973 – 0.5.21 :2295 (less Cohere2Vision). Where the default
prefill backend is breakable, an architecture on it and not on the breakable list moves to
tc_piecewise (0.5.18 server_args.py:4548 ``_apply_cuda_graph_compatibility``; 0.5.19 – 0.5.21
arg_groups/cuda_graph_hook.py:106 / :106 / :114) unless the attention backend is trtllm_mla,
and tc_piecewise's rules keep them (its "multimodal model" rule exempts that list; none of them
is on ``piecewise_cuda_graph_disabled_model_archs``, 0.5.18 :1895). 0.5.22 drops the switch
(cuda_graph_hook.py:104; model_executor/cuda_graph_config.py:48 ``ALL = (FULL, BREAKABLE,
DISABLED)``). Either backend reserves ``len(prefill bs) × 8`` MiB (server_args.py:5105).

H100 81,559 MiB. Dense tp 1 reserve (chunk 8192, decode max_bs 256): 512 + 12,288 + 512 + 128 =
13,440 MiB (graphs off: 68,119 / 81,559 = 0.83521 → 0.835), + 58 prefill sizes × 8 = 464 with
the graphs on (67,655 / 81,559 = 0.82952 → 0.830). ``adjust_mem_fraction_for_vlm`` scales a
multimodal model with a ViT-L-sized (empty) vision_config by 0.95: 0.79325 off, 0.7885 on.
"""

from __future__ import annotations

from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.sglang import sglang_rules
from mmcli.kv.sglang.budget import PrefillGraphs, default_fraction
from mmcli.kv.sglang.multimodal import is_multimodal

MiB = 2**20
H100 = 81_559 * MiB
ALL = ["0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]
OFF, ON, TEXT = 0.835 * 0.95, 0.830 * 0.95, 0.830


def _fraction(release: str, arch: str, *, mla: bool = False) -> float:
    doc = {"architectures": [arch], "vision_config": {}}
    rules = sglang_rules(release)
    multimodal = is_multimodal(doc, rules, from_gpu=True)
    graphs = PrefillGraphs(multimodal=multimodal, mla=mla)
    return default_fraction(rules, H100, tp=1, multimodal=multimodal, doc=doc, graphs=graphs).value


@pytest.mark.parametrize(
    ("release", "archs", "breakable"),
    [
        ("0.5.18", 70, 6),
        ("0.5.19", 71, 8),
        ("0.5.20", 75, 9),
        ("0.5.21", 79, 9),
        ("0.5.22", 80, 12),
        ("0.5.23", 81, 13),
    ],
)
def test_each_release_has_its_own_lists(release: str, archs: int, breakable: int) -> None:
    rules = sglang_rules(release)
    assert len(rules.multimodal_archs) == archs
    assert len(rules.multimodal_breakable_archs) == breakable


@pytest.mark.parametrize(
    ("arch", "expected"),
    [
        # Piecewise list in 0.5.18 (tc_piecewise keeps the graphs), breakable from 0.5.19.
        ("Cohere2VisionForConditionalGeneration", [ON] * 6),
        # Off the allowlists in 0.5.18 (graphs off), breakable from 0.5.19.
        ("PaddleOCRVLForConditionalGeneration", [OFF] + [ON] * 5),
        # Piecewise list 0.5.18 – 0.5.21, breakable from 0.5.22: kept throughout.
        ("MiniMaxM3SparseForConditionalGeneration", [ON] * 6),
        # Not multimodal before 0.5.20 (no text sub-config): no scaling, graphs kept; then
        # multimodal with the graphs off, breakable from 0.5.22.
        ("Qwen4ExpForConditionalGeneration", [TEXT, TEXT, OFF, OFF, ON, ON]),
        # Listed from 0.5.20, breakable from 0.5.20.
        ("Glm5NextForConditionalGeneration", [TEXT, TEXT, ON, ON, ON, ON]),
        ("Dots3NoteForCausalLM", [TEXT] + [OFF] * 5),
        ("Cosmos3EdgeForConditionalGeneration", [TEXT, TEXT] + [OFF] * 4),
        ("NemotronH_Omni_Reasoning_V3", [TEXT, TEXT] + [OFF] * 4),
        ("BailingMMNativeForConditionalGeneration", [TEXT] * 3 + [OFF] * 3),
        ("BailingMoeV3VLForConditionalGeneration", [TEXT] * 3 + [OFF] * 3),
        # On the list from 0.5.18, breakable throughout.
        ("InternS2MobiusForConditionalGeneration", [ON] * 6),
    ],
)
def test_fraction_follows_each_releases_lists(arch: str, expected: list[float]) -> None:
    got = [_fraction(release, arch) for release in ALL]
    assert got == pytest.approx(expected, abs=5e-7)


def test_diffusion_and_embedding_models_are_listed_from_their_release() -> None:
    diffusion = {"architectures": ["DiffusionGemmaForBlockDiffusion"]}
    embedding = {"architectures": ["EmbeddingGemma2Model"]}
    got = [
        (
            is_multimodal(diffusion, sglang_rules(r), from_gpu=True),
            is_multimodal(embedding, sglang_rules(r), from_gpu=True),
        )
        for r in ALL
    ]
    assert got == [(False, False)] * 3 + [(True, False)] + [(True, True)] * 2


def test_piecewise_switch_of_an_mla_model_is_refused() -> None:
    # trtllm_mla keeps the breakable backend (and its multimodal rule turns the graphs off):
    # the attention backend's resolution is not mirrored.
    with pytest.raises(InputError, match=r"0\.5\.21: .*MLA model on multimodal_piecewise"):
        _fraction("0.5.21", "MiniMaxM3SparseForConditionalGeneration", mla=True)
    # 0.5.22: breakable list; an MLA model's graphs reserve 1.5 GiB: 13,440 + 1,536 = 14,976,
    # 66,583 / 81,559 = 0.81638 → 0.816, × 0.95.
    got = _fraction("0.5.22", "MiniMaxM3SparseForConditionalGeneration", mla=True)
    assert got == pytest.approx(0.816 * 0.95, abs=5e-7)


def test_muse_spark_is_refused_where_listed() -> None:
    # 0.5.23 arg_groups/overrides.py:310: MuseSpark's KV cache defaults to fp8_e4m3.
    doc: dict[str, Any] = {"architectures": ["MuseSparkForConditionalGeneration"]}
    for from_gpu in (True, False):
        with pytest.raises(InputError, match=r"0\.5\.23: MuseSparkForConditionalGeneration"):
            is_multimodal(doc, sglang_rules("0.5.23"), from_gpu=from_gpu)
    assert not is_multimodal(doc, sglang_rules("0.5.22"), from_gpu=True)
