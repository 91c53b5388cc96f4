"""The memory profiler's lines, as each vLLM release prints them, read by explain.

Wordings from the released sources (format strings; the figures put in them are those of the
published logs in tests/kv/gpu_logs/, see PROVENANCE.md, and the CUDA-graph estimate of
https://github.com/gpustack/runner/pull/251, "Estimated CUDA graph memory: 0.36 GiB total").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mmcli.kv.explain.profiler_lines import MemoryProfile, parse_profile_line
from mmcli.kv.explain.vllm_log import MAX_LINE, parse_vllm_log, read_vllm_log

LOGS = Path(__file__).parent / "gpu_logs"
CORE = "(EngineCore_DP0 pid=1) INFO 01-01 00:00:00 [gpu_model_runner.py:1] "


def read(*lines: str) -> MemoryProfile:
    profile = MemoryProfile()
    for line in lines:
        assert parse_profile_line(line, profile), line
    return profile


def test_model_loading_took_of_0_10():
    """vLLM 0.10.0 vllm/v1/worker/gpu_model_runner.py: "Model loading took %.4f GiB and
    %.6f seconds"."""
    got = read(CORE + "Model loading took 14.9888 GiB and 5.123456 seconds")
    assert (got.weights_gib, got.weights_line) == (14.9888, "Model loading took")


@pytest.mark.parametrize("figure", ["14.9888", "14.99"])
def test_model_loading_took_memory_of_later_releases(figure):
    """vLLM 0.11.1 gpu_model_runner.py: "Model loading took %.4f GiB memory and %.6f seconds";
    0.14.0 – 0.33.0 gpu_model_runner.py and 0.34.0 vllm/v1/worker/gpu/model_runner.py print
    it with format_gib (round(bytes / GiB, 2), vllm/utils/mem_utils.py): "took %s GiB memory"."""
    got = read(CORE + f"Model loading took {figure} GiB memory and 5.123456 seconds")
    assert got.weights_gib == float(figure)


def test_v1_profiling_result_before_0_27():
    """vLLM 0.10.0 vllm/utils/__init__.py and 0.11.1 – 0.26.0 vllm/utils/mem_utils.py,
    MemoryProfilingResult.__repr__, logged at DEBUG by gpu_worker.py (logger.debug(
    profile_result)); 0.14.0's 'Requested memory: %f (util), %s GiB' debug line."""
    got = read(
        CORE + "Memory profiling takes 17.59 seconds. Total non KV cache memory: 17.41GiB; "
        "torch peak memory increase: 2.07GiB; non-torch forward increase memory: 0.35GiB; "
        "weights memory: 14.99GiB.",
        CORE + "Initial free memory: 23.3 GiB; Requested memory: 0.900000 (util), 21.22 GiB",
    )
    assert got.profile_seconds == 17.59
    assert (got.non_kv_gib, got.activation_peak_gib, got.non_torch_gib) == (17.41, 2.07, 0.35)
    assert (got.utilization, got.usable_gib) == (0.9, 21.22)
    assert got.total_consumed_gib is None


def test_v1_profiling_result_from_0_27():
    """vLLM 0.27.0 – 0.34.0 vllm/utils/mem_utils.py: the repr's non-torch part became "total
    consumed (from mem_get_info): %sGiB"."""
    got = read(
        CORE + "Memory profiling takes 17.59 seconds. Total non KV cache memory: 17.41GiB; "
        "torch peak memory increase: 2.07GiB; total consumed (from mem_get_info): 15.34GiB; "
        "weights memory: 14.99GiB."
    )
    assert (got.total_consumed_gib, got.non_torch_gib) == (15.34, None)


def test_graph_lines():
    """vLLM 0.18.0 – 0.33.0 gpu_model_runner.py: "Estimated CUDA graph memory: %.2f GiB
    total"; 0.10.0 – 0.34.0: "Graph capturing finished in %.0f secs, took %.2f GiB"."""
    got = read(
        CORE + "Estimated CUDA graph memory: 0.36 GiB total",
        CORE + "Graph capturing finished in 12 secs, took 0.36 GiB",
    )
    assert (got.cudagraph_estimate_gib, got.graph_capture_gib) == (0.36, 0.36)
    assert got.graph_capture_seconds == 12


