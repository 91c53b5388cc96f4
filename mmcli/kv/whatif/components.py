"""What vLLM keeps back from ``total × gpu_memory_utilization`` before the KV cache, as named
figures: each an ESTIMATE with the inputs of its formula and where the formula comes from.

vLLM's profile-based sizing (``determine_available_memory``, v1/worker/gpu_worker.py) takes
the weights, the torch peak increase of a dummy forward of ``max_num_batched_tokens`` tokens
and of the sampler over ``max_num_seqs`` rows (``profile_run``), the non-torch increase (CUDA
context, NCCL and custom all-reduce buffers) and, where the release subtracts it, the CUDA
graph memory estimate (``profile_cudagraph_memory``). The figures here stand for those
measurements; the formulas and their constants are in docs and tests with their sources.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

GIB: Final = 2**30
MIB: Final = 2**20

#: Bytes per element of the dtypes a config names (``torch_dtype`` / ``dtype``).
DTYPE_BYTES: Final = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}

#: The non-torch memory is what ``memory_profiling`` (vllm/utils, 0.10.1) counts as
#: ``non_torch_increase``: CUDA memory outside torch's pool grown from the snapshot the worker
#: takes before ``init_worker_distributed_environment`` (v1/worker/gpu_worker.py
#: ``init_device``, 0.10.1; V0's vllm/worker/worker.py takes its baseline at the same point,
#: 0.10.0) until after the profile run: the kernels' modules loaded while profiling and, with
#: tp > 1, the NCCL communicators and custom all-reduce buffers. No V1 log in reach prints it;
#: the V0 lines that do, measured the same way: one GPU, "non_torch_memory takes 0.16GiB"
#: (https://github.com/vllm-project/vllm/pull/12126).
NON_TORCH_BYTES: Final = int(0.16 * GIB)
#: With tp > 1: "non_torch_memory=0.34GiB" printed by a tp 4 worker of vLLM 0.8.3
#: (https://github.com/vllm-project/vllm/issues/16570; its other workers print 0.38 and 0.43).
NON_TORCH_TP_TOTAL_BYTES: Final = int(0.34 * GIB)
#: One captured CUDA graph: "PIECEWISE=16 (largest=16)" then "Estimated CUDA graph memory:
#: 0.36 GiB total" (https://github.com/gpustack/runner/pull/251), 0.36 GiB ÷ 16.
GRAPH_BYTES: Final = int(0.36 * GIB / 16)


@dataclass(frozen=True)
class Component:
    """One figure held back from the usable memory: its bytes, inputs and source."""

    name: str
    bytes: int
    inputs: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    #: False: named with its inputs but not estimated (its bytes, 0, are not taken off).
    estimated: bool = True

    def to_json(self) -> dict[str, Any]:
        named = {} if self.estimated else {"estimated": False}
        return {
            "name": self.name,
            "bytes": self.bytes if self.estimated else None,
            **named,
            "inputs": self.inputs,
            "source": self.source,
        }


@dataclass(frozen=True)
class Geometry:
    """What the activation peak depends on, read from an HF config."""

    hidden: int
    intermediate: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    #: Experts each token is routed to (0: a dense MLP) and the experts' intermediate size.
    topk: int = 0
    moe_intermediate: int = 0
    #: Keys the config leaves out, filled from transformers' config class (key → class name).
    class_defaults: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        filled = {"class_defaults": dict(self.class_defaults)} if self.class_defaults else {}
        return filled | {
            "hidden_size": self.hidden,
            "intermediate_size": self.intermediate,
            "vocab_size": self.vocab,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "dtype_bytes": self.dtype_bytes,
            "num_experts_per_tok": self.topk,
            "moe_intermediate_size": self.moe_intermediate,
        }


#: The keys the activation formula cannot do without (``intermediate_size`` or, for MoE,
#: ``moe_intermediate_size``).
REQUIRED_KEYS: Final = ("hidden_size", "vocab_size", "num_attention_heads", "intermediate_size")
#: Every key the formula reads (the others have a derivation of their own, or 0).
FORMULA_KEYS: Final = (
    *REQUIRED_KEYS,
    "num_key_value_heads",
    "head_dim",
    "num_experts_per_tok",
    "moe_intermediate_size",
)


def geometry(doc: dict[str, Any]) -> Geometry | None:
    """The geometry of an HF config (its ``text_config`` when it has one), or None when a key
    the formula needs is missing (the estimate then keeps the flat reserve, saying so:
    :func:`missing_keys`). Where a required key is missing, every key the formula reads that
    the config leaves out is filled from transformers' config class for its ``model_type``
    (:mod:`mmcli.kv.whatif.class_defaults`), as vLLM reads the config through it."""
    text = _text(doc)
    found = _geometry(doc, text, {})
    if found is not None:
        return found
    values, name = _class_values(doc, text)
    return _geometry(doc, text, values, str(name)) if values else None


def missing_keys(doc: dict[str, Any]) -> tuple[str, ...]:
    """The required keys that neither the config nor transformers' config class gives as a
    positive integer (Gemma 3n's ``intermediate_size`` is a list, one size a layer)."""
    text = _text(doc)
    values, _ = _class_values(doc, text)

    def given(key: str) -> bool:
        value = text.get(key, doc.get(key, values.get(key)))
        return isinstance(value, int) and not isinstance(value, bool) and value > 0

    return tuple(key for key in REQUIRED_KEYS if not given(key))


def _text(doc: dict[str, Any]) -> dict[str, Any]:
    text = doc.get("text_config") if isinstance(doc.get("text_config"), dict) else doc
    assert isinstance(text, dict)
    return text


def _class_values(doc: dict[str, Any], text: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    from mmcli.kv.whatif.class_defaults import class_values

    lacking = tuple(key for key in FORMULA_KEYS if key not in text and key not in doc)
    return class_values(doc, lacking) if lacking else ({}, None)


def _geometry(
    doc: dict[str, Any], text: dict[str, Any], filled: dict[str, Any], name: str = ""
) -> Geometry | None:
    def num(key: str) -> int | None:
        value = text.get(key, doc.get(key, filled.get(key)))
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        )

    hidden, vocab, heads = num("hidden_size"), num("vocab_size"), num("num_attention_heads")
    if hidden is None or vocab is None or heads is None:
        return None
    topk = num("num_experts_per_tok") or 0
    moe = num("moe_intermediate_size") or (num("intermediate_size") if topk else None) or 0
    intermediate = num("intermediate_size") or moe
    if not intermediate:
        return None
    dtype = text.get("torch_dtype", text.get("dtype", doc.get("torch_dtype", doc.get("dtype"))))
    return Geometry(
        hidden=hidden,
        intermediate=intermediate,
        vocab=vocab,
        heads=heads,
        kv_heads=num("num_key_value_heads") or heads,
        head_dim=num("head_dim") or hidden // heads,
        dtype_bytes=DTYPE_BYTES.get(str(dtype), 2),
        topk=topk,
        moe_intermediate=moe if topk else 0,
        class_defaults=dict.fromkeys(sorted(filled), name),
    )


def activation_peak(
    geo: Geometry,
    tokens: int,
    seqs: int,
    tp: int = 1,
    sampler: tuple[str, ...] = ("flashinfer",),
    sms: int = 0,
) -> Component:
    """The torch peak of the profile run: the larger of the forward's and the sampler's.

    Forward (``_dummy_run`` of ``tokens``): the residual and the normed hidden states
    (2·H), q/k/v ((heads + 2·kv_heads)·head_dim ÷ tp) and the MLP's gate/up output with its
    activation (3·I ÷ tp; for MoE the routed tokens × topk through the fused-MoE workspaces,
    3·topk·I_moe ÷ tp), each ``tokens`` × dtype bytes. Sampler (``_dummy_sampler_run``):
    ``seqs`` × vocab logits in the model dtype and what the ``sampler`` run (``"flashinfer"``,
    ``"sort"`` or ``"triton"``, one after the other: :mod:`mmcli.kv.whatif.sampler`; ``sms``:
    the GPU's SM count) holds beside them at the larger peak, beside the forward's hidden
    states.
    """
    from mmcli.kv.whatif.sampler import sampler_bytes

    d = geo.dtype_bytes
    mlp = 3 * (geo.topk * geo.moe_intermediate if geo.topk else geo.intermediate)
    qkv = (geo.heads + 2 * geo.kv_heads) * geo.head_dim
    forward = tokens * (2 * geo.hidden + (qkv + mlp) // tp) * d
    held = max(sampler_bytes(name, seqs, geo.vocab, d, sms) for name in sampler)
    sampled = held + tokens * geo.hidden * d
    inputs: dict[str, Any] = {
        "max_num_batched_tokens": tokens,
        "max_num_seqs": seqs,
        "tensor_parallel_size": tp,
    }
    inputs |= geo.to_json() | {
        "forward_bytes": forward,
        "sampler_bytes": sampled,
        "sampler": " then ".join(sampler),
    }
    return Component(
        "activation peak",
        max(forward, sampled),
        inputs,
        "profile_run (v1/worker/gpu_model_runner.py): dummy forward of max_num_batched_tokens "
        "and sampler run over max_num_seqs",
    )


def non_torch(tp: int) -> Component:
    """The non-torch increase of the profile: kernels' modules and, with tp > 1, the NCCL and
    custom all-reduce buffers (figures from the published V0 lines that print it)."""
    size = NON_TORCH_TP_TOTAL_BYTES if tp > 1 else NON_TORCH_BYTES
    return Component(
        "non-torch memory",
        size,
        {"tensor_parallel_size": tp},
        "non_torch_increase of memory_profiling (vllm/utils), from the worker's snapshot "
        "before the distributed set-up; figures from published logs (vllm#12126 tp 1, "
        "vllm#16570 tp 4)",
    )


def runner_buffers(
    geo: Geometry, tokens: int, seqs: int, runner: str, multimodal: bool
) -> Component:
    """The model runner's GPU buffers beyond the weights, allocated before the profile ends:
    counted against the KV cache where the release's profile counts all the worker consumed
    (``runner_buffers_counted``). V1 (v1/worker/gpu_model_runner.py): the ``inputs_embeds``
    buffer, ``max_num_batched_tokens`` × hidden in the model dtype. V2: the sampler's penalty
    state (v1/worker/gpu/sample/penalties.py: ``output_bin_counts``, max_num_seqs × vocab
    int32, and ``prompt_bin_mask``, max_num_seqs × ⌈vocab / 32⌉ int32) and, for a multimodal
    model, the encoder runner's ``inputs_embeds`` buffer (v1/worker/gpu/mm/encoder_runner.py).
    Buffers of a few bytes a token or a request (ids, positions, the block table) are left
    out."""
    embeds = tokens * geo.hidden * geo.dtype_bytes if runner != "v2" or multimodal else 0
    penalties = seqs * (geo.vocab + -(-geo.vocab // 32)) * 4 if runner == "v2" else 0
    return Component(
        "runner buffers",
        embeds + penalties,
        {
            "model_runner": runner,
            "max_num_batched_tokens": tokens,
            "max_num_seqs": seqs,
            "inputs_embeds_bytes": embeds,
            "penalty_state_bytes": penalties,
        },
        "total_consumed of memory_profiling (vllm/utils/mem_utils.py): the runner's "
        "inputs_embeds buffer and Model Runner V2's penalty state",
    )


def capture_sizes(max_num_seqs: int) -> int:
    """How many batch sizes vLLM captures by default: 1, 2, 4, multiples of 8 below 256, then
    multiples of 16 up to min(2 × max_num_seqs, 512) (config/vllm.py)."""
    top = min(2 * max_num_seqs, 512)
    return len([s for s in [1, 2, 4, *range(8, 256, 8), *range(256, top + 1, 16)] if s <= top])


def cuda_graphs(
    max_num_seqs: int, *, subtracted: bool, enforce_eager: bool, runner: str = "v1"
) -> Component:
    """The CUDA-graph memory estimate: capture sizes × one graph's bytes; 0 with
    ``--enforce-eager`` or where the release's ``runner`` (``"v1"`` / ``"v2"``, the model
    runner the plan assumes, :mod:`mmcli.kv.whatif.runner`) does not subtract it."""
    count = capture_sizes(max_num_seqs)
    size = count * GRAPH_BYTES if subtracted and not enforce_eager else 0
    inputs = {
        "max_num_seqs": max_num_seqs,
        "capture_sizes": count,
        "graph_bytes": GRAPH_BYTES,
        "model_runner": runner,
        "subtracted": subtracted,
        "enforce_eager": enforce_eager,
    }
    return Component(
        f"CUDA-graph estimate, {runner.upper()} runner",
        size,
        inputs,
        "profile_cudagraph_memory of the model runner (V1: v1/worker/gpu_model_runner.py, "
        "V2: v1/worker/gpu/model_runner.py), subtracted when "
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is on",
    )
