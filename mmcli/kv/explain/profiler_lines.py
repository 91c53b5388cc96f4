"""Read vLLM's memory-profiler lines: what the start-up measured before sizing the KV cache.

The wordings read, each release's own (the tests cite file and release):

* the weights: "Model loading took X GiB [memory] and N seconds" (V1), V0's "Loading model
  weights took X GB";
* V0's "Memory profiling results: total_gpu_memory=…GiB … kv_cache_size=…GiB
  gpu_memory_utilization=…", and its later "the current vLLM instance can use total_gpu_memory
  (X GiB) x gpu_memory_utilization (U) = …" with "model weights take …; non_torch_memory takes
  …; PyTorch activation peak memory takes …; the rest of the memory reserved for KV Cache is …";
* V1's profiling result (at DEBUG): "Memory profiling takes N seconds. Total non KV cache
  memory: …; torch peak memory increase: …; non-torch forward increase memory: …" (or, later,
  "total consumed (from mem_get_info): …"), and "Requested memory: U (util), X GiB";
* the sampler: "Using FlashInfer for top-p & top-k sampling", or vLLM's own: "… Falling back to
  the PyTorch-native implementation of top-p & top-k sampling …" (0.10 – 0.11), "FlashInfer
  top-p/top-k sampling disabled via VLLM_USE_FLASHINFER_SAMPLER=0", "… not supported on compute
  capability …" (0.21), "FlashInfer top-p/top-k sampling unavailable: …" (0.23 – 0.34);
* the encoder profile's dummy batch, "Encoder cache will be initialized with a budget of N
  tokens, and profiled with K <modality> items of the maximum feature size." (V1, 0.10.0 –
  0.34.0), or "Skipping memory profiling for multimodal encoder and encoder cache.";
* "Estimated CUDA graph memory: X GiB total", "Graph capturing finished in N secs, took X GiB",
  "CUDA graph pool memory: A GiB (actual), E GiB (estimated), …" (0.20 – 0.34, once the graphs
  are captured, where an estimate was taken off the KV memory), and the extensible KV cache's
  "Memory after warmup: X GiB free, X GiB committed to the KV cache, X GiB kept for transient
  activations";
* V1's summary after the graphs are captured (v1/worker/gpu_worker.py, INFO in 0.10.2 and from
  0.26, DEBUG in between): "Free memory on device (F/T GiB) on startup. Desired GPU memory
  utilization is (U, R GiB). Actual usage is W GiB for weight, P GiB for peak activation, N GiB
  for non-torch memory, and G GiB for CUDAGraph memory." (0.10.2 – 0.26), or from 0.27 "Actual
  usage is C GiB for consumed memory (weights + non-torch), P GiB for peak activation, and G GiB
  for CUDAGraph memory.", where P holds the CUDA-graph estimate taken off the KV memory too
  (``peak_activation_memory`` = the transient peak + the estimate) and G is what the captured
  graphs took.

Every pattern is bounded, without nested or unbounded repeats.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Final

from mmcli.kv.explain.log_figures import FLOAT

_WEIGHTS = re.compile(rf"Model loading took {FLOAT} ?GiB")
_V0_WEIGHTS = re.compile(rf"Loading model weights took {FLOAT} ?GB")
_TAKES = re.compile(rf"Memory profiling takes {FLOAT} seconds")
_V1_NON_KV = re.compile(rf"Total non KV cache memory: {FLOAT} ?GiB")
_V1_PEAK = re.compile(rf"torch peak memory increase: {FLOAT} ?GiB")
_V1_NON_TORCH = re.compile(rf"non-torch forward increase memory: {FLOAT} ?GiB")
_V1_CONSUMED = re.compile(rf"total consumed \(from mem_get_info\): {FLOAT} ?GiB")
_V1_REQUESTED = re.compile(rf"Requested memory: {FLOAT} \(util\), {FLOAT} ?GiB")
_V0_USABLE = re.compile(
    rf"total_gpu_memory \({FLOAT} ?GiB\) x gpu_memory_utilization \({FLOAT}\) = {FLOAT} ?GiB"
)
_V0_PARTS = re.compile(
    rf"model weights take {FLOAT} ?GiB; non_torch_memory takes {FLOAT} ?GiB; PyTorch activation "
    rf"peak memory takes {FLOAT} ?GiB; the rest of the memory reserved for KV Cache is {FLOAT} ?GiB"
)
_V0_RESULTS = "Memory profiling results:"
_V0_ITEM = re.compile(rf"\b(\w{{1,40}})={FLOAT}(?:GiB)?\b")
_GRAPH_ESTIMATE = re.compile(rf"Estimated CUDA graph memory: {FLOAT} ?GiB total")
_GRAPH_TOOK = re.compile(rf"Graph capturing finished in {FLOAT} secs, took {FLOAT} ?GiB")
_GRAPH_POOL = re.compile(
    rf"CUDA graph pool memory: {FLOAT} ?GiB \(actual\), {FLOAT} ?GiB \(estimated\)"
)
_ENCODER = re.compile(
    r"Encoder cache will be initialized with a budget of (\d{1,12}) tokens, and profiled with "
    r"(\d{1,9}) (\w{1,20}) items"
)
_ENCODER_SKIPPED = "Skipping memory profiling for multimodal encoder"
_FREE = re.compile(rf"Free memory on device \({FLOAT}/{FLOAT} ?GiB\) on startup")
_DESIRED = re.compile(rf"Desired GPU memory utilization is \({FLOAT}, {FLOAT} ?GiB\)")
_ACTUAL_WEIGHT = re.compile(
    rf"Actual usage is {FLOAT} ?GiB for weight, {FLOAT} ?GiB for peak activation, {FLOAT} ?GiB "
    rf"for non-torch memory, and {FLOAT} ?GiB for CUDAGraph memory"
)
_ACTUAL_CONSUMED = re.compile(
    rf"Actual usage is {FLOAT} ?GiB for consumed memory \(weights \+ non-torch\), {FLOAT} ?GiB "
    rf"for peak activation, and {FLOAT} ?GiB for CUDAGraph memory"
)
#: The sampler's lines (v1/sample/ops/topk_topp_sampler.py): FlashInfer's, or vLLM's own where
#: FlashInfer is missing, not enabled (0.10 – 0.11), turned off, or unsupported (0.21 – 0.34).
_FLASHINFER_SAMPLER: Final = "Using FlashInfer for top-p & top-k sampling"
_OWN_SAMPLER: Final = (
    "Falling back to the PyTorch-native implementation of top-p & top-k sampling",
    "FlashInfer top-p/top-k sampling disabled via VLLM_USE_FLASHINFER_SAMPLER=0",
    "FlashInfer top-p/top-k sampling not supported on compute capability",
    "FlashInfer top-p/top-k sampling unavailable:",
)
_WARMUP = re.compile(
    rf"Memory after warmup: {FLOAT} GiB free, {FLOAT} GiB committed to the KV cache, "
    rf"{FLOAT} GiB kept for transient activations"
)


@dataclass
class MemoryProfile:
    """The profiler's figures a log printed, in GiB (None: not printed)."""

    weights_gib: float | None = None
    #: The line the weights came from ("Model loading took" or V0's "Loading model weights").
    weights_line: str | None = None
    profile_seconds: float | None = None
    total_gpu_gib: float | None = None
    utilization: float | None = None
    usable_gib: float | None = None
    non_kv_gib: float | None = None
    #: The profile run's torch peak above the weights (V0: "PyTorch activation peak").
    activation_peak_gib: float | None = None
    #: V0's absolute torch peak (weights included), "peak_torch_memory=".
    peak_torch_gib: float | None = None
    non_torch_gib: float | None = None
    total_consumed_gib: float | None = None
    #: What the profiler itself left for the KV cache (V0's lines).
    profiled_kv_gib: float | None = None
    cudagraph_estimate_gib: float | None = None
    graph_capture_gib: float | None = None
    #: The real capture's pool ("CUDA graph pool memory: A GiB (actual)"): a V2 runner's
    #: profiling capture logs "Graph capturing finished" before the real one.
    graph_pool_gib: float | None = None
    #: The line that gave the CUDA-graph estimate, where not "Estimated CUDA graph memory".
    estimate_line: str | None = None
    graph_capture_seconds: float | None = None
    #: The summary's "P GiB for peak activation" as printed (from 0.27 it holds the CUDA-graph
    #: estimate too: :attr:`summary_peak_has_graphs`) and "G GiB for CUDAGraph memory".
    summary_peak_gib: float | None = None
    summary_peak_has_graphs: bool | None = None
    summary_graph_gib: float | None = None
    warmup_free_gib: float | None = None
    warmup_committed_gib: float | None = None
    warmup_transient_gib: float | None = None
    #: The encoder profile's dummy batch: its budget in tokens, items and modality.
    encoder_budget_tokens: int | None = None
    encoder_items: int | None = None
    encoder_modality: str | None = None
    #: The profile run left the multimodal encoder out (``--skip-mm-profiling``).
    encoder_skipped: bool | None = None
    #: The sampler line: FlashInfer's top-k / top-p (True) or vLLM's own (False).
    flashinfer_sampler: bool | None = None

    def any(self) -> bool:
        return any(v is not None for v in asdict(self).values())

    def activation_gib(self) -> float | None:
        """The activation peak, measured or (V0's absolute peak) the peak less the weights."""
        if self.activation_peak_gib is not None:
            return self.activation_peak_gib
        if self.peak_torch_gib is not None and self.weights_gib is not None:
            return round(self.peak_torch_gib - self.weights_gib, 4)
        return None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


