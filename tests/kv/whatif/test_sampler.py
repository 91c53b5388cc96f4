"""Which top-k / top-p sampler vLLM's profile run takes, and the bytes it holds at its peak.

Facts from the released wheels' sources (``vllm/v1/sample/ops/topk_topp_sampler.py``,
``vllm/envs.py``, ``vllm/v1/attention/backends/flashinfer.py`` of each release named) and the
wheels' metadata (``Requires-Dist``)."""

from __future__ import annotations

import pytest

from mmcli.errors import InputError
from mmcli.kv.releases import rules_for
from mmcli.kv.whatif import gpu_table
from mmcli.kv.whatif.gpus import resolve_gpu
from mmcli.kv.whatif.sampler import sampler_bytes, sampler_path

GIB = 2**30


def _path(
    release: str, gpu: str, seqs: int = 1024, flashinfer: bool | None = None, runner: str = "v1"
) -> str:
    """The samplers run, in order, joined by " then "."""
    path = sampler_path(rules_for(release), resolve_gpu(gpu), seqs, flashinfer, runner)
    return " then ".join(path.names)


@pytest.mark.parametrize(
    ("release", "gpu", "seqs", "flashinfer", "expected"),
    [
        # 0.11.0: FlashInfer's sampler where ``import flashinfer.sampling`` works and the variable
        # is not 0; flashinfer-python is only the wheel's "flashinfer" extra (0.10.1.1 – 0.11.x;
        # 0.10.0 names none), so a plain ``pip install vllm`` sorts.
        ("0.11", "H100", 1024, None, "sort"),
        ("0.11", "H100", 1024, True, "flashinfer"),
        ("0.10.0", "A100-80GB", 256, False, "sort"),
        # 0.12.0: ``if envs.VLLM_USE_FLASHINFER_SAMPLER:`` with the variable unset (None):
        # "FlashInfer top-p/top-k sampling is available but disabled by default".
        ("0.12", "H100", 1024, None, "sort"),
        ("0.16", "H100", 1024, True, "flashinfer"),
        # 0.17.0: ``apply_top_k_top_p`` runs ``apply_top_k_top_p_triton`` for 8 rows or more.
        ("0.17", "H100", 1024, None, "triton"),
        ("0.20", "L4", 4, None, "sort"),
        # 0.21.0: the variable defaults to True; capability 7.5 – 12.1; and the V1 runner's
        # ``_dummy_sampler_run`` calls the sampler again with a per-request generator, which
        # ``forward_cuda`` hands to ``forward_native`` ("Also warm forward_native").
        ("0.21", "H100", 1024, None, "flashinfer then triton"),
        ("0.21", "T4", 256, None, "flashinfer then triton"),
        ("0.21", "V100-32GB", 256, None, "triton"),
        ("0.21", "H100", 1024, False, "triton"),
        # 0.24.0: FlashInferBackend.supports_compute_capability from 8.0 (Turing left out).
        ("0.24", "T4", 256, None, "triton"),
        ("0.33", "GB10", 256, None, "flashinfer then triton"),
        # ROCm: not CUDA, and the AITER sampler needs VLLM_ROCM_USE_AITER=1 (default off).
        ("0.33", "MI300X", 1024, None, "triton"),
        ("0.14", "MI300X", 1024, None, "sort"),
    ],
)
def test_the_sampler_each_release_takes(
    release: str, gpu: str, seqs: int, flashinfer: bool | None, expected: str
) -> None:
    assert _path(release, gpu, seqs, flashinfer) == expected


@pytest.mark.parametrize(("release", "gpu"), [("0.14", "V100-32GB"), ("0.24", "T4")])
def test_asking_for_flashinfer_where_it_cannot_run_is_the_engines_start_up_error(
    release: str, gpu: str
) -> None:
    """0.12.0 raises "FlashInfer does not support compute capability 7.0, unset
    VLLM_USE_FLASHINFER_SAMPLER=1"; 0.24.0 raises where the variable is set and the GPU is
    left out (``envs.is_set``)."""
    with pytest.raises(InputError, match=r"refuses to start: VLLM_USE_FLASHINFER_SAMPLER=1"):
        _path(release, gpu, flashinfer=True)


def test_few_sms_leave_flashinfer_out_from_the_release_that_checks_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """0.31.0 ``flashinfer_sampler_supported``: "top-k masking requires more than 16 SMs"."""
    monkeypatch.setitem(gpu_table.ARCH, "L4", ((8, 9), 16))
    assert _path("0.30", "L4", 256) == "flashinfer then triton"
    assert _path("0.31", "L4", 256) == "triton"


