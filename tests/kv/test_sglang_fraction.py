"""SGLang 0.5.10 – 0.5.13: the default ``mem_fraction_static`` with the piecewise graphs' reserve.

sglang 0.5.10 srt/server_args.py ``_handle_gpu_memory_settings`` (:1141; the same function at
0.5.11 :1294 and 0.5.12 :1401): the tier's chunked_prefill_size and cuda_graph_max_bs (:1165 –
:1221), the piecewise graphs' max tokens = chunked_prefill_size, or 2048 with an MLA backend,
capped by --max-total-tokens (:1255 – :1267); their token counts from
``_generate_piecewise_cuda_graph_tokens`` (:1397: 4..32 step 4, 48..256 step 16, 288..512
step 32, 576..1024 step 64, 1280..4096 step 256, 4608.. step 512); then (:1281)
``reserved = 512 + max(chunk, 2048) × 1.5 + cuda_graph_max_bs × 2 + tp / 8 × 1024 + (8 ×
len(tokens), or 1.5 × 1024 with MLA; nothing with disable_piecewise_cuda_graph)``, at least
10 GiB above 60 GiB (:1314), ``round((gpu − reserved) / gpu, 3)``. GPUs in MiB as nvidia-smi
shows them: H100 81,559 MiB, a 24 GB card 24,564 MiB.

0.5.13 (the same function at :1444; tiers :1468 – :1526, reserve :1594 – :1625, the
fraction :1635) adds one step (:1579): the piecewise graphs' max tokens are clamped to
``self.context_length``, the --context-length argument, None unless given (:384; server_args
never assigns it): mmcli's --max-model-len; the model's own context length lives in
ModelConfig and does not enter. Its adjust_mem_fraction_for_vlm (:7774) is 0.5.12's
(:7595) line for line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import DEFAULT_RELEASE, SglangOptions, plan_sglang, sglang_rules
from mmcli.kv.sglang import RELEASES as RELEASES_READ
from mmcli.kv.sglang.budget import PrefillGraphs, default_fraction
from mmcli.kv.sglang.version_help import sglang_version_help

CONFIGS = Path(__file__).parent / "configs"
QWEN3_235B = CONFIGS / "Qwen--Qwen3-235B-A22B-FP8.json"
MiB = 2**20
H100 = 81_559 * MiB
CARD_24GB = 24_564 * MiB
RELEASES = (
    "0.5.10",
    "0.5.10.post1",
    "0.5.11",
    "0.5.12",
    "0.5.12.post1",
    "0.5.13",
    "0.5.13.post1",
)


def fraction(release: str, gpu: int, tp: int, doc: dict[str, Any] | None = None, **graphs: Any):  # type: ignore[no-untyped-def]
    rules = sglang_rules(release)
    return default_fraction(
        rules, gpu, tp=tp, multimodal=False, doc=doc or {}, graphs=PrefillGraphs(**graphs)
    )


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    ("gpu", "tp", "bs", "expected"),
    [
        # H100, tp 1: chunk 8192, bs 256 (:1203); 58 token counts up to 8192 (8 + 14 + 8 + 8 +
        # 12 + 8): 512 + 12,288 + 512 + 128 + 464 = 13,904 MiB; 67,655 / 81,559 = 0.8295.
        (H100, 1, 256, 0.830),
        # H100, tp 4: bs 512 (:1205): 512 + 12,288 + 1,024 + 512 + 464 = 14,800; 0.8185.
        (H100, 4, 512, 0.819),
        # 24 GB, tp 1: chunk 2048, bs 24 (:1183); 42 counts up to 2048 (8 + 14 + 8 + 8 + 4):
        # 512 + 3,072 + 48 + 128 + 336 = 4,096 MiB; 20,468 / 24,564 = 0.8333.
        (CARD_24GB, 1, 24, 0.833),
        # 24 GB, tp 4: bs 80 (:1185): 512 + 3,072 + 160 + 512 + 336 = 4,592; 0.8131.
        (CARD_24GB, 4, 80, 0.813),
    ],
)
def test_default_fraction_reserves_the_piecewise_graphs(
    release: str, gpu: int, tp: int, bs: int, expected: float
) -> None:
    result = fraction(release, gpu, tp)
    assert (result.value, result.cuda_graph_max_bs) == (expected, bs)


@pytest.mark.parametrize("release", ["0.5.10", "0.5.13"])
def test_mla_reserves_1_5_gib_for_the_piecewise_graphs(release: str) -> None:
    # 0.5.10 server_args.py:1311 (0.5.13 :1622): an MLA backend adds 1.5 × 1024 MiB whatever
    # the token counts: H100 tp 1: 512 + 12,288 + 512 + 128 + 1,536 = 14,976; 66,583 / 81,559
    # = 0.8164. tp 4: 512 + 12,288 + 1,024 + 512 + 1,536 = 15,872; 65,687 / 81,559 = 0.8054.
    # 24 GB tp 1: 512 + 3,072 + 48 + 128 + 1,536 = 5,296; 19,268 / 24,564 = 0.7844; tp 4:
    # 512 + 3,072 + 160 + 512 + 1,536 = 5,792; 18,772 / 24,564 = 0.7642.
    assert fraction(release, H100, 1, mla=True).value == 0.816
    assert fraction(release, H100, 4, mla=True).value == 0.805
    assert fraction(release, CARD_24GB, 1, mla=True).value == 0.784
    assert fraction(release, CARD_24GB, 4, mla=True).value == 0.764


def test_multimodal_0_5_13_reserves_no_piecewise_graphs_and_scales() -> None:
    # 0.5.13 server_args.py:1375: a multimodal model turns the piecewise graphs off, so the
    # reserve is 0.5.9's: H100 tp 1: 512 + 12,288 + 512 + 128 = 13,440 MiB → round(68,119 /
    # 81,559, 3) = 0.835; then adjust_mem_fraction_for_vlm (:7774) with a ViT of 24 layers ×
    # 1024 (ratio 1): × 0.95 = 0.79325.
    doc = {"vision_config": {"num_hidden_layers": 24, "hidden_size": 1024}}
    rules = sglang_rules("0.5.13")
    result = default_fraction(
        rules, H100, tp=1, multimodal=True, doc=doc, graphs=PrefillGraphs(multimodal=True)
    )
    assert result.value == pytest.approx(0.835 * 0.95)


def test_piecewise_disabled_architecture_reserves_none() -> None:
    # 0.5.10 configs/model_config.py:1352 piecewise_cuda_graph_disabled_model_archs (Qwen3-Next
    # among them) sets disable_piecewise_cuda_graph (server_args.py:1087): 13,440 MiB on an
    # H100 at tp 1; 68,119 / 81,559 = 0.8352, as 0.5.9's formula gives.
    doc = {"architectures": ["Qwen3NextForCausalLM"]}
    assert fraction("0.5.10", H100, 1, doc).value == 0.835
    assert fraction("0.5.9", H100, 1, doc).value == 0.835


def test_max_total_tokens_caps_the_piecewise_graphs() -> None:
    # 0.5.10 server_args.py:1262: min(max tokens, max_total_tokens) = 2048: 42 counts, 336 MiB:
    # 13,776 MiB; 67,783 / 81,559 = 0.8311.
    assert fraction("0.5.10", H100, 1, max_total_tokens=2048).value == 0.831


def test_llama_2_path_caps_the_piecewise_graphs_at_4096() -> None:
    # 0.5.10 server_args.py:1271: "llama-2" in the model path caps the max tokens at 4096:
    # 50 counts (8 + 14 + 8 + 8 + 12), 400 MiB; tp 4: 512 + 12,288 + 1,024 + 512 + 400 =
    # 14,736 MiB; 66,823 / 81,559 = 0.8193 (0.819 uncapped too: the phrase says which).
    capped = fraction("0.5.10", H100, 4, model_path="meta-llama/Llama-2-70b-hf")
    assert capped.value == 0.819
    assert "up to 4,096 tokens" in capped.why


def test_plan_from_gpu_uses_the_default_fraction() -> None:
    # Qwen3-235B-A22B (MoE, not MLA) on an H100 at tp 4 plans with 0.819 (as above).
    path = QWEN3_235B
    options = SglangOptions(
        release="0.5.10", tp=4, gpu_bytes=H100, gpu_name="H100", weights_bytes=16 * 2**30
    )
    result = plan_sglang(load_config(path), read_document(path), options)
    assert result.figures["budget_bytes"].value == int(H100 * 0.819) - 4 * 2**30


def test_moe_on_a_160_gib_gpu_is_refused() -> None:
    # 0.5.10 server_args.py:2727: with a flashinfer_trtllm / flashinfer_mxfp4 MoE runner (picked
    # on SM100 GPUs, :1650 – :2665) the piecewise graphs are off: not mirrored.
    with pytest.raises(InputError, match="0.5.10: the default mem_fraction_static of a mixture"):
        fraction("0.5.10", 180 * 1024 * MiB, 1, {"num_experts": 128})


def test_moe_on_a_160_gib_gpu_is_planned_from_0_5_13() -> None:
    # 0.5.13 removed that rule (0.5.12 server_args.py:3172 – :3185; no MoE runner check among
    # 0.5.13's disable_piecewise_cuda_graph settings, :1340 – :1411). A 180 GiB GPU (184,320
    # MiB; chunk 16,384 and bs 512, :1522 – :1526): token counts 8 + 14 + 8 + 8 + 12 up to
    # 4096 and 24 from 4608 to 16,384 step 512 (:1708) = 74, 8 MiB each: 512 + 24,576 +
    # 1,024 + 128 + 592 = 26,832 MiB; round((184,320 − 26,832) / 184,320, 3) = 0.854.
    gpu = 180 * 1024 * MiB
    result = fraction("0.5.13", gpu, 1, {"num_experts": 128})
    assert (result.value, result.chunked_prefill_size) == (0.854, 16384)


def test_version_help_is_formatted_from_the_rows() -> None:
    # The --sglang-version help names the oldest and newest rows, the default, and the newest
    # with sliding layers mirrored (0.5.15; 0.5.16 moves the pool sizing to
    # mem_cache/kv_cache_configurator.py, not mirrored). Every
    # row's default fraction is mirrored (0.5.18 – 0.5.23: test_sglang_fraction_0518.py), so
    # it names no release that needs --mem-fraction-static.
    text = sglang_version_help()
    assert f"{RELEASES_READ[0].release} to {RELEASES_READ[-1].release}" in text
    assert f"default {DEFAULT_RELEASE};" in text
    assert not [r.release for r in RELEASES_READ if r.fraction_rule == "unread"]
    assert "needs --mem-fraction-static" not in text


def test_0_5_13_clamps_the_piecewise_graphs_to_an_explicit_context_length() -> None:
    # 0.5.13 server_args.py:1579: min(max tokens, context_length) when --context-length (mmcli's
    # --max-model-len) is given: 2048 → 42 counts, 336 MiB: H100 tp 1: 13,776 MiB; 67,783 /
    # 81,559 = 0.8311. 0.5.12 has no such step: 58 counts, 0.830.
    assert fraction("0.5.13", H100, 1, context_length=2048).value == 0.831
    assert fraction("0.5.12", H100, 1, context_length=2048).value == 0.830
    assert fraction("0.5.13", H100, 1).value == 0.830


#: Gemma 3 27B's vision tower (tests/kv/realworld/configs/google--gemma-3-27b-it_config.json):
#: SigLIP, 27 layers × 1152.
GEMMA3_VIT = {"num_hidden_layers": 27, "hidden_size": 1152}


@pytest.mark.parametrize("release", [f"0.5.{n}" for n in range(5, 18)])
def test_vit_scaled_fraction_is_kept_through_0_5_17(release: str) -> None:
    # adjust_mem_fraction_for_vlm is line for line 0.5.4's in each release (server_args.py:3929
    # in 0.5.5, :4278 0.5.6, :4877 0.5.7, :5483 0.5.9, :6396 0.5.10, :7774 0.5.13, :6997
    # 0.5.14, :7954 0.5.16, :9083 0.5.17; 0.5.23 arg_groups/memory_hook.py:417), called on
    # the default fraction of a multimodal model (0.5.5 :829, 0.5.17 :4800; language_only
    # and PD decode off by default). Gemma 3's ViT: 27 × 1152² / (24 × 1024²) = 1.423828125;
    # factor max(0.8, min(1.05, 1 − 0.1 × 0.423828125)) = 0.9576171875; × 0.95 =
    # 0.909736328125 of the fraction the release computes without it.
    rules = sglang_rules(release)
    graphs = PrefillGraphs(multimodal=True)
    doc = {"vision_config": GEMMA3_VIT}
    scaled = default_fraction(rules, H100, tp=1, multimodal=True, doc=doc, graphs=graphs)
    plain = default_fraction(rules, H100, tp=1, multimodal=False, doc=doc, graphs=graphs)
    assert rules.vlm_rule == "vit-scaled"
    assert scaled.value == pytest.approx(plain.value * 0.909736328125)
    # On an H100 at tp 1 the graphs of a multimodal model are off, so every release reserves
    # 512 + 12,288 + 512 + 128 = 13,440 MiB → 0.835 (the 0.5.13 case above).
    assert plain.value == 0.835