def test_memory_after_warmup_of_0_34():
    """vLLM 0.34.0 vllm/v1/worker/extensible_kv_cache.py: "Memory after warmup: %s GiB free, %s
    GiB committed to the KV cache, %s GiB kept for transient activations (...)"."""
    got = read(
        CORE + "Memory after warmup: 1.57 GiB free, 3.81 GiB committed to the KV cache, "
        "0.37 GiB kept for transient activations (0.37 GiB allocated at peak, 0.0 GiB of torch "
        "reservation growth); 1952 KV cache blocks (3.81 GiB) fit within the requested 3.81 "
        "GiB. Torch may reserve up to 21.22 GiB."
    )
    assert (got.warmup_free_gib, got.warmup_committed_gib, got.warmup_transient_gib) == (
        1.57,
        3.81,
        0.37,
    )


def test_v0_published_log_of_issue_10517():
    """https://github.com/vllm-project/vllm/issues/10517: V0's 'Loading model weights took
    14.9888 GB' and 'Memory profiling results: ... kv_cache_size=3.81GiB'."""
    log = read_vllm_log(LOGS / "v0-10517-20k.log")
    p = log.profile
    assert (p.weights_gib, p.weights_line) == (14.9888, "Loading model weights took")
    assert (p.total_gpu_gib, p.utilization, p.non_torch_gib) == (23.58, 0.9, 0.35)
    assert (p.peak_torch_gib, p.profiled_kv_gib) == (17.06, 3.81)
    assert p.activation_gib() == round(17.06 - 14.9888, 4)
    assert log.min_available_gib == 3.81


def test_v0_published_log_of_pr_14447():
    """https://github.com/vllm-project/vllm/pull/14447: the later V0 wording, three lines."""
    p = read_vllm_log(LOGS / "v0-14447-24g.log").profile
    assert (p.profile_seconds, p.total_gpu_gib, p.utilization, p.usable_gib) == (
        17.59,
        23.58,
        0.99,
        23.35,
    )
    assert (p.weights_gib, p.non_torch_gib, p.activation_peak_gib, p.profiled_kv_gib) == (
        21.21,
        0.2,
        0.37,
        1.57,
    )


def test_first_rank_wins_and_long_lines_are_skipped():
    text = "\n".join(
        [
            CORE + "Model loading took 14.99 GiB memory and 5.1 seconds",
            CORE + "Model loading took 21.21 GiB memory and 5.1 seconds",
            "x" * MAX_LINE + " Estimated CUDA graph memory: 0.36 GiB total",
            CORE + "Available KV cache memory: 3.81 GiB",
        ]
    )
    log = parse_vllm_log(text)
    assert log.profile.weights_gib == 14.99
    assert log.profile.cudagraph_estimate_gib is None


def test_lines_without_a_figure_give_nothing():
    profile = MemoryProfile()
    assert not parse_profile_line("Model loading took a while", profile)
    assert not parse_profile_line("Estimated CUDA graph memory: lots", profile)
    assert not profile.any()


SUMMARY_0_26 = (
    CORE.replace("gpu_model_runner.py:1", "gpu_worker.py:1")
    + "Free memory on device (14.66/15.99 GiB) on startup. Desired GPU memory utilization is "
    "(0.8, 12.79 GiB). Actual usage is 4.15 GiB for weight, 2.65 GiB for peak activation, "
    "0.02 GiB for non-torch memory, and 4.06 GiB for CUDAGraph memory. Replace "
    "gpu_memory_utilization config with `--kv-cache-memory=1893027942` to fit into requested "
    "memory, or `--kv-cache-memory=3276340428` to fully utilize gpu memory. Current kv cache "
    "memory in use is 5.97 GiB."
)
SUMMARY_0_27 = (
    CORE.replace("gpu_model_runner.py:1", "gpu_worker.py:1")
    + "Free memory on device (78.84/79.25 GiB) on startup. Desired GPU memory utilization is "
    "(0.92, 72.91 GiB). Actual usage is 15.26 GiB for consumed memory (weights + non-torch), "
    "1.44 GiB for peak activation, and 0.23 GiB for CUDAGraph memory. Replace "
    "gpu_memory_utilization config with `--kv-cache-memory=60000000000` (55.88 GiB) to fit "
    "into requested memory, or `--kv-cache-memory=66000000000` (61.47 GiB) to fully utilize "
    "gpu memory. Current kv cache memory in use is 56.21 GiB."
)