def test_a_gpu_given_by_its_size_is_assumed_to_run_flashinfer() -> None:
    path = sampler_path(rules_for("0.30"), resolve_gpu("24GiB"), 256)
    assert path.names[0] == "flashinfer"
    assert "not in the GPU table" in path.why


@pytest.mark.parametrize(
    ("release", "gpu", "flashinfer", "expected"),
    [
        # 0.22.0 – 0.25: InputBatch.make_dummy leaves the sampling states zeroed (greedy, no
        # top-k / top-p, no logprobs) and the sampler makes its float32 copy regardless.
        ("0.22", "H100", None, "greedy-fp32"),
        # 0.26.0 ``apply_sampling_params``: no float32 copy unless a row needs processing.
        ("0.26", "H100", None, "greedy"),
        ("0.31", "H100", None, "greedy"),
        # 0.33.0: a second call with ``SamplingParams.for_sampler_warmup()`` on every row
        # (temperature 0.9, top_p 0.9, top_k 50, penalties, logit bias, logprobs 5): the fused
        # FlashInfer sampler where supported, else top-k / top-p with Gumbel noise.
        ("0.33", "H100", None, "greedy then flashinfer"),
        ("0.34", "H100", False, "greedy then gumbel"),
        ("0.34", "MI300X", None, "greedy then gumbel"),
    ],
)
def test_the_v2_runners_profile_sampler(
    release: str, gpu: str, flashinfer: bool | None, expected: str
) -> None:
    """Model Runner V2's ``_dummy_sampler_run`` (v1/worker/gpu/model_runner.py)."""
    assert _path(release, gpu, 1024, flashinfer, "v2") == expected


@pytest.mark.parametrize(
    ("path", "seqs", "per_logit"),
    [
        # bf16 logits (2) + Sampler.forward's float32 copy (4) + FlashInfer's top-k masked
        # logits (4) and their softmax (4), flashinfer/sampling.py
        # ``top_k_top_p_sampling_from_logits`` (flashinfer-python 0.2.11 – 0.7.4).
        ("flashinfer", 1024, 14),
        ("greedy", 1024, 2),
        ("greedy-fp32", 1024, 6),
        # + sort's float32 values and int64 indices (12), torch's int64 source indices (8) and
        # cub's alternate buffers (4 + 8): SortStable.cu ``segmented_sort_pairs``.
        ("sort", 1024, 38),
        ("sort", 128, 38),
        # 2 – 127 rows: ``segmented_sort_pairs_by_full_sort``, two int2 buffers and a key copy.
        ("sort", 64, 50),
        ("sort", 1, 38),
    ],
)
def test_the_bytes_a_logit(path: str, seqs: int, per_logit: int) -> None:
    vocab = 151_936
    assert sampler_bytes(path, seqs, vocab, 2, 132) == seqs * vocab * per_logit


def test_the_triton_kernel_keeps_a_buffer_of_a_power_of_two_rows_up_to_the_sms() -> None:
    """``apply_top_k_top_p_triton`` (0.17.0): ``min(next_power_of_2(min(SMs, rows)), SMs)``
    float32 rows of the vocabulary, beside d + 12 bytes a logit."""
    vocab = 128_256
    base = 1024 * vocab * 14
    assert sampler_bytes("triton", 1024, vocab, 2, 132) == base + 132 * vocab * 4
    assert sampler_bytes("triton", 100, vocab, 2, 132) == 100 * vocab * 14 + 128 * vocab * 4
    assert sampler_bytes("triton", 1024, vocab, 2, 0) == base + 1024 * vocab * 4


def test_the_sorting_sampler_matches_published_h100_peaks() -> None:
    """vLLM 0.11.0's image on an H100 under ``vllm serve`` (1,024 sequences), the torch peak
    increase of the profile (llm-d/llm-d-benchmark
    ``config_explorer/empirical-vllm-memory-results.md`` @87ab01b): Qwen3-0.6B 5.56 GiB,
    Llama-3.1-8B 4.76 GiB, gpt-oss 7.38 GiB, the same whatever the model's size, so the
    sampler's. The sort's 38 bytes a logit give each within 3 %."""
    for vocab, measured in ((151_936, 5.56), (128_256, 4.76), (201_088, 7.38)):
        got = sampler_bytes("sort", 1024, vocab, 2, 132) / GIB
        assert got == pytest.approx(measured, rel=0.03)
