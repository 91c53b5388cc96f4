"""The model runner a vLLM release starts a model on by default, and whether its CUDA-graph
estimate is taken off the KV memory. Facts from vLLM's released sources:

* envs.py: ``VLLM_USE_V2_MODEL_RUNNER`` absent in 0.11.0, default "0" in 0.12.0-0.21.0, unset
  (None: the config decides) from 0.22.0.
* config/vllm.py ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` and
  ``_is_default_v2_model_runner_model``: 0.22.0 {Qwen3ForCausalLM}, a generating model, listed,
  ``not is_moe and not is_quantized``; 0.23.0 adds LlamaForCausalLM, MistralForCausalLM; 0.24.0
  adds DeepseekV2ForCausalLM, Qwen2MoeForCausalLM, GraniteMoeForCausalLM and returns "listed"
  alone; 0.25.0 lists the three MoE architectures only and returns False for ``is_hybrid`` and
  ``is_attention_free``, else ``listed or not is_moe``; 0.26.0 adds InklingForCausalLM,
  InklingForConditionalGeneration, LongcatFlashNgramForCausalLM; 0.27.0
  KimiK3ForConditionalGeneration; 0.28.0 DeepseekV4ForCausalLM, and a hybrid model returns
  False only when it is not listed; 0.29.0 ``use_v2_model_runner`` is True unless ROCm lists
  the architecture for V1, Triton is missing or a feature is unsupported.
* 0.34.0: v1/worker/gpu_model_runner.py (the V1 runner) is gone from the wheel.
* v1/worker/gpu/model_runner.py ``profile_cudagraph_memory``: ``return 0`` in 0.22.0-0.28.0,
  ``_profile_cudagraph_memory(self)`` in 0.29.0-0.33.0, and 0 in 0.34.0 when
  ``cache_config.enable_extensible_kv_cache`` (on by default there).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hf_configs import LLAMA3_8B as LLAMA

from mmcli.kv import PlanRequest, plan_run
from mmcli.kv.releases import CHANGES, rules_for
from mmcli.kv.whatif.runner import default_runner, graph_term_subtracted, state_kind

QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "num_hidden_layers": 4}
#: A MoE that no release lists (Qwen3-30B-A3B: 128 experts).
QWEN3_MOE = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "num_experts": 128,
    "num_hidden_layers": 4,
}
#: A MoE listed from 0.24 (Qwen1.5-MoE-A2.7B: 60 experts).
QWEN2_MOE = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "model_type": "qwen2_moe",
    "num_experts": 60,
    "num_hidden_layers": 4,
}
#: A hybrid (Gated DeltaNet beside full attention every 4th layer) MoE, never listed.
QWEN3_NEXT = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "num_experts": 512,
    "full_attention_interval": 4,
    "num_hidden_layers": 8,
}
#: A dense hybrid (LFM2: short convolutions, attention at full_attn_idxs).
LFM2 = {
    "architectures": ["Lfm2ForCausalLM"],
    "model_type": "lfm2",
    "full_attn_idxs": [2, 5],
    "num_hidden_layers": 6,
}
MAMBA = {"architectures": ["MambaForCausalLM"], "model_type": "mamba", "num_hidden_layers": 4}

RULE_MATRIX: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    # name, config, runner under 0.21, 0.22, 0.23, 0.24, 0.25, 0.28, 0.29, 0.34
    ("dense Qwen3", QWEN3, ("v1", "v2", "v2", "v2", "v2", "v2", "v2", "v2")),
    ("dense Llama", LLAMA, ("v1", "v1", "v2", "v2", "v2", "v2", "v2", "v2")),
    ("unlisted MoE", QWEN3_MOE, ("v1", "v1", "v1", "v1", "v1", "v1", "v2", "v2")),
    ("listed MoE", QWEN2_MOE, ("v1", "v1", "v1", "v2", "v2", "v2", "v2", "v2")),
    ("hybrid MoE", QWEN3_NEXT, ("v1", "v1", "v1", "v1", "v1", "v1", "v2", "v2")),
    ("dense hybrid", LFM2, ("v1", "v1", "v1", "v1", "v1", "v1", "v2", "v2")),
    ("attention-free", MAMBA, ("v1", "v1", "v1", "v1", "v1", "v1", "v2", "v2")),
]
RELEASES = ("0.21", "0.22", "0.23", "0.24", "0.25", "0.28", "0.29", "0.34")


@pytest.mark.parametrize(("name", "doc", "expected"), RULE_MATRIX, ids=[r[0] for r in RULE_MATRIX])
def test_default_runner_by_release(name: str, doc: dict[str, Any], expected: tuple[str]) -> None:
    got = tuple(default_runner(doc, rules_for(r)) for r in RELEASES)
    assert got == expected, name


def test_state_kinds() -> None:
    assert state_kind(QWEN3_NEXT) == state_kind(LFM2) == "hybrid"
    assert state_kind(MAMBA) == "attention-free"
    assert state_kind(LLAMA) == ""


def test_0_22_a_quantized_listed_model_stays_on_v1_until_0_24() -> None:
    """0.22.0 config/vllm.py: ``not model_config.is_moe and not model_config.is_quantized``."""
    fp8 = QWEN3 | {"quantization_config": {"quant_method": "fp8"}}
    assert default_runner(fp8, rules_for("0.22")) == "v1"
    assert default_runner(fp8, rules_for("0.24")) == "v2"


def test_0_28_a_listed_hybrid_takes_v2() -> None:
    """0.28.0 config/vllm.py: a hybrid returns False only when not listed (0.25.0-0.27.0: every
    hybrid False). A hybrid layout under a listed architecture name shows the rule."""
    listed_hybrid = QWEN3_NEXT | {"architectures": ["Qwen2MoeForCausalLM"]}
    assert default_runner(listed_hybrid, rules_for("0.27")) == "v1"
    assert default_runner(listed_hybrid, rules_for("0.28")) == "v2"


def test_architecture_lists_by_row() -> None:
    """Each row's DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES, as config/vllm.py of that release."""
    lists = {
        s: set(ch["v2_runner_architectures"])
        for s, ch in CHANGES
        if "v2_runner_architectures" in ch
    }  # type: ignore[call-overload]
    moe = {"DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "Qwen2MoeForCausalLM"}
    dense = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"}
    new_26 = {"InklingForCausalLM", "InklingForConditionalGeneration"}
    new_26 |= {"LongcatFlashNgramForCausalLM"}
    assert lists == {
        "0.10": set(),
        "0.22": {"Qwen3ForCausalLM"},
        "0.23": dense,
        "0.24": dense | moe,
        "0.25": moe,
        "0.26": moe | new_26,
        "0.27": moe | new_26 | {"KimiK3ForConditionalGeneration"},
        "0.28": moe | new_26 | {"KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM"},
    }


def test_graph_term_by_runner_and_release() -> None:
    """V1 subtracts its estimate from 0.20 (gpu_worker.py); V2 returns 0 in 0.22-0.28, a real
    estimate 0.29-0.33, 0 under 0.34's extensible KV cache (the default)."""
    assert graph_term_subtracted("v1", rules_for("0.21"))
    assert graph_term_subtracted("v1", rules_for("0.28"))
    assert not graph_term_subtracted("v1", rules_for("0.19"))
    assert not graph_term_subtracted("v2", rules_for("0.22"))
    assert not graph_term_subtracted("v2", rules_for("0.28"))
    assert graph_term_subtracted("v2", rules_for("0.29"))
    assert graph_term_subtracted("v2", rules_for("0.33"))
    assert not graph_term_subtracted("v2", rules_for("0.34"))


def _graphs(tmp_path: Path, release: str) -> dict[str, Any]:
    path = tmp_path / "llama.json"
    path.write_text(json.dumps(LLAMA), encoding="utf-8")
    request = PlanRequest(str(path), gpu="H100", weights="16GiB", vllm_version=release)
    doc = plan_run(request).to_json()
    text = json.dumps(doc)
    assert "CUDA-graph estimate" in text
    found = [c for c in _components(doc) if c["name"].startswith("CUDA-graph estimate")]
    assert len(found) == 1
    return found[0]


def _components(doc: Any) -> list[dict[str, Any]]:
    if isinstance(doc, dict):
        if isinstance(doc.get("components"), list):
            return list(doc["components"])
        return [c for v in doc.values() for c in _components(v)]
    if isinstance(doc, list):
        return [c for v in doc for c in _components(v)]
    return []


def test_plan_names_the_runner_and_drops_v2_zero_term(tmp_path: Path) -> None:
    """Llama-3-8B on an H100 (default max_num_seqs 1024 → 51 capture sizes): V1 under 0.22
    subtracts the graphs, V2 under 0.23 subtracts 0, 0.29 subtracts them again."""
    v1 = _graphs(tmp_path, "0.22")
    assert v1["inputs"]["model_runner"] == "v1" and v1["bytes"] > 0
    assert v1["name"] == "CUDA-graph estimate, V1 runner"
    v2 = _graphs(tmp_path, "0.23")
    assert v2["inputs"]["model_runner"] == "v2" and v2["bytes"] == 0
    assert not v2["inputs"]["subtracted"]
    assert _graphs(tmp_path, "0.29")["bytes"] == v1["bytes"]
    assert _graphs(tmp_path, "0.34")["bytes"] == 0