def test_the_summary_of_0_10_2_to_0_26():
    """vLLM 0.10.2 – 0.26.0 v1/worker/gpu_worker.py ``compile_or_warm_up_model``: "Free memory
    on device (%s/%s GiB) on startup. Desired GPU memory utilization is (%s, %s GiB). Actual
    usage is %s GiB for weight, %s GiB for peak activation, %s GiB for non-torch memory, and
    %s GiB for CUDAGraph memory." (INFO in 0.10.2 and 0.26, DEBUG in between); the figures of
    tests/kv/gpu_logs/v1-mm-rtx4080-qwen2vl2b.log (vLLM 0.10.2)."""
    got = read(SUMMARY_0_26)
    assert (got.total_gpu_gib, got.utilization, got.usable_gib) == (15.99, 0.8, 12.79)
    assert (got.weights_gib, got.weights_line) == (4.15, "Actual usage is")
    assert (got.summary_peak_gib, got.non_torch_gib, got.summary_graph_gib) == (2.65, 0.02, 4.06)
    # Before 0.27 the peak is the profile run's torch peak increase alone.
    assert got.summary_peak_has_graphs is False
    assert got.total_consumed_gib is None


def test_the_summary_from_0_27():
    """vLLM 0.27.0 – 0.34.0 gpu_worker.py: "Actual usage is %s GiB for consumed memory
    (weights + non-torch), %s GiB for peak activation, and %s GiB for CUDAGraph memory.",
    where ``peak_activation_memory`` = ``transient_peak_headroom`` + the CUDA-graph estimate
    taken off; the figures a published vLLM 0.31.0 start-up on an A100 80GB printed."""
    got = read(SUMMARY_0_27)
    assert (got.total_gpu_gib, got.utilization, got.usable_gib) == (79.25, 0.92, 72.91)
    assert (got.total_consumed_gib, got.summary_peak_gib, got.summary_graph_gib) == (
        15.26,
        1.44,
        0.23,
    )
    assert got.summary_peak_has_graphs is True
    assert got.weights_gib is None and got.non_torch_gib is None


def test_the_loading_line_keeps_the_weights_the_summary_repeats():
    got = read(CORE + "Model loading took 4.1512 GiB and 5.1 seconds", SUMMARY_0_26)
    assert (got.weights_gib, got.weights_line) == (4.1512, "Model loading took")


def test_the_older_startup_error_gives_the_total():
    """vLLM 0.10.0 v1/worker/gpu_worker.py ``init_device``: "Free memory on device (%s/%s GiB)
    on startup is less than desired GPU memory utilization (%s, %s GiB)."."""
    got = read(
        "ValueError: Free memory on device (10.2/79.19 GiB) on startup is less than desired "
        "GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce "
        "GPU memory used by other processes."
    )
    assert got.total_gpu_gib == 79.19
    assert got.utilization is None


@pytest.mark.parametrize(
    ("line", "flashinfer"),
    [
        # vLLM 0.10.1 – 0.11 v1/sample/ops/topk_topp_sampler.py (dennislee22/vLLM-benchmarking
        # logs, 0.10.1.1).
        (
            "INFO 09-04 01:02:57 [topk_topp_sampler.py:50] Using FlashInfer for top-p & top-k "
            "sampling.",
            True,
        ),
        (
            "WARNING 10-14 19:22:48 [topk_topp_sampler.py:66] FlashInfer is not available. Falling "
            "back to the PyTorch-native implementation of top-p & top-k sampling. For the best "
            "performance, please install FlashInfer.",
            False,
        ),
        # A wrapped line keeps its second half (the 0.10.1.1 Ray workers' log).
        (
            "s not available. Falling back to the PyTorch-native implementation of top-p & top-k "
            "sampling. For the best performance, please install FlashInfer.",
            False,
        ),
        # 0.21.0 and 0.23.0 – 0.34.0.
        (
            "INFO [topk_topp_sampler.py:70] FlashInfer top-p/top-k sampling disabled via "
            "VLLM_USE_FLASHINFER_SAMPLER=0; using PyTorch-native sampler.",
            False,
        ),
        (
            "WARNING [topk_topp_sampler.py:62] FlashInfer top-p/top-k sampling unavailable: "
            "unsupported compute capability 7.5; falling back. Set VLLM_USE_FLASHINFER_SAMPLER=0 "
            "to silence.",
            False,
        ),
    ],
)
def test_the_sampler_line(line: str, flashinfer: bool) -> None:
    profile = MemoryProfile()
    assert parse_profile_line(line, profile)
    assert profile.flashinfer_sampler is flashinfer


