"""SGLang 0.5.18 – 0.5.23: the default ``mem_fraction_static`` of a dense or MLA text model.

sglang 0.5.18 srt/server_args.py ``_handle_gpu_memory_settings`` (:4802): the tiers of 0.5.17
(chunk 2048 / 4096 / 8192 / 16384 below 35 / 60 / 160 GiB and above; decode max_bs 24 / 80,
32 / 160, 256 / 512 by tp < 4, 512 above 160 GiB); the prefill phase's max_bs is the chunk
(2048 with an MLA backend), capped by --max-total-tokens and a Llama-2 path, with no
--context-length clamp; with ``post_capture_kv_sizing_planned()`` False (environ.py:513
SGLANG_ENABLE_POST_CAPTURE_KV_SIZING ``EnvBool(False)``) the reserve is ``512 + max(chunk,
2048) × 1.5 + tp / 8 × 1024 + reserve_for_graph_mb()``, at least 10 GiB above 60 GiB, then
``round((gpu − reserved) / gpu, 3)``. ``reserve_for_graph_mb`` (:5078) is the decode graphs'
``max_bs × 2`` plus, with the prefill backend not disabled, ``8 × len(bs)`` (:5105) or
``1.5 × 1024`` with an MLA backend (:5108). The breakable rules (:4666) no longer list "MLA
attention (non-DSA)" (0.5.17 server_args.py:4452 did): an MLA model keeps the graphs, and their
1.5 GiB. The prefill token counts (:5186) are 0.5.13's steps.

0.5.19 moves the same function to srt/arg_groups/memory_hook.py (``handle_gpu_memory_settings``,
reserve :250 – :264, ``reserve_for_graph_mb`` :292, :321, :324; its new pp > 1 branch does not
apply at pp 1) and the breakable rules to arg_groups/cuda_graph_hook.py:262 (DeepSeek-V4,
context / decode context parallel, two-batch overlap, an a2a backend, multimodal models: none
of them a plain ``python -m sglang.launch_server --model-path M --tp N`` of a dense or MLA
text model). 0.5.20 (memory_hook.py:100 – :116) raises the < 35 GiB tier to chunk 4096 and
max_bs 48 if tp < 4 else 160; 0.5.21's memory_hook.py is 0.5.20's. 0.5.22 (:83, :183 – :188)
caps a default decode max_bs at --max-running-requests when one is given. 0.5.23 (:238) caps an
MLA model's prefill max_bs at min(8192, chunk), which leaves its 1.5 GiB reserve (:389) as is.

GPUs in MiB as nvidia-smi shows them: H100 81,559 MiB, a 24 GB card (A10) 24,564 MiB; the
180 GiB GPU (B200-class) is 184,320 MiB, as in test_sglang_fraction.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang, sglang_rules
from mmcli.kv.sglang.budget import PrefillGraphs, default_fraction

CONFIGS = Path(__file__).parent / "configs"
QWEN3_235B = CONFIGS / "Qwen--Qwen3-235B-A22B-FP8.json"
DEEPSEEK_V3 = CONFIGS / "deepseek-ai--DeepSeek-R1.as-DeepSeek-V3.json"
MiB = 2**20
H100 = 81_559 * MiB
CARD_24GB = 24_564 * MiB
GPU_180 = 184_320 * MiB
ALL = ["0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]
OLD_SMALL_TIER = ["0.5.18", "0.5.19"]
NEW_SMALL_TIER = ["0.5.20", "0.5.21", "0.5.22", "0.5.23"]


def fraction(release: str, gpu: int, tp: int, doc: dict[str, Any] | None = None, **kw: Any):  # type: ignore[no-untyped-def]
    running = kw.pop("max_running_requests", None)
    graph_bs = kw.pop("cuda_graph_max_bs", None)
    return default_fraction(
        sglang_rules(release),
        gpu,
        tp=tp,
        multimodal=kw.get("multimodal", False),
        doc=doc or {},
        graphs=PrefillGraphs(**kw),
        max_running_requests=running,
        cuda_graph_max_bs=graph_bs,
    )


@pytest.mark.parametrize("release", ALL)
@pytest.mark.parametrize(
    ("gpu", "tp", "expected"),
    [
        # H100 tp 1: chunk 8192, max_bs 256; 58 counts up to 8192 (8 + 14 + 8 + 8 + 12 up to
        # 4096, 8 from 4608 to 8192): 512 + 12,288 + 512 + 128 + 464 = 13,904 MiB;
        # 67,655 / 81,559 = 0.8295.
        (H100, 1, 0.830),
        # tp 4: max_bs 512: 512 + 12,288 + 1,024 + 512 + 464 = 14,800; 66,759 / 81,559 = 0.8185.
        (H100, 4, 0.819),
        # 180 GiB tp 1: chunk 16,384, max_bs 512; 50 + 24 = 74 counts, 592 MiB: 512 + 24,576 +
        # 1,024 + 128 + 592 = 26,832; 157,488 / 184,320 = 0.8544.
        (GPU_180, 1, 0.854),
        # tp 4: 512 + 24,576 + 1,024 + 512 + 592 = 27,216; 157,104 / 184,320 = 0.8523.
        (GPU_180, 4, 0.852),
    ],
)
def test_dense_model_above_35_gib(release: str, gpu: int, tp: int, expected: float) -> None:
    assert fraction(release, gpu, tp).value == expected


@pytest.mark.parametrize(
    ("releases", "tp", "expected"),
    [
        # 0.5.18 / 0.5.19: chunk 2048, max_bs 24; 42 counts: 512 + 3,072 + 48 + 128 + 336 =
        # 4,096; 20,468 / 24,564 = 0.8333.
        (OLD_SMALL_TIER, 1, 0.833),
        # tp 4: max_bs 80: 512 + 3,072 + 160 + 512 + 336 = 4,592; 19,972 / 24,564 = 0.8131.
        (OLD_SMALL_TIER, 4, 0.813),
        # 0.5.20 on (memory_hook.py:100): chunk 4096, max_bs 48; 50 counts up to 4096, 400 MiB:
        # 512 + 6,144 + 96 + 128 + 400 = 7,280; 17,284 / 24,564 = 0.7036.
        (NEW_SMALL_TIER, 1, 0.704),
        # tp 4: max_bs 160: 512 + 6,144 + 320 + 512 + 400 = 7,888; 16,676 / 24,564 = 0.6789.
        (NEW_SMALL_TIER, 4, 0.679),
    ],
)
def test_dense_model_on_a_24gb_card(releases: list[str], tp: int, expected: float) -> None:
    got = {r: fraction(r, CARD_24GB, tp) for r in releases}
    assert {r: f.value for r, f in got.items()} == dict.fromkeys(releases, expected)
    chunk = 2048 if releases is OLD_SMALL_TIER else 4096
    assert {f.chunked_prefill_size for f in got.values()} == {chunk}


@pytest.mark.parametrize(
    ("releases", "expected"),
    [
        # MLA keeps the breakable graphs: + 1,536 MiB. H100 tp 1 512 + 12,288 + 512 + 128 +
        # 1,536 = 14,976 → 66,583 / 81,559 = 0.8164; tp 4 15,872 → 0.8054; 24 GB tp 1 512 +
        # 3,072 + 48 + 128 + 1,536 = 5,296 → 19,268 / 24,564 = 0.7844; tp 4 5,792 → 0.7642.
        (OLD_SMALL_TIER, [0.816, 0.805, 0.784, 0.764]),
        # 0.5.20 on, 24 GB: tp 1 512 + 6,144 + 96 + 128 + 1,536 = 8,416 → 16,148 / 24,564 =
        # 0.6574; tp 4 512 + 6,144 + 320 + 512 + 1,536 = 9,024 → 15,540 / 24,564 = 0.6326.
        (NEW_SMALL_TIER, [0.816, 0.805, 0.657, 0.633]),
    ],
)
def test_mla_keeps_the_prefill_graphs(releases: list[str], expected: list[float]) -> None:
    for release in releases:
        got = [fraction(release, g, tp, mla=True).value for g in (H100, CARD_24GB) for tp in (1, 4)]
        assert got == expected, release
    # 0.5.17 turned them off for MLA (server_args.py:4452): H100 tp 1 13,440 MiB → 0.835.
    assert fraction("0.5.17", H100, 1, mla=True).value == 0.835


@pytest.mark.parametrize("release", ALL)
def test_mla_on_a_180_gib_gpu(release: str) -> None:
    # 512 + 24,576 + 1,024 + 128 + 1,536 = 27,776; 156,544 / 184,320 = 0.8493 (0.5.23's
    # min(8192, 16,384) MLA prefill max_bs changes no term).
    assert fraction(release, GPU_180, 1, mla=True).value == 0.849


@pytest.mark.parametrize(
    ("release", "kwargs", "graph_bs", "expected"),
    [
        # 0.5.22 memory_hook.py:183: max_bs 256 → 64: 512 + 12,288 + 128 + 128 + 464 = 13,520;
        # 68,039 / 81,559 = 0.8342.
        ("0.5.22", {"max_running_requests": 64}, 64, 0.834),
        ("0.5.23", {"max_running_requests": 64}, 64, 0.834),
        # A max_bs above --max-running-requests only: 300 leaves 256 as is.
        ("0.5.23", {"max_running_requests": 300}, 256, 0.830),
        # 0.5.21 has no cap: 13,904 MiB → 0.830.
        ("0.5.21", {"max_running_requests": 64}, 256, 0.830),
        # A --cuda-graph-max-bs given is not capped (decode_max_bs_is_default False, :83).
        ("0.5.22", {"max_running_requests": 64, "cuda_graph_max_bs": 256}, 256, 0.830),
    ],
)
def test_decode_graphs_capped_by_max_running_requests(
    release: str, kwargs: dict[str, int], graph_bs: int, expected: float
) -> None:
    result = fraction(release, H100, 1, **kwargs)
    assert (result.value, result.cuda_graph_max_bs) == (expected, graph_bs)


def test_cap_on_a_180_gib_gpu() -> None:
    # max_bs 512 → 128: 26,832 − 768 = 26,064; 158,256 / 184,320 = 0.8586.
    assert fraction("0.5.22", GPU_180, 1, max_running_requests=128).value == 0.859


def test_plan_caps_the_decode_graphs_with_max_running_requests() -> None:
    # Qwen3-235B-A22B (MoE, not MLA) on an H100 at tp 4 with --max-running-requests 64: max_bs
    # 512 → 64: 512 + 12,288 + 128 + 512 + 464 = 13,904 MiB → 0.830 (0.819 without);
    # budget int(H100 × 0.830) − 16 GiB / 4.
    options = SglangOptions(
        release="0.5.23",
        tp=4,
        gpu_bytes=H100,
        gpu_name="H100",
        weights_bytes=16 * 2**30,
        max_running_requests=64,
    )
    result = plan_sglang(load_config(QWEN3_235B), read_document(QWEN3_235B), options)
    assert result.figures["budget_bytes"].value == int(H100 * 0.830) - 4 * 2**30


@pytest.mark.parametrize(("release", "value"), [("0.5.17", 0.818), ("0.5.18", 0.799)])
def test_plan_of_an_mla_model(release: str, value: float) -> None:
    # DeepSeek-V3 (MLA) on an H100 at tp 8: chunk 8192, max_bs 512: 512 + 12,288 + 1,024 +
    # 1,024 = 14,848 MiB → 66,711 / 81,559 = 0.8180 in 0.5.17; + 1,536 in 0.5.18 = 16,384 →
    # 65,175 / 81,559 = 0.7991. Budget int(H100 × value) − 64 GiB / 8.
    options = SglangOptions(
        release=release, tp=8, gpu_bytes=H100, gpu_name="H100", weights_bytes=64 * 2**30
    )
    result = plan_sglang(load_config(DEEPSEEK_V3), read_document(DEEPSEEK_V3), options)
    assert result.figures["budget_bytes"].value == int(H100 * value) - 8 * 2**30


@pytest.mark.parametrize(
    "doc",
    [
        # 0.5.18 configs/model_config.py:1921: MuseGlimmer's multimodal form keeps the graphs.
        {"architectures": ["MuseGlimmerForConditionalGeneration"], "vision_config": {}},
        # 0.5.18 server_args.py:4431: MuseGlimmer's prefill max_bs defaults to 512.
        {"architectures": ["MuseGlimmerForCausalLM"]},
    ],
)
def test_models_whose_reserve_is_not_mirrored_are_refused(doc: dict[str, Any]) -> None:
    multimodal = "vision_config" in doc
    with pytest.raises(InputError, match=r"0\.5\.23: the default mem_fraction_static"):
        fraction("0.5.23", H100, 1, doc, multimodal=multimodal)
