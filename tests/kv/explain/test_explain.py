"""``kv-share explain``'s library: real logs planned again, and logs generated from a plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.explain.report import explain_log
from mmcli.kv.explain.vllm_log import parse_vllm_log, startup_lines
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.inputs.layer_config import load_config
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import plan_kv_cache

ROOT = Path(__file__).resolve().parents[3]
LOGS = Path(__file__).resolve().parents[1] / "vllm_logs"  # sources: SOURCES in test_vllm_log.py
REALWORLD = Path(__file__).resolve().parents[1] / "realworld" / "configs"
GIB = 2**30


def hf(
    layers: int, heads: int, kv_heads: int, head_dim: int, max_len: int, **extra: Any
) -> ModelConfig:
    doc = {
        "model_type": "qwen3",
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_size": heads * head_dim,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": max_len,
        **extra,
    }
    return parse_hf_config(doc, default_name="test-model", where="test")


def read(name: str) -> str:
    return (LOGS / f"{name}.log").read_text(encoding="utf-8")


def statuses(result: Any) -> dict[str, str]:
    return {c.figure: c.status for c in result.comparisons}


def test_qwen3_14b_lmcache_1739_is_reproduced() -> None:
    # Qwen3-14B: 40 layers, 8 KV heads, head_dim 128 (its config.json).
    result = explain_log(hf(40, 40, 8, 128, 40960), parse_vllm_log(read("lmcache-1739")))
    assert result.matches
    assert statuses(result)["GPU KV cache size (tokens)"] == "match"
    assert statuses(result)["Maximum concurrency"] == "match"
    assert result.release_source == "default"
    assert any(n.startswith("release: the log does not name") for n in result.notes)
    assert "0.10" in result.matching_releases and "0.34" in result.matching_releases


def test_llama_8b_vllm_20707_blocks_tokens_and_concurrency() -> None:
    # Llama-3.1-8B: 32 layers, 8 KV heads, head 128 → 131,072 B per token.
    config = hf(32, 32, 8, 128, 131072)
    result = explain_log(config, parse_vllm_log(read("vllm-20707")), vllm_version="0.10")
    assert result.matches, result.comparisons
    assert statuses(result) == {
        "Available KV cache memory (per GPU)": "match",
        "GPU blocks": "match",
        "GPU KV cache size (tokens)": "match",
        "Maximum concurrency": "match",
    }
    assert result.rules == "vLLM 0.10 rules (those of 0.10.2)" and result.release_source == "option"


def test_qwen3_1_7b_vllm_33263_without_concurrency() -> None:
    # Qwen3-1.7B: 28 layers, 8 KV heads, head 128. The log has no length: the config's is used.
    config, log = hf(28, 16, 8, 128, 40960), parse_vllm_log(read("vllm-33263"))
    # The log names no release (January 2026): every release before 0.34 reproduces it, 0.34
    # (blocks of 64 by default) does not.
    assert not explain_log(config, log).matches
    result = explain_log(config, log, vllm_version="0.33")
    assert result.matches
    assert statuses(result)["Maximum concurrency"] == "not in log"
    assert result.assumed["max_model_len"] == "40960 (the config's)"


def test_qwen3_235b_tp4_vllm_21348_differs_by_rank_memory() -> None:
    # Qwen3-235B-A22B: 94 layers, 4 KV heads, head 128; the issue ran --tensor-parallel-size 4
    # (1 KV head per rank). The rank that printed 8.11 GiB is not the smallest: the tokens
    # logged are those of about 8.02 GiB.
    log = parse_vllm_log(read("vllm-21348"))
    log.args["tensor_parallel_size"] = 4  # from the command line
    result = explain_log(hf(94, 64, 4, 128, 40960), log)
    assert not result.matches
    assert statuses(result)["GPU KV cache size (tokens)"] == "differs"
    text = "\n".join(result.notes)
    assert "the log shows one rank's memory" in text
    assert "corresponds to about 8.02 GiB" in text
    assert "release rules: no mirrored release's rules reproduce" in text


def test_qwen36_club3090_612_uses_the_logged_options() -> None:
    config = load_config(REALWORLD / "Qwen--Qwen3.6-35B-A3B.text_config.RECONSTRUCTED.json")
    result = explain_log(config, parse_vllm_log(read("club3090-612")))
    assert result.release_source == "log" and result.rules.startswith("vLLM 0.24.0 rules")
    options = result.options
    assert (options.kv_dtype, options.max_num_batched_tokens, options.max_model_len) == (
        "fp8",
        8192,
        131072,
    )
    assert options.enable_prefix_caching is True
    assert "kv_cache_dtype" not in result.assumed
    assert [c.figure for c in result.comparisons][1:] == [
        "GPU KV cache size (tokens)",
        "Maximum concurrency",
    ]


# --- logs generated from a plan -----------------------------------------------------------

GEMMA3N = ROOT / "samples" / "kv" / "gemma3n-e2b-like.json"


def generated(config: ModelConfig, gib: float, release: str, length: int) -> str:
    options = PlanOptions(memory_bytes=round(gib * GIB), vllm_version=release, max_model_len=length)
    plan = plan_kv_cache(config, options)
    side = plan.with_sharing if plan.engine_side == "with_sharing" else plan.without_sharing
    assert side is not None and side.max_tokens is not None and side.max_concurrency is not None
    return "\n".join(
        startup_lines(
            release=release,
            model=config.name,
            available_gib=gib,
            kv_cache_tokens=side.max_tokens,
            max_model_len=length,
            max_concurrency=side.max_concurrency,
            args={"max_model_len": length},
        )
    )


@pytest.mark.parametrize("release", ["0.10.2", "0.19.0", "0.25.1", "0.34.0"])
def test_a_log_generated_from_the_plan_is_reproduced(release: str) -> None:
    config = load_config(GEMMA3N)
    result = explain_log(config, parse_vllm_log(generated(config, 3.0, release, 16384)))
    assert result.matches, result.comparisons
    assert result.release_source == "log"


def test_a_log_of_another_release_is_explained_by_its_rules() -> None:
    # Written under 0.10's rules (tokens = blocks // groups × block size) but claiming 0.34.
    config = load_config(GEMMA3N)
    text = generated(config, 3.0, "0.10", 16384).replace("version 0.10", "version 0.34.0")
    result = explain_log(config, parse_vllm_log(text))
    assert not result.matches
    assert "0.10" in result.matching_releases and "0.34" not in result.matching_releases
    assert any(
        n.startswith("release rules: the logged figures match the rules of vLLM 0.10")
        for n in result.notes
    )


def test_an_option_the_log_hides_is_found() -> None:
    # A sliding-window model planned with max_num_batched_tokens 2048 (vllm serve on a small
    # GPU); the log does not print it, and the default assumed is 8192.
    config = load_config(GEMMA3N)
    options = PlanOptions(
        memory_bytes=3 * GIB, vllm_version="0.34", max_model_len=16384, max_num_batched_tokens=2048
    )
    plan = plan_kv_cache(config, options)
    side = plan.with_sharing
    assert side is not None and side.max_tokens and side.max_concurrency
    text = "\n".join(
        startup_lines(
            release="0.34.0",
            model="gemma3n",
            available_gib=3.0,
            kv_cache_tokens=side.max_tokens,
            max_model_len=16384,
            max_concurrency=side.max_concurrency,
        )
    )
    result = explain_log(config, parse_vllm_log(text))
    assert result.assumed["max_num_batched_tokens"] == "8192"
    assert not result.matches  # 8192 changes the sliding layers' reserve at this length
    assert any("with max_num_batched_tokens=2048 the figures match" in n for n in result.notes)


def test_a_refusal_is_compared_with_the_plans_largest_length() -> None:
    config = hf(40, 40, 8, 128, 40960)
    # 1 GiB under 0.34 rules fits 6,464 tokens (see whatif/test_fit.py).
    text = (
        "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.34.0\n"
        "(EngineCore_DP0 pid=1) ValueError: To serve at least one request with the models's max "
        "seq len (40960), (6.25 GiB KV cache is needed, which is larger than the available KV "
        "cache memory (1.00 GiB). Based on the available memory, the estimated maximum model "
        "length is 6464. Try increasing `gpu_memory_utilization`."
    )
    result = explain_log(config, parse_vllm_log(text))
    rows = statuses(result)
    assert rows["engine start-up"] == "match"
    assert rows["largest max_model_len that fits"] == "match"
    assert result.matches


def test_a_log_without_memory_is_refused() -> None:
    log = parse_vllm_log(read("vllm-windows-build-4"))
    with pytest.raises(InputError, match="no 'Available KV cache memory'"):
        explain_log(hf(40, 40, 8, 128, 40960), log)


def test_a_pipeline_parallel_log_is_planned_per_stage() -> None:
    # 32 layers on 3 stages with 10 GiB each: vLLM 0.32/0.34's planner gives 14,894 blocks,
    # "GPU KV cache size: 238,304 tokens" and 29.09x for 8,192 tokens (the first stage's
    # memory is the one the log prints).
    config = hf(32, 32, 8, 128, 8192)
    args = {"max_model_len": 8192, "pipeline_parallel_size": 3, "max_num_batched_tokens": 2048}
    text = "\n".join(
        startup_lines(
            release="0.34.0",
            model=config.name,
            available_gib=10.0,
            kv_cache_tokens=238_304,
            max_model_len=8192,
            max_concurrency=29.09,
            args=args,
        )
    )
    result = explain_log(config, parse_vllm_log(text))
    assert result.matches, result.comparisons
    assert any("pipeline_parallel_size 3" in n for n in result.notes)
    # The same figures without the stages are not what one GPU would hold.
    single = text.replace("'pipeline_parallel_size': 3, ", "")
    assert "pipeline_parallel_size" not in single
    assert not explain_log(config, parse_vllm_log(single)).matches


def test_a_release_matches_only_when_no_row_differs() -> None:
    # The engine started and printed blocks the plan reproduces, but the plan says this
    # memory refuses a request: the start-up row differs, so the release does not match.
    from mmcli.kv.explain.compare import PlannedRange, agrees, compare
    from mmcli.kv.explain.vllm_log import VllmLog
    from mmcli.kv.result import SidePlan

    side = SidePlan(
        owners=2,
        num_groups=1,
        group_size=2,
        bytes_per_token=1024,
        bytes_per_block=16384,
        block_size=16,
        page_size_bytes=8192,
        num_blocks=100,
        max_tokens=1600,
        max_concurrency=0.5,
        largest_fitting_max_model_len=1600,
    )
    log = VllmLog(num_gpu_blocks=100, kv_cache_tokens=1600)
    figures = PlannedRange(side, side)
    rows = {row.figure: row.status for row in compare(log, figures, 1.0)}
    assert rows["GPU blocks"] == "match" and rows["engine start-up"] == "differs"
    assert not agrees(log, figures)
    started = PlannedRange(
        *(2 * [SidePlan(**{**vars(side), "largest_fitting_max_model_len": None})])
    )
    assert agrees(log, started)