#: V0's "Memory profiling results:" keys, to the field each fills.
_V0_KEYS: Final = {
    "total_gpu_memory": "total_gpu_gib",
    "peak_torch_memory": "peak_torch_gib",
    "non_torch_memory": "non_torch_gib",
    "kv_cache_size": "profiled_kv_gib",
    "gpu_memory_utilization": "utilization",
}


def _first(profile: MemoryProfile, name: str, value: str) -> None:
    """Set a field once: the first rank's report wins."""
    if getattr(profile, name) is None:
        setattr(profile, name, float(value))


def parse_profile_line(line: str, profile: MemoryProfile) -> bool:
    """Read one (length-bounded) log line into ``profile``; whether it gave anything."""
    if "took" in line:
        return _parse_took(line, profile)
    if "Memory profiling" in line:
        found = False
        if m := _TAKES.search(line):
            _first(profile, "profile_seconds", m[1])
            found = True
        for pattern, name in (
            (_V1_NON_KV, "non_kv_gib"),
            (_V1_PEAK, "activation_peak_gib"),
            (_V1_NON_TORCH, "non_torch_gib"),
            (_V1_CONSUMED, "total_consumed_gib"),
        ):
            if m := pattern.search(line):
                _first(profile, name, m[1])
                found = True
        if (start := line.find(_V0_RESULTS)) >= 0:
            for key, value in _V0_ITEM.findall(line[start:]):
                if key in _V0_KEYS:
                    _first(profile, _V0_KEYS[key], value)
                    found = True
        return found
    return _parse_budget(line, profile)


