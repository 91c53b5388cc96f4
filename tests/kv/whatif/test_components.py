"""The ``--gpu`` estimate's named components, each checked by hand from its source."""

from __future__ import annotations

from mmcli.kv import PlanRequest, plan_run
from mmcli.kv.releases import first_release, rules_for
from mmcli.kv.whatif import components as c

GIB = 2**30

#: Meta-Llama-3-8B's config.json: hidden 4096, intermediate 14336, vocab 128256, 32 heads,
#: 8 KV heads, bfloat16.
LLAMA3_8B = {
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "torch_dtype": "bfloat16",
}


def test_activation_peak_by_hand() -> None:
    """Forward of T = 8192 tokens (profile_run, v1/worker/gpu_model_runner.py): 2·H + (q+2kv)
    ·head_dim + 3·I = 8192 + 6144 + 43008 = 57344 elements a token, × 2 bytes × 8192 =
    939,524,096. Sampler over 256 rows: 256 × 128256 × (2 + 2·4) + 8192 × 4096 × 2 =
    328,335,360 + 67,108,864 = 395,444,224. The peak is the larger."""
    geo = c.geometry(LLAMA3_8B)
    assert geo is not None
    peak = c.activation_peak(geo, 8192, 256)
    assert peak.inputs["forward_bytes"] == 939_524_096
    assert peak.inputs["sampler_bytes"] == 395_444_224
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
    """0.16 GiB on one GPU (https://github.com/vllm-project/vllm/pull/12126); 3.58 − 1.79 GiB
    more with tp 2 (https://github.com/vllm-project/vllm/pull/10511)."""
    assert c.non_torch(1).bytes == int(0.16 * GIB)
    assert c.non_torch(2).bytes == int(0.16 * GIB) + int(1.79 * GIB)


def test_capture_sizes() -> None:
    """config/vllm.py (0.20): [1, 2, 4] + range(8, 256, 8) + range(256, min(2·seqs, 512)+1,
    16): 3 + 31 + 17 = 51 sizes for max_num_seqs ≥ 256; 1, 2, 4, 8, 16 for max_num_seqs 8."""
    assert c.capture_sizes(1024) == c.capture_sizes(256) == 51
    assert c.capture_sizes(8) == 5


def test_graph_term_by_release_and_eager() -> None:
    """VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (envs.py): absent in 0.17, default "0" in
    0.18/0.19, "1" from 0.20; --enforce-eager captures no graph (cudagraph_mode NONE)."""
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
