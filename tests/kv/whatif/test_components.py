"""The ``--gpu`` estimate's named components, each checked by hand from its source."""

from __future__ import annotations

import pytest
from hf_configs import LLAMA3_8B

from mmcli.errors import InputError
from mmcli.kv import PlanRequest, plan_run
from mmcli.kv.releases import CHANGES, first_release, rules_for
from mmcli.kv.whatif import components as c
from mmcli.kv.whatif.gpus import default_max_num_batched_tokens, default_max_num_seqs, resolve_gpu

GIB = 2**30
LLAMA31_8B = "tests/kv/gpu_logs/configs/meta-llama--Llama-3.1-8B-Instruct.subset.json"


#: Qwen2-7B-Instruct as transformers printed its config (tests/kv/gpu_logs/configs/).
QWEN2_7B = {
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "vocab_size": 152064,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "num_hidden_layers": 28,
    "torch_dtype": "bfloat16",
}


def test_activation_peak_by_hand() -> None:
    """Forward of T = 8192 tokens (profile_run, v1/worker/gpu_model_runner.py): 2·H + (q+2kv)
    ·head_dim + 3·I = 8192 + 6144 + 43008 = 57344 elements a token, × 2 bytes × 8192 =
    939,524,096. FlashInfer's sampler over 256 rows (:mod:`mmcli.kv.whatif.sampler`): 256 ×
    128256 × (2 + 3·4) + 8192 × 4096 × 2 = 459,669,504 + 67,108,864 = 526,778,368. The peak is
    the larger."""
    geo = c.geometry(LLAMA3_8B)
    assert geo is not None
    peak = c.activation_peak(geo, 8192, 256)
    assert peak.inputs["forward_bytes"] == 939_524_096
    assert peak.inputs["sampler_bytes"] == 526_778_368
    assert peak.bytes == 939_524_096
    assert peak.inputs["max_num_batched_tokens"] == 8192 and peak.source


def test_activation_peak_near_published_log() -> None:
    """``vllm serve meta-llama/Meta-Llama-3-8B`` on an H100 logged "PyTorch activation peak
    memory 1.26GiB" (https://github.com/vllm-project/vllm/pull/10511, then max_num_batched
    _tokens = max_model_len 8192). The formula counts the live tensors only (no allocator
    rounding or compile buffers): within 40 % below the logged figure, never above it."""
    geo = c.geometry(LLAMA3_8B)
    assert geo is not None
    peak = c.activation_peak(geo, 8192, 256).bytes
    logged = 1.26 * GIB
    assert 0.6 * logged <= peak <= logged


def test_non_torch_grows_with_tensor_parallelism() -> None:
    """memory_profiling (vLLM 0.10.1 vllm/utils/__init__.py): non_torch_increase is taken from
    the worker's snapshot before init_worker_distributed_environment (v1/worker/gpu_worker.py
    init_device), so NCCL and custom all-reduce buffers count with tp > 1. Published figures of
    that measurement: "non_torch_memory takes 0.16GiB" on one H100
    (https://github.com/vllm-project/vllm/pull/12126); "non_torch_memory=0.34GiB" on a tp 4
    worker of 0.8.3 (https://github.com/vllm-project/vllm/issues/16570)."""
    assert c.non_torch(1).bytes == int(0.16 * GIB)
    assert c.non_torch(2).bytes == c.non_torch(4).bytes == int(0.34 * GIB)


def test_sampler_peak_by_hand() -> None:
    """_dummy_sampler_run (vLLM 0.10.1 v1/worker/gpu_model_runner.py) over max_num_seqs rows:
    the model-dtype logits (2 bytes), their float32 cast (Sampler.forward, v1/sample/sampler.py),
    FlashInfer's top-k masked logits and their softmax (4 bytes each), beside the forward's
    hidden states. Qwen2-7B-Instruct (vocab 152,064, hidden 3,584), 256 rows, 2,048 tokens:
    256 × 152,064 × 14 + 2,048 × 3,584 × 2 = 544,997,376 + 14,680,064 = 559,677,440 bytes,
    above the forward's
    2,048 × (2·3,584 + 36·128 + 3·18,944) × 2 = 281,018,368."""
    geo = c.geometry(QWEN2_7B)
    assert geo is not None
    peak = c.activation_peak(geo, 2048, 256)
    assert peak.inputs["sampler_bytes"] == 559_677_440
    assert peak.inputs["forward_bytes"] == 281_018_368
    assert peak.bytes == 559_677_440


