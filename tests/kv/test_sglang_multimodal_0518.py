"""SGLang: the scheduler's totals line of a plan whose context length is unknown, and the default
``mem_fraction_static`` of a multimodal model from 0.5.18 on.

The request pool's size needs ``context_len`` (0.5.17 mem_cache/kv_cache_configurator.py:1723
``int(token_capacity / context_len * 512)``), and ``max_running_requests`` is
``min(tokens // 2, max_num_reqs)``: a config with no context length leaves both unknown.

0.5.18 configs/model_config.py: ``is_multimodal`` (:452) is ``enable_multimodal and not
is_lm_only and (is_multimodal_model(architectures) or has_multimodal_subconfig)``, the list
``multimodal_model_archs`` at :1822 (0.5.19 :1886, 0.5.20 :2103, 0.5.21 :2199, 0.5.22 :2279,
0.5.23 :2391), the sub-config being get_hf_text_config's text_config / language_config / …
(utils/hf_transformers/common.py:400); an unset --enable-multimodal is False for Gemma 3,
Llama 4, Step3-VL and Inkling (:347 ``mm_disabled_models``; 0.5.23 :692). server_args.py
``_disable_breakable_cudagraph_if_incompatible`` (:4666; 0.5.19 – 0.5.23
arg_groups/cuda_graph_hook.py) turns the prefill graphs off for a multimodal model not on
``multimodal_breakable_cuda_graph_supported_model_archs`` (:1921); ``_handle_gpu_memory_settings``
(:4802) then sums the reserve without them (``reserve_for_graph_mb`` :5078) and, for a
multimodal model, calls ``adjust_mem_fraction_for_vlm`` (:4996, :9527) on the rounded
fraction: 0.95 × clamp(1 − 0.1 × (layers × hidden² / (24 × 1024²) − 1), 0.8, 1.05), nothing
without a vision_config. mem_cache/kv_cache_configurator.py:130 ``mm_runtime_reservation_gb``:
100 MiB (SGLANG_VLM_CACHE_SIZE_MB) off a multimodal model's budget.

H100 81,559 MiB as nvidia-smi shows it. Dense reserve at tp 1 (chunk 8192, decode max_bs 256):
512 + 12,288 + 512 + 128 = 13,440 MiB, + 58 prefill counts × 8 = 464 with the graphs on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang, sglang_rules
from mmcli.kv.sglang.budget import MM_RUNTIME_RESERVE_BYTES, PrefillGraphs, default_fraction
from mmcli.kv.sglang.multimodal import is_multimodal

REALWORLD = Path(__file__).parent / "realworld" / "configs"
QWEN3_VL = REALWORLD / "Qwen--Qwen3-VL-30B-A3B.nested-subset.json"
GEMMA3 = REALWORLD / "google--gemma-3-27b-it_config.json"
ALL = ["0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]
GiB = 2**30
MiB = 2**20
H100 = 81_559 * MiB


def test_unknown_context_leaves_max_running_requests_unknown() -> None:
    # Qwen3-VL-30B-A3B's subset names no max_position_embeddings: the figure is unknown, and
    # the log line says so rather than printing 0 (SGLang stops at start-up on a zero).
    options = SglangOptions(
        release="0.5.17", gpu_bytes=H100, gpu_name="H100", weights_bytes=60 * 2**30
    )
    result = plan_sglang(load_config(QWEN3_VL), read_document(QWEN3_VL), options)
    assert result.figures["max_running_requests"].value is None
    assert result.log_lines[-1].endswith("max_running_requests=?, context_len=?")


def _budget(path: Path, release: str, weights: int, **kw: Any) -> int:
    options = SglangOptions(
        release=release, gpu_bytes=H100, gpu_name="H100", weights_bytes=weights, **kw
    )
    value = plan_sglang(load_config(path), read_document(path), options).figures["budget_bytes"]
    assert isinstance(value.value, int)
    return value.value


@pytest.mark.parametrize("release", ALL)
def test_qwen3_vl_is_multimodal_by_its_architecture(release: str) -> None:
    # Qwen3VLMoeForConditionalGeneration is on the list (and the config has a text_config):
    # graphs off, 13,440 MiB → 68,119 / 81,559 = 0.8352 → 0.835; no vision_config in the subset,
    # so no ViT scaling; less 100 MiB.
    expected = int(H100 * 0.835) - 60 * GiB - 100 * MiB
    assert _budget(QWEN3_VL, release, 60 * GiB) == expected
    assert MM_RUNTIME_RESERVE_BYTES == 100 * MiB


@pytest.mark.parametrize("release", ALL)
def test_gemma3_is_served_text_only_by_default(release: str) -> None:
    # Gemma3ForConditionalGeneration: enable_multimodal False unless asked, so not multimodal:
    # graphs kept, 13,904 MiB → 67,655 / 81,559 = 0.8295 → 0.830, no scaling, no 100 MiB.
    assert _budget(GEMMA3, release, 54 * GiB) == int(H100 * 0.830) - 54 * GiB


#: SigLIP-So400m's tower (Gemma 3's vision_config): 27 layers, hidden 1152.
SIGLIP = {"num_hidden_layers": 27, "hidden_size": 1152}


@pytest.mark.parametrize("release", ALL)
@pytest.mark.parametrize(
    ("arch", "vision", "expected"),
    [
        # Off the allowlist: 0.835 × 0.95 × (1 − 0.1 × (27 × 1152² / (24 × 1024²) − 1)) =
        # 0.835 × 0.95 × 0.957617 = 0.759630.
        ("Qwen2_5_VLForConditionalGeneration", SIGLIP, 0.759630),
        # On the breakable allowlist (graphs kept): 0.830 × 0.95 (a ViT-L's ratio 1) = 0.7885.
        ("Qwen3_5ForConditionalGeneration", {}, 0.7885),
        ("InternS2MobiusForConditionalGeneration", {}, 0.7885),
    ],
)
def test_multimodal_fraction(
    release: str, arch: str, vision: dict[str, Any], expected: float
) -> None:
    doc = {"architectures": [arch], "vision_config": vision}
    rules = sglang_rules(release)
    multimodal = is_multimodal(doc, rules, from_gpu=True)
    assert multimodal
    value = default_fraction(
        rules,
        H100,
        tp=1,
        multimodal=multimodal,
        doc=doc,
        graphs=PrefillGraphs(multimodal=multimodal),
    ).value
    assert value == pytest.approx(expected, abs=5e-7)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"architectures": ["LlamaForCausalLM"]}, False),
        # A vision_config alone counts only under the transformers backend (:445).
        ({"architectures": ["Qwen3MoeForCausalLM"], "vision_config": {}}, False),
        ({"architectures": ["Mistral3ForConditionalGeneration"]}, True),
        ({"architectures": ["Llama4ForConditionalGeneration"], "text_config": {}}, False),
        # A text sub-config alone makes a model multimodal (has_multimodal_subconfig, :445).
        ({"architectures": ["SomeNewForCausalLM"], "text_config": {}}, True),
        # language_model_only (is_lm_only, :331) and a text-only MiMo-V2 (:361) are not.
        (
            {"architectures": ["Qwen3VLForConditionalGeneration"], "language_model_only": True},
            False,
        ),
        ({"architectures": ["MiMoV2ForCausalLM"]}, False),
    ],
)
def test_which_models_are_multimodal(doc: dict[str, Any], expected: bool) -> None:
    assert is_multimodal(doc, sglang_rules("0.5.23"), from_gpu=True) is expected
