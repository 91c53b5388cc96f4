"""SGLang 0.5.16 and 0.5.17: the default ``mem_fraction_static`` with ``reserve_for_graph_mb``.

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
them off for Nemotron-H, both refused by mmcli's SGLang geometry. GPUs in MiB as nvidia-smi
shows them: H100 81,559 MiB, a 24 GB card 24,564 MiB.
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
RELEASES = ["0.5.16", "0.5.17"]


def fraction(release: str, gpu: int, tp: int, doc: dict[str, Any] | None = None, **graphs: Any):  # type: ignore[no-untyped-def]
    return default_fraction(
        sglang_rules(release),
        gpu,
        tp=tp,
        multimodal=graphs.get("multimodal", False),
        doc=doc or {},
        graphs=PrefillGraphs(**graphs),
    )


# The dense reserve of 0.5.16 / 0.5.17 is 0.5.14's sum, grouped as reserve_for_graph_mb()
# (server_args.py:4164): test_sglang_fraction_0514.py's dense test runs these releases too.


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


def test_multimodal_on_a_24gb_card_tp_4() -> None:
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
    # Qwen3-235B-A22B (MoE, not MLA) on an H100 at tp 4 with the default release: 0.819 as
    # above; budget int(H100 × 0.819) − 16 GiB / 4.
    assert DEFAULT_RELEASE == "0.5.17"
    options = SglangOptions(tp=4, gpu_bytes=H100, gpu_name="H100", weights_bytes=16 * 2**30)
    result = plan_sglang(load_config(QWEN3_235B), read_document(QWEN3_235B), options)
    assert result.figures["budget_bytes"].value == int(H100 * 0.819) - 4 * 2**30