def test_a_sampler_peak_names_its_sampler() -> None:
    """Where the sampler sets the peak the plan says whose sampler it counted and why
    (:mod:`mmcli.kv.whatif.sampler`): with FlashInfer installed vLLM 0.11 takes FlashInfer's
    (v1/sample/ops/topk_topp_sampler.py ``forward_cuda``). An H100 takes serve's 1,024
    sequences (0.13.0 engine/arg_utils.py ``get_batch_defaults``)."""
    model = "tests/kv/gpu_logs/configs/Qwen--Qwen2-7B-Instruct.printed.json"
    request = PlanRequest(
        model, gpu="H100", weights="15GiB", vllm_version="0.11", flashinfer_sampler=True
    )
    estimate = plan_run(request).estimate
    assert estimate is not None
    peak = estimate.components[0]
    assert peak.inputs["sampler"] == "flashinfer"
    assert peak.inputs["sampler_bytes"] > peak.inputs["forward_bytes"]
    (note,) = [n for n in estimate.notes if "sampler's" in n]
    assert "FlashInfer's top-k / top-p, over 1,024 × 152,064 logits" in note
    assert "--no-flashinfer-sampler" in note
    # A forward that outweighs the sampler (8,192 tokens over 256 rows) gets no such note.
    forward = plan_run(
        PlanRequest(model, gpu="H100", weights="15GiB", max_num_seqs=8, max_model_len=8192)
    ).estimate
    assert forward is not None
    assert not [n for n in forward.notes if "sampler's" in n]


def test_batch_defaults_by_gpu_name() -> None:
    """vLLM 0.10.1 engine/arg_utils.py _set_default_args_v1: a device of at least 70 GiB that
    is not an A100 gets max_num_batched_tokens 8192 (serve) / 16384 (LLM class) and
    max_num_seqs 1024; others (any A100) 2048 / 8192 and 256. The name decides: an A100-80GB
    named keeps the small defaults, the same size given as bytes does not."""
    a100 = resolve_gpu("A100-80GB")
    assert default_max_num_seqs(a100) == 256
    assert default_max_num_batched_tokens(a100) == 2048
    assert default_max_num_batched_tokens(a100, entry="llm") == 8192
    assert default_max_num_seqs(a100.total_bytes) == 1024
    assert default_max_num_batched_tokens(resolve_gpu("H100"), entry="llm") == 16384


def test_a_release_before_the_mirrored_rows_is_refused() -> None:
    """The estimate mirrors V1 from the oldest release row; 0.9.2 is refused, naming it."""
    with pytest.raises(InputError, match=r"--vllm-version 0\.9\.2") as info:
        plan_run(
            PlanRequest(
                "samples/kv/qwen3-14b-like.json", gpu="H100", weights="16GiB", vllm_version="0.9.2"
            )
        )
    assert CHANGES[0][0] in info.value.message and info.value.hint


def test_capture_sizes() -> None:
    """config/vllm.py (0.20): [1, 2, 4] + range(8, 256, 8) + range(256, min(2·seqs, 512)+1,
    16): 3 + 31 + 17 = 51 sizes for max_num_seqs ≥ 256; 1, 2, 4, 8, 16 for max_num_seqs 8."""
    assert c.capture_sizes(1024) == c.capture_sizes(256) == 51
    assert c.capture_sizes(8) == 5


