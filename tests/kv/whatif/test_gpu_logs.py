"""The ``--gpu`` estimate held against published vLLM start-up logs (tests/kv/gpu_logs/).

Each ``<id>.log`` is a verbatim excerpt of a published log (its URL on the first line); its
``cases.json`` entry transcribes the figures. The first test reads the figures back from the
excerpt, so a transcription error fails. The second plans every case that can be planned through
the library and records today's relative error of the estimate against the logged "Available KV
cache memory" (V0: ``kv_cache_size`` / "the rest of the memory reserved for KV Cache").
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv import PlanRequest, plan_run
from mmcli.kv.releases import rules_for
from mmcli.kv.whatif.gpus import resolve_gpu

HERE = Path(__file__).resolve().parents[1] / "gpu_logs"
CASES: list[dict[str, Any]] = json.loads((HERE / "cases.json").read_text())["cases"]
GIB = 2**30

_FLOAT = r"(-?\d+(?:\.\d+)?)"
#: (case key, the patterns that print it): V0's profiling lines and the V1 lines.
_READERS: dict[str, tuple[str, ...]] = {
    "total_gib": (
        rf"total_gpu_memory={_FLOAT}GiB",
        rf"total_gpu_memory \({_FLOAT}GiB\)",
        # V1 from 0.10.2 (v1/worker/gpu_worker.py): "Free memory on device (free/total GiB)".
        rf"Free memory on device \({_FLOAT}/{_FLOAT} GiB\)",
    ),
    "gpu_memory_utilization": (
        rf"gpu_memory_utilization={_FLOAT}",
        rf"gpu_memory_utilization \({_FLOAT}\)",
        rf"'gpu_memory_utilization': {_FLOAT}",
        rf"--gpu-memory-utilization[= ]{_FLOAT}",
    ),
    "weights_gib": (
        rf"Loading model weights took {_FLOAT} GB",
        rf"Model loading took {_FLOAT} GiB",
        rf"model weights take {_FLOAT}GiB",
    ),
    "available_gib": (
        rf"kv_cache_size={_FLOAT}GiB",
        rf"reserved for KV Cache is {_FLOAT}GiB",
        rf"Available KV cache memory: {_FLOAT} GiB",
    ),
}
#: Settings a V1 log prints only sometimes: checked where the log prints them.
_PRINTED_IF_SET: dict[str, str] = {
    "max_model_len": r"Using max model len (\d+)",
    "max_num_batched_tokens": r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)",
}
#: What V1 uses when the non-default args leave it out: the release table's default
#: (vLLM 0.10.1 vllm/config/cache.py ``gpu_memory_utilization: float = 0.9``; 0.92 from 0.20).
_V1_DEFAULTS = {
    "gpu_memory_utilization": lambda release: rules_for(release).default_gpu_memory_utilization
}
#: ``vllm serve``'s batch defaults, max_num_batched_tokens → the max_num_seqs that goes with it
#: (vLLM 0.13.0 vllm/engine/arg_utils.py ``get_batch_defaults``, OPENAI_API_SERVER: 8192 and 1024
#: on a device queried at 70 GiB or more that is no A100, else 2048 and 256): a log that prints
#: the default budget and no max_num_seqs implies the max_num_seqs of the same branch.
_SERVE_BATCH_DEFAULTS: dict[int, int] = {8192: 1024, 2048: 256}
_BREAKDOWN: dict[str, str] = {
    "non_torch_gib": rf"non_torch_memory(?:=| takes ){_FLOAT}GiB",
    "peak_torch_gib": rf"peak_torch_memory={_FLOAT}GiB",
    "activation_peak_gib": rf"PyTorch activation peak memory takes {_FLOAT}GiB",
    "initial_memory_usage_gib": rf"initial_memory_usage={_FLOAT}GiB",
    # V1: what the CUDA graphs took once captured (after the KV cache was sized); the excerpt
    # may wrap the line before "secs".
    "graph_capture_gib": rf"Graph capturing finished in \d+\s+secs, took {_FLOAT} GiB",
    "cuda_graph_estimate_gib": rf"Estimated CUDA graph memory: {_FLOAT} GiB total",
}


#: V1's line for a multimodal model (vLLM 0.20.0 vllm/v1/worker/gpu_model_runner.py
#: ``profile_run``; the same words from 0.10): the encoder cache budget and the dummy batch
#: the vision (or video / audio) encoder is profiled with before the KV cache is sized.
_ENCODER = re.compile(
    r"Encoder cache will be initialized with a budget of (\d+) tokens, "
    r"and profiled with (\d+) (\w+) items of the maximum feature size"
)
#: V1's sampler line (vLLM 0.10.1 vllm/v1/sample/ops/topk_topp_sampler.py ``TopKTopPSampler``):
#: FlashInfer's sampler, or vLLM's own where FlashInfer is not installed (the line may wrap).
_SAMPLER = re.compile(r"(Using FlashInfer) for top-p|FlashInfer i\s*s not available")
#: The case keys the encoder line gives, in the order of its groups.
_ENCODER_KEYS = ("encoder_budget_tokens", "encoder_items", "encoder_modality")


def _read(text: str, patterns: tuple[str, ...] | str) -> float | None:
    for pattern in (patterns,) if isinstance(patterns, str) else patterns:
        found = re.search(pattern, text)
        if found:
            return float(found.group(found.lastindex or 1))
    return None


def _log(case: dict[str, Any]) -> str:
    return (HERE / case["log"]).read_text()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_each_excerpt_agrees_with_its_entry(case: dict[str, Any]) -> None:
    text = _log(case)
    assert text.splitlines()[0] == f"# source: {case['url']}" or text.startswith(
        f"# source: {case['url']} "
    )
    if re.fullmatch(r"\d+\.\d+\.\d+(?:\.\d+)?", case["release"]):
        assert case["release"] in text, "the release is quoted in the excerpt"
    for key, patterns in _READERS.items():
        if key == "total_gib" and case.get("total_from"):
            # V1 prints no total: the entry takes the GPU table's reading for the named GPU.
            assert _read(text, patterns) is None
            assert case[key] == round(resolve_gpu(case["total_from"]).total_gib, 2), key
        elif key in case.get("defaults", ()):
            assert _read(text, patterns) is None, key
            assert case[key] == _V1_DEFAULTS[key](_release(case)), key
        else:
            assert _read(text, patterns) == case[key], key
    for key, pattern in _PRINTED_IF_SET.items():
        found = re.search(pattern, text)
        if found:
            assert int(found.group(1)) == case[key], key
    for key, value in case["breakdown"].items():
        assert _read(text, _BREAKDOWN[key]) == value, key
    if "max_num_seqs" in case.get("implied", ()):
        # Neither setting is among the non-default args, the budget printed is serve's default.
        args = re.search(r"non-default args: (\{.*\})", text)
        assert args and "max_num_seqs" not in args.group(1)
        assert "max_num_batched_tokens" not in args.group(1)
        budget = re.search(_PRINTED_IF_SET["max_num_batched_tokens"], text)
        assert budget, "the default budget is printed"
        assert case["max_num_seqs"] == _SERVE_BATCH_DEFAULTS[int(budget.group(1))]
    lines = {found.groups() for found in _ENCODER.finditer(text)}
    assert len(lines) <= 1, "every rank prints the same encoder line"
    for found_line in lines:
        budget, items, modality = found_line
        assert (int(budget), int(items), modality) == tuple(case[k] for k in _ENCODER_KEYS)
    if not lines:
        assert not any(key in case for key in _ENCODER_KEYS), "no encoder line in the excerpt"
    samplers = {found.group(1) is not None for found in _SAMPLER.finditer(text)}
    assert len(samplers) <= 1, "every rank takes the same sampler"
    for flashinfer in samplers:
        assert case["flashinfer_sampler"] is flashinfer
    if not samplers:
        assert "flashinfer_sampler" not in case, "no sampler line in the excerpt"
    if case.get("config"):
        # A config file, or a model folder (config.json beside the processor files).
        config = HERE / "configs" / case["config"]
        assert config.is_file() or (config / "config.json").is_file()
    else:
        assert case.get("skip_reason"), "a case without a config says why it is not planned"


def _release(case: dict[str, Any]) -> str:
    """The release the log prints, as --vllm-version takes it (0.10.1.1 → 0.10.1)."""
    return ".".join(case["release"].split(".")[:3])


def _request(case: dict[str, Any]) -> PlanRequest:
    """The case as the user would plan it: the GPU by name where the entry takes its total from
    the GPU table (vLLM's batch defaults depend on the device's name: engine/arg_utils.py,
    0.10.1, no larger defaults on an A100), the release the log prints, the entry point (``vllm
    serve`` or the offline ``vllm.LLM``, whose batch defaults differ). "Model loading took"
    is one rank's share (v1/worker/gpu_model_runner.py ``load_model`` logs the worker's own
    ``model_memory_usage``), and --weights is the whole model's, which the estimate divides by
    tp · pp: the share times the ranks (an even split)."""
    ranks = (case["tp"] or 1) * (case["pp"] or 1)
    settings = {
        key: case[key]
        for key in ("max_model_len", "max_num_seqs", "max_num_batched_tokens")
        if case[key] is not None
    }
    return PlanRequest(
        HERE / "configs" / case["config"],
        gpu=case.get("total_from") or f"{case['total_gib']}GiB",
        weights=f"{case['weights_gib'] * ranks}GiB",
        gpu_memory_utilization=case["gpu_memory_utilization"],
        tensor_parallel_size=case["tp"] or 1,
        pipeline_parallel_size=case["pp"] or 1,
        vllm_version=_release(case),
        entry=case["entry"] or "serve",
        flashinfer_sampler=case.get("flashinfer_sampler"),
        **settings,
    )


def estimate_errors(*, upper_bounds: bool = False) -> dict[str, tuple[float, float, float]]:
    """{case id: (estimated GiB, logged GiB, relative error)} for every plannable case whose
    estimate is a figure (``upper_bounds``: those whose estimate is an upper bound instead,
    the unified-memory GPUs)."""
    errors = {}
    for case in CASES:
        if case.get("skip_reason"):
            continue
        estimate = plan_run(_request(case)).to_json()["memory_estimate"]
        assert estimate["estimate"] is True
        if estimate.get("upper_bound", False) != upper_bounds:
            continue
        got = estimate["kv_cache_bytes"] / GIB
        errors[case["id"]] = (got, case["available_gib"], got / case["available_gib"] - 1)
    return errors


def test_the_estimate_is_planned_for_every_case_that_has_a_config() -> None:
    errors = estimate_errors() | estimate_errors(upper_bounds=True)
    assert set(errors) == {c["id"] for c in CASES if not c.get("skip_reason")}
    assert errors, "at least one case is planned"


def test_a_unified_memory_gpu_gives_an_upper_bound_the_log_stays_under() -> None:
    """On the GB10 (DGX Spark) vLLM takes the free memory as the host's (vLLM 0.13.0
    vllm/utils/mem_utils.py ``MemorySnapshot.measure``: ``psutil.virtual_memory().available``
    for compute capability 12.1), so the host memory taken while it profiles — here a 50 s
    torch.compile ("torch.compile takes 50.20 s in total") — is counted as non-torch memory:
    the estimate says it is an upper bound, and every such logged figure is below it."""
    bounds = estimate_errors(upper_bounds=True)
    assert "v1-gb10-gptoss20b" in bounds
    for got, logged, _ in bounds.values():
        assert logged <= got


def test_a_release_before_the_mirrored_ones_is_refused_naming_it() -> None:
    """vllm#16570 prints vLLM 0.8.3 (the V0 engine): the --gpu estimate refuses it, naming the
    release; the V0 cases say so in their skip_reason."""
    case = next(c for c in CASES if c["id"] == "v0-16570-a100-40g")
    with pytest.raises(InputError, match=r"--vllm-version 0\.8\.3: .*V0 engine"):
        plan_run(
            PlanRequest(
                HERE / "configs" / "Qwen--Qwen2-7B-Instruct.printed.json",
                gpu=f"{case['total_gib']}GiB",
                weights=f"{case['weights_gib']}GiB",
                vllm_version=case["release"],
            )
        )
    for v0 in (c for c in CASES if c["engine"] == "V0"):
        assert v0["skip_reason"], v0["id"]


def test_the_estimate_meets_the_thresholds_of_the_issue() -> None:
    """Within ±5 % on at least 80 % of the planned cases and within ±10 % on all."""
    errors = estimate_errors()
    print(f"\n{'case':<24}estimate GiB  logged GiB  error")
    for name, (got, logged, err) in errors.items():
        print(f"{name:<24}{got:>12.2f}{logged:>12.2f}{err:>+8.1%}")
    sizes = [abs(e) for *_, e in errors.values()]
    print(f"median |error| {statistics.median(sizes):.1%}, worst {max(sizes):.1%}")
    within_5 = sum(s <= 0.05 for s in sizes)
    assert within_5 >= 0.8 * len(sizes)
    assert max(sizes) <= 0.10


def test_the_set_has_the_size_the_issue_asks() -> None:
    """At least 12 published logs are planned and judged by the thresholds above."""
    assert len(estimate_errors()) >= 12