def test_a_line_about_sampling_params_is_no_sampler_line() -> None:
    profile = MemoryProfile()
    line = "Using default chat sampling params from model: {'temperature': 0.6, 'top_p': 0.9}"
    assert not parse_profile_line(line, profile)
    assert profile.flashinfer_sampler is None


def test_the_graph_pool_line_gives_the_estimate_and_the_real_capture():
    """vLLM 0.20.0 – 0.34.0 v1/worker/gpu_worker.py, once the graphs are captured where an
    estimate was taken off the KV memory: "CUDA graph pool memory: %s GiB (actual), %s GiB
    (estimated), difference: …". The published 0.30.0 T4 log
    (tests/kv/gpu_logs/v1-t4-qwen1p5b-030.log) prints it after two "Graph capturing
    finished" lines, the V2 runner's profiling capture (0.28 GiB) and the real one (0.15)."""
    log = read_vllm_log(LOGS / "v1-t4-qwen1p5b-030.log")
    got = log.profile
    assert got.cudagraph_estimate_gib == 0.34
    assert got.estimate_line == "CUDA graph pool memory (estimated)"
    assert (got.graph_capture_gib, got.graph_pool_gib) == (0.28, 0.15)
    # "Estimated CUDA graph memory" (V1's line), where printed, stays the estimate.
    line = CORE + "CUDA graph pool memory: 0.15 GiB (actual), 0.34 GiB (estimated), difference"
    first = read(CORE + "Estimated CUDA graph memory: 0.36 GiB total", line)
    assert (first.cudagraph_estimate_gib, first.estimate_line) == (0.36, None)


@pytest.mark.parametrize(
    ("line", "release"),
    [
        # The monochrome logo (tests/kv/gpu_logs/v1-t4-qwen1p5b-030.log, 0.30.0).
        ("(APIServer pid=670) INFO 10-01 22:40:55 [api_utils.py:347]  ▄▄ ▄█ █     █     "
         "█ ▀▄▀ █  version 0.30.0", "0.30.0"),
        # The coloured logo (the ANSI bold around the version; pasted with or without ESC).
        ("INFO [utils.py:299] \x1b[94m▄█\x1b[0m \x1b[1m█     █     █ ▀▄▀ █\x1b[0m  version "
         "\x1b[1m0.19.1\x1b[0m", "0.19.1"),
        ("INFO [utils.py:299] ▄▄ ▄█ █     █     █ ▀▄▀ █[0m  version [1m0.26.0[0m", "0.26.0"),
        # VLLM_DISABLE_LOG_LOGO or no formatter: the plain line.
        ("(APIServer pid=5) INFO 01-01 00:00:00 [startup.py:30] vLLM server version 0.34.0, "
         "serving model Qwen/Qwen3-8B", "0.34.0"),
    ],
)  # fmt: skip
def test_the_release_from_the_server_logo(line, release):
    """From vLLM 0.15 the API server logs its release in ``log_version_and_model``
    (entrypoints/utils.py 0.15.0; serve/utils/api_utils.py 0.26.0 – 0.33.0; common/startup.py
    0.34.0): a logo whose first line ends "▀▄▀ █  version X", or "vLLM server version X,
    serving model M"; the older "vLLM API server version X" is gone."""
    assert parse_vllm_log(line).release == release