def test_graph_term_by_release_and_eager() -> None:
    """VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (envs.py): absent in 0.17, default "0" in
    0.18/0.19, "1" from 0.20; --enforce-eager captures no graph (cudagraph_mode NONE).
    Without the estimate the graphs are captured after the KV cache is sized and allocated
    (vLLM 0.10.1 v1/engine/core.py: determine_available_memory, then initialize_from_config,
    then compile_or_warm_up_model, which calls capture_model in v1/worker/gpu_worker.py), so
    they take nothing off "Available KV cache memory"."""
    assert not rules_for("0.19").cudagraph_estimate_subtracted
    assert rules_for("0.20").cudagraph_estimate_subtracted
    assert first_release("cudagraph_estimate_subtracted", True) == "0.20"
    on = c.cuda_graphs(256, subtracted=True, enforce_eager=False)
    assert on.bytes == 51 * c.GRAPH_BYTES
    assert c.cuda_graphs(256, subtracted=True, enforce_eager=True).bytes == 0
    assert c.cuda_graphs(256, subtracted=False, enforce_eager=False).bytes == 0


def test_kv_cache_memory_bytes_replaces_the_estimate() -> None:
    """vLLM 0.20 v1/worker/gpu_worker.py: with kv_cache_memory_bytes the profile is skipped and
    the size returned as given."""
    given = PlanRequest("samples/kv/qwen3-14b-like.json", kv_cache_memory_bytes=20 * GIB)
    assert plan_run(given).options.memory_bytes == 20 * GIB
    with_gpu = PlanRequest(
        "samples/kv/qwen3-14b-like.json", gpu="H100", weights="16GiB", kv_cache_memory_bytes=GIB
    )
    run = plan_run(with_gpu)
    assert run.options.memory_bytes == GIB
    assert run.estimate is not None and "--kv-cache-memory-bytes" in run.estimate.notes[0]


def test_runner_buffers_by_hand() -> None:
    """From vLLM 0.27 ``memory_profiling`` (utils/mem_utils.py) counts ``total_consumed``, the
    device's free memory at the worker's first snapshot less that after the profile, so the
    model runner's buffers allocated in between count against the KV cache (before 0.27 the
    KV memory left out what torch held beyond the weights before the profile). V1
    (v1/worker/gpu_model_runner.py ``inputs_embeds``): max_num_batched_tokens × hidden in the
    model dtype, 8192 × 4096 × 2 = 67,108,864. V2 (v1/worker/gpu/sample/penalties.py):
    ``output_bin_counts`` max_num_seqs × vocab int32 and ``prompt_bin_mask`` max_num_seqs ×
    ⌈vocab / 32⌉ int32, 1024 × (128,256 + 4,008) × 4 = 541,753,344; a multimodal model adds
    the encoder runner's inputs_embeds (v1/worker/gpu/mm/encoder_runner.py)."""
    geo = c.geometry(LLAMA3_8B)
    assert geo is not None
    assert c.runner_buffers(geo, 8192, 1024, "v1", False).bytes == 67_108_864
    v2 = c.runner_buffers(geo, 8192, 1024, "v2", False)
    assert v2.bytes == 541_753_344
    assert v2.inputs["penalty_state_bytes"] == 541_753_344
    assert c.runner_buffers(geo, 8192, 1024, "v2", True).bytes == 541_753_344 + 67_108_864
    assert not rules_for("0.26").runner_buffers_counted
    assert first_release("runner_buffers_counted", True) == "0.27"


def test_runner_buffers_taken_off_from_0_27() -> None:
    """The --gpu estimate takes the runner's buffers off from 0.27 (Llama 3 8B on an H100:
    serve's 8,192 tokens and 1,024 sequences, Model Runner V2 its default runner) and not in
    0.26, where the KV estimate is otherwise the same but for the release's own rows."""

    def components(release: str) -> dict[str, int]:
        request = PlanRequest(LLAMA31_8B, gpu="H100", weights="15GiB", vllm_version=release)
        estimate = plan_run(request).estimate
        assert estimate is not None
        return {part.name: part.bytes for part in estimate.components}

    assert "runner buffers" not in components("0.26")
    assert components("0.27")["runner buffers"] == 541_753_344