def _parse_took(line: str, profile: MemoryProfile) -> bool:
    if m := _WEIGHTS.search(line):
        if profile.weights_gib is None:
            profile.weights_gib, profile.weights_line = float(m[1]), "Model loading took"
        return True
    if m := _V0_WEIGHTS.search(line):
        if profile.weights_gib is None:
            profile.weights_gib, profile.weights_line = float(m[1]), "Loading model weights took"
        return True
    if m := _GRAPH_TOOK.search(line):
        _first(profile, "graph_capture_seconds", m[1])
        _first(profile, "graph_capture_gib", m[2])
        return True
    return False


def _parse_summary(line: str, profile: MemoryProfile) -> bool:
    """V1's "Free memory on device … Actual usage is …" summary, either wording."""
    found = False
    if m := _FREE.search(line):
        _first(profile, "total_gpu_gib", m[2])
        found = True
    if m := _DESIRED.search(line):
        _first(profile, "utilization", m[1])
        _first(profile, "usable_gib", m[2])
        found = True
    if m := _ACTUAL_WEIGHT.search(line):
        if profile.weights_gib is None:
            profile.weights_gib, profile.weights_line = float(m[1]), "Actual usage is"
        _first(profile, "non_torch_gib", m[3])
        peak, graphs, has_graphs = m[2], m[4], False
    elif m := _ACTUAL_CONSUMED.search(line):
        _first(profile, "total_consumed_gib", m[1])
        peak, graphs, has_graphs = m[2], m[3], True
    else:
        return found
    if profile.summary_peak_gib is None:
        profile.summary_peak_has_graphs = has_graphs
    _first(profile, "summary_peak_gib", peak)
    _first(profile, "summary_graph_gib", graphs)
    return True


def _parse_budget(line: str, profile: MemoryProfile) -> bool:
    if "Free memory on device" in line:
        return _parse_summary(line, profile)
    if m := _V0_USABLE.search(line):
        _first(profile, "total_gpu_gib", m[1])
        _first(profile, "utilization", m[2])
        _first(profile, "usable_gib", m[3])
        return True
    if m := _V0_PARTS.search(line):
        for name, value in zip(
            ("weights_gib", "non_torch_gib", "activation_peak_gib", "profiled_kv_gib"),
            m.groups(),
            strict=True,
        ):
            _first(profile, name, value)
        profile.weights_line = profile.weights_line or "model weights take"
        return True
    if m := _V1_REQUESTED.search(line):
        _first(profile, "utilization", m[1])
        _first(profile, "usable_gib", m[2])
        return True
    if m := _GRAPH_ESTIMATE.search(line):
        _first(profile, "cudagraph_estimate_gib", m[1])
        return True
    if m := _GRAPH_POOL.search(line):
        _first(profile, "graph_pool_gib", m[1])
        if profile.cudagraph_estimate_gib is None:
            profile.cudagraph_estimate_gib = float(m[2])
            profile.estimate_line = "CUDA graph pool memory (estimated)"
        return True
    if m := _ENCODER.search(line):
        if profile.encoder_items is None:
            profile.encoder_budget_tokens, profile.encoder_items = int(m[1]), int(m[2])
            profile.encoder_modality = m[3]
        return True
    if _ENCODER_SKIPPED in line:
        profile.encoder_skipped = True
        return True
    if "top-p" in line and (sampler := _sampler(line)) is not None:
        if profile.flashinfer_sampler is None:
            profile.flashinfer_sampler = sampler
        return True
    if m := _WARMUP.search(line):
        _first(profile, "warmup_free_gib", m[1])
        _first(profile, "warmup_committed_gib", m[2])
        _first(profile, "warmup_transient_gib", m[3])
        return True
    return False


def _sampler(line: str) -> bool | None:
    if _FLASHINFER_SAMPLER in line:
        return True
    return False if any(words in line for words in _OWN_SAMPLER) else None
