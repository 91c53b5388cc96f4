"""SGLang 0.5.14 – 0.5.17: the default ``mem_fraction_static`` read from cuda_graph_config, and
from 0.5.16 with ``reserve_for_graph_mb``.

sglang 0.5.14 srt/server_args.py ``_handle_gpu_memory_settings`` (:3122): the tiers of 0.5.13
(chunked_prefill_size and the decode phase's max_bs, 24 / 80 below 35 GiB, 256 / 512 below
160 GiB), the prefill phase's max_bs = chunked_prefill_size, or 2048 with an MLA backend
(:3246), capped by --max-total-tokens, a Llama-2 path and --context-length (:3264); its token
counts from ``_generate_prefill_cuda_graph_batch_sizes`` (:3384, 0.5.13's steps); the reserve
``512 + max(chunk, 2048) × 1.5 + max_bs × 2 + tp / 8 × 1024 + (8 × len(bs), or 1.5 × 1024 with
MLA, when the prefill backend is not disabled)`` (:3303 / :3306), at least 10 GiB above 60 GiB
(:3309), ``round((gpu − reserved) / gpu, 3)``, then adjust_mem_fraction_for_vlm (:3321, 0.5.13's
line for line). 0.5.13's speculative-decoding additions are gone. The prefill backend defaults
to tc_piecewise (model_executor/cuda_graph_config.py:91), turned off (:2997) by
``is_piecewise_cuda_graph_disabled_model`` (configs/model_config.py:429: the architectures of
:1713, or a multimodal model not in :1725, ``Cohere2VisionForConditionalGeneration``).

0.5.15 (the same function at :3469; :3593, :3611, :3667, :3670, :3673, :3696) adds
disaggregation branches and DeepEP's +2 GiB, both off in a plain
``python -m sglang.launch_server --model-path M --tp N`` (disaggregation_mode "null",
moe_a2a_backend "none"); its prefill backend on CUDA is "breakable"
(cuda_graph_config.py:101), whose rules (server_args.py:3341) turn the graphs off for an MLA
backend (:3352), DeepSeek-V4 (:3356) and every multimodal model (:3374); the tc_piecewise
architecture list does not apply. GPUs in MiB as nvidia-smi shows them: H100 81,559 MiB, a
24 GB card 24,564 MiB.

sglang 0.5.16 srt/server_args.py ``_handle_gpu_memory_settings`` (:3900): the tiers, prefill
max_bs and capture sizes of 0.5.15; with mem_fraction_static unset and
``post_capture_kv_sizing_planned()`` False (:4055, :4105: it needs
SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, environ.py:337 ``EnvBool(False)``) the reserve is
``512 + max(chunk, 2048) × 1.5 + tp / 8 × 1024 + reserve_for_graph_mb()``, at least 10 GiB above
60 GiB, plus ``reserve_for_deepep_a2a_mb()`` (0 with moe_a2a_backend "none");
``reserve_for_graph_mb`` (:4164) is the decode graphs' ``max_bs × 2`` and, with the prefill
backend not disabled, ``8 × len(bs)`` or ``1.5 × 1024`` with an MLA backend: 0.5.15's sum.
The breakable rules (:3763) turn the prefill graphs off for an MLA backend, DeepSeek-V4 and a
multimodal model not in configs/model_config.py:1785 (Qwen3_5ForConditionalGeneration,
Qwen3_5MoeForConditionalGeneration). A plain ``python -m sglang.launch_server --model-path M
--tp N`` on CUDA: no disaggregation, no DP attention, no DeepEP, no LoRA, dcp_size 1.

0.5.17 (:4607) drops the --context-length clamp from this function (#21112's clamp now applies
at capture, model_executor/runner/prefill_cuda_graph_runner.py:779, after the fraction is
fixed); its breakable rules keep the graphs for DeepSeek sparse attention MLA models and turn
them off for Nemotron-H, both refused by mmcli's SGLang geometry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import DEFAULT_RELEASE, SglangOptions, plan_sglang, sglang_rules
from mmcli.kv.sglang.budget import PrefillGraphs, default_fraction

CONFIGS = Path(__file__).parent / "configs"
QWEN3_235B = CONFIGS / "Qwen--Qwen3-235B-A22B-FP8.json"
MiB = 2**20
H100 = 81_559 * MiB
CARD_24GB = 24_564 * MiB
VIT_L = {"num_hidden_layers": 24, "hidden_size": 1024}
#: The releases whose reserve is grouped as reserve_for_graph_mb().
RELEASES = ["0.5.16", "0.5.17"]


def fraction(release: str, gpu: int, tp: int, doc: dict[str, Any] | None = None, **graphs: Any):  # type: ignore[no-untyped-def]
    doc = doc or {}
    return default_fraction(
        sglang_rules(release),
        gpu,
        tp=tp,
        multimodal=graphs.get("multimodal", False),
        doc=doc,
        graphs=PrefillGraphs(**graphs),
    )


#: 0.5.16 and 0.5.17 add the same terms, grouped as reserve_for_graph_mb() (0.5.16
#: server_args.py:4164: decode max_bs × 2 + the prefill graphs' 8 MiB per count).
@pytest.mark.parametrize("release", ["0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17"])
@pytest.mark.parametrize(
    ("gpu", "tp", "expected"),
    [
        # H100 tp 1: chunk 8192, max_bs 256; 58 counts up to 8192: 512 + 12,288 + 512 + 128 +
        # 464 = 13,904 MiB; 67,655 / 81,559 = 0.8295.
        (H100, 1, 0.830),
        # tp 4: max_bs 512: 512 + 12,288 + 1,024 + 512 + 464 = 14,800; 66,759 / 81,559 = 0.8185.
        (H100, 4, 0.819),
        # 24 GB tp 1: chunk 2048, max_bs 24; 42 counts: 512 + 3,072 + 48 + 128 + 336 = 4,096;
        # 20,468 / 24,564 = 0.8333.
        (CARD_24GB, 1, 0.833),
        # tp 4: max_bs 80: 512 + 3,072 + 160 + 512 + 336 = 4,592; 19,972 / 24,564 = 0.8131.
        (CARD_24GB, 4, 0.813),
    ],
)
def test_dense_model_reserves_the_prefill_graphs(
    release: str, gpu: int, tp: int, expected: float
) -> None:
    assert fraction(release, gpu, tp).value == expected


def test_mla_keeps_1_5_gib_under_tc_piecewise() -> None:
    # 0.5.14 :3306: 1.5 × 1024 MiB with an MLA backend: H100 tp 1 14,976 MiB → 0.8164; tp 4
    # 15,872 → 0.8054; 24 GB tp 1 5,296 → 0.7844; tp 4 5,792 → 0.7642.
    got = [fraction("0.5.14", g, tp, mla=True).value for g in (H100, CARD_24GB) for tp in (1, 4)]
    assert got == [0.816, 0.805, 0.784, 0.764]


def test_mla_has_no_prefill_graphs_under_breakable() -> None:
    # 0.5.15 :3352: MLA turns the breakable prefill graphs off: H100 tp 1 512 + 12,288 + 512 +
    # 128 = 13,440 → 68,119 / 81,559 = 0.8352; tp 4 14,336 → 0.8242; 24 GB tp 1 3,760 →
    # 20,804 / 24,564 = 0.8469; tp 4 4,256 → 0.8267.
    got = [fraction("0.5.15", g, tp, mla=True).value for g in (H100, CARD_24GB) for tp in (1, 4)]
    assert got == [0.835, 0.824, 0.847, 0.827]
    assert "no piecewise graphs" in fraction("0.5.15", H100, 1, mla=True).why


@pytest.mark.parametrize(
    ("release", "arch", "before_vlm"),
    [
        # 0.5.14 model_config.py:1725: Cohere2Vision keeps the graphs: 13,904 MiB → 0.830.
        ("0.5.14", "Cohere2VisionForConditionalGeneration", 0.830),
        # Another multimodal model turns them off (:429): 13,440 MiB → 0.835.
        ("0.5.14", "Qwen2VLForConditionalGeneration", 0.835),
        # 0.5.15 :3374: breakable turns them off for every multimodal model.
        ("0.5.15", "Cohere2VisionForConditionalGeneration", 0.835),
    ],
)
def test_multimodal_models(release: str, arch: str, before_vlm: float) -> None:
    # adjust_mem_fraction_for_vlm with a 24 × 1024 ViT (ratio 1): × 0.95.
    doc = {"architectures": [arch], "vision_config": VIT_L}
    result = fraction(release, H100, 1, doc, multimodal=True)
    assert result.value == pytest.approx(before_vlm * 0.95)


def test_multimodal_on_a_24gb_card_tp_4() -> None:
    # 24 GB tp 4: with graphs 4,592 MiB → 0.813 (0.5.14 Cohere2Vision); without 4,256 → 0.827.
    doc = {"architectures": ["Cohere2VisionForConditionalGeneration"], "vision_config": VIT_L}
    kept = fraction("0.5.14", CARD_24GB, 4, doc, multimodal=True).value
    off = fraction("0.5.15", CARD_24GB, 4, doc, multimodal=True).value
    assert (kept, off) == (pytest.approx(0.813 * 0.95), pytest.approx(0.827 * 0.95))


def test_architecture_list_applies_to_tc_piecewise_only() -> None:
    # 0.5.14 model_config.py:1713 lists BailingMoeV2_5ForCausalLM: 13,440 MiB → 0.835; 0.5.15's
    # breakable rules do not read that list: 13,904 MiB → 0.830.
    doc = {"architectures": ["BailingMoeV2_5ForCausalLM"]}
    assert fraction("0.5.14", H100, 1, doc).value == 0.835
    assert fraction("0.5.15", H100, 1, doc).value == 0.830


@pytest.mark.parametrize("release", ["0.5.14", "0.5.15"])
def test_context_length_clamps_the_prefill_graphs(release: str) -> None:
    # 0.5.14 :3264 (0.5.15 :3611): max_bs capped at --context-length 2048: 42 counts, 336 MiB:
    # 13,776 MiB; 67,783 / 81,559 = 0.8311.
    assert fraction(release, H100, 1, context_length=2048).value == 0.831


# --- 0.5.16 and 0.5.17 -----------------------------------------------------------------------


@pytest.mark.parametrize("release", RELEASES)
def test_mla_has_no_prefill_graphs(release: str) -> None:
    # The MLA rule turns the graphs off: H100 tp 1 512 + 12,288 + 128 + 512 = 13,440 →
    # 68,119 / 81,559 = 0.8352; tp 4 14,336 → 0.8242; 24 GB tp 1 3,760 → 0.8469; tp 4 4,256 →
    # 0.8267.
    got = [fraction(release, g, tp, mla=True).value for g in (H100, CARD_24GB) for tp in (1, 4)]
    assert got == [0.835, 0.824, 0.847, 0.827]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    ("arch", "before_vlm"),
    [
        # model_config.py:1785 allowlists Qwen3.5's multimodal model: graphs on, 13,904 MiB.
        ("Qwen3_5ForConditionalGeneration", 0.830),
        ("Qwen3_5MoeForConditionalGeneration", 0.830),
        # Any other multimodal model: graphs off, 13,440 MiB (0.5.15's rule for all of them).
        ("Qwen2VLForConditionalGeneration", 0.835),
    ],
)
def test_multimodal_allowlist(release: str, arch: str, before_vlm: float) -> None:
    # adjust_mem_fraction_for_vlm with a 24 × 1024 ViT (ratio 1): × 0.95.
    doc = {"architectures": [arch], "vision_config": VIT_L}
    result = fraction(release, H100, 1, doc, multimodal=True)
    assert result.value == pytest.approx(before_vlm * 0.95)
    # 0.5.15 turned the graphs off for every multimodal model.
    assert fraction("0.5.15", H100, 1, doc, multimodal=True).value == pytest.approx(0.835 * 0.95)


def test_multimodal_allowlist_on_a_24gb_card_tp_4() -> None:
    # 24 GB tp 4: allowlisted, graphs on: 4,592 MiB → 0.813; another VLM 4,256 → 0.827.
    kept = {"architectures": ["Qwen3_5ForConditionalGeneration"], "vision_config": VIT_L}
    off = {"architectures": ["LlavaForConditionalGeneration"], "vision_config": VIT_L}
    got = [fraction("0.5.16", CARD_24GB, 4, d, multimodal=True).value for d in (kept, off)]
    assert got == [pytest.approx(0.813 * 0.95), pytest.approx(0.827 * 0.95)]


def test_context_length_clamp_is_gone_in_0517() -> None:
    # 0.5.16 :4044 caps max_bs at --context-length 2048: 42 counts, 336 MiB: 13,776 MiB;
    # 67,783 / 81,559 = 0.8311. 0.5.17 sizes the fraction from the chunk (58 counts): 0.830.
    assert fraction("0.5.16", H100, 1, context_length=2048).value == 0.831
    assert fraction("0.5.17", H100, 1, context_length=2048).value == 0.830


def test_plan_from_gpu_uses_the_default_release() -> None:
    # Qwen3-235B-A22B (MoE, not MLA) on an H100 at tp 4 with the default release (0.5.23, whose
    # dense reserve on an H100 is 0.5.17's: test_sglang_fraction_0518.py): 0.819 as above;
    # budget int(H100 × 0.819) − 16 GiB / 4.
    assert DEFAULT_RELEASE == "0.5.23"
    options = SglangOptions(tp=4, gpu_bytes=H100, gpu_name="H100", weights_bytes=16 * 2**30)
    result = plan_sglang(load_config(QWEN3_235B), read_document(QWEN3_235B), options)
    assert result.figures["budget_bytes"].value == int(H100 * 0.819) - 4 * 2**30
