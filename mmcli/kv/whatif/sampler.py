"""Which top-k / top-p sampler vLLM's profile run takes, and what it holds at its peak.

The profile samples ``max_num_seqs`` rows of logits with top-k (vocab − 1) and top-p (0.9) set
(``_dummy_sampler_run``, v1/worker/gpu_model_runner.py), so the sampler's peak is one of the
profile's two candidates for the activation peak. Which sampler runs on a CUDA GPU is a release
rule (``flashinfer_sampler``, ``native_top_k_top_p``: :mod:`mmcli.kv.releases`), the device's
compute capability and SM count, and ``VLLM_USE_FLASHINFER_SAMPLER`` (``flashinfer``: None when
it is unset). Under the ``"installed"`` rule FlashInfer is the ``flashinfer`` extra of the wheel
(``flashinfer-python; extra == "flashinfer"``, none at all in 0.10.0's requirements), so a plain
``pip install vllm`` samples on its own: ``flashinfer`` True stands for an install that has it.
On ROCm vLLM takes its own sampler (the AITER one needs ``VLLM_ROCM_USE_AITER=1``, off by
default, not modelled).

Bytes a logit at the peak, beside the model-dtype logits (``d``) the caller keeps and the float32
copy ``Sampler.forward`` makes (4), v1/sample/ops/topk_topp_sampler.py:

* FlashInfer (``top_k_top_p_sampling_from_logits``, flashinfer/sampling.py of the pinned
  flashinfer-python, 0.2.11 – 0.7.x): the top-k masked logits in float32 (4), then their softmax
  (4), both held while it samples: ``d + 12``.
* ``sort`` (``apply_top_k_top_p``): ``logits.sort`` keeps float32 values and int64 indices (12)
  and, inside torch's segmented radix sort (aten/src/ATen/native/cuda/SortStable.cu), int64
  source indices (8) and cub's alternate key and value buffers (4 + 8): ``d + 36`` for one row or
  128 or more; from 2 to 127 rows torch sorts the whole batch at once, keyed by (index, segment)
  pairs (two int2 buffers, 16), with an extra key buffer (4) beside cub's (4 + 8): ``d + 48``.
* ``triton`` (``apply_top_k_top_p_triton``, 8 rows or more): masks the float32 logits in place;
  then the softmax's float32 probabilities and ``random_sample``'s exponential draws (4 + 4):
  ``d + 12``, and the kernel's buffer of min(SMs, rows) rounded up to a power of two, at most
  the SMs, float32 rows of the vocabulary (kept across calls). From the ``"default"`` rule the
  V1 runner's profile calls the sampler twice, the second time with a per-request generator,
  which ``forward_cuda`` hands to this path: both run, the larger peak counts.
* Model Runner V2 (v1/worker/gpu/, its own ``_dummy_sampler_run``): zeroed sampling states,
  so greedy rows without top-k / top-p, with a float32 copy (``greedy-fp32``, ``d + 4``, the
  ``"copy"`` rule) or without (``greedy``, ``d``, ``"logits"``); under ``"warmup"`` a second
  call with ``SamplingParams.for_sampler_warmup()`` on every row: FlashInfer's fused sampler on
  its float32 copy (``d + 12``) or vLLM's own top-k / top-p and Gumbel noise in place
  (``gumbel``, ``d + 4`` and the Triton buffer).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from mmcli.errors import InputError

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules
    from mmcli.kv.whatif.gpu_table import GPU

#: The compute capabilities FlashInfer's backend takes (``supports_compute_capability``,
#: v1/attention/backends/flashinfer.py): 7.5 – 12.1, from 8.0 under a ``-sm80`` rule.
_CAPABILITY: Final = ((7, 5), (12, 1))
_CAPABILITY_SM80: Final = ((8, 0), (12, 1))
#: Under a ``-sms`` rule FlashInfer's top-k needs more than this many SMs.
_MIN_SMS: Final = 16
#: Rows from which torch sorts row by row (cub's segmented sort) rather than the whole batch.
_SEGMENTED_ROWS: Final = 128
#: Rows from which vLLM's own top-k / top-p runs its Triton kernel (``logits.shape[0] >= 8``).
_TRITON_ROWS: Final = 8


@dataclass(frozen=True)
class SamplerPath:
    """The samplers the profile runs, one after the other (``"flashinfer"``, ``"sort"``,
    ``"triton"``; the V2 runner's ``"greedy"``, ``"greedy-fp32"``, ``"gumbel"``), why, and the
    GPU's SM count that sizes the Triton buffer (0: not in the GPU table)."""

    names: tuple[str, ...]
    why: str
    sms: int = 0

    @property
    def name(self) -> str:
        """The sampler that holds the most (the last one run where they differ)."""
        return self.names[-1]


def sampler_path(
    rules: EngineRules,
    device: GPU,
    seqs: int,
    flashinfer: bool | None = None,
    runner: str = "v1",
) -> SamplerPath:
    """The sampler ``rules``' release takes on ``device`` for ``seqs`` rows on the ``runner``
    model runner; ``flashinfer`` is ``VLLM_USE_FLASHINFER_SAMPLER`` (None: unset). Raises
    :class:`InputError` where vLLM refuses to start (the variable set to 1 on a GPU FlashInfer's
    sampler does not support)."""
    from mmcli.kv.whatif.gpu_table import ARCH

    if runner == "v2":
        path = _v2_path(rules, device, seqs, flashinfer)
    else:
        path = _top_k_top_p(rules, device, seqs, flashinfer)
        if path.names == ("flashinfer",) and rules.flashinfer_sampler.startswith("default"):
            # 0.21: a second call with a per-request seed warms vLLM's own sampler too.
            path = replace(path, names=("flashinfer", _native_name(rules, seqs)))
    return replace(path, sms=ARCH.get(device.name, (None, 0))[1])


def _v2_path(rules: EngineRules, device: GPU, seqs: int, flashinfer: bool | None) -> SamplerPath:
    """Model Runner V2's ``_dummy_sampler_run``: greedy rows of zeroed sampling states; from
    the ``"warmup"`` rule a second call with every parameter set (``for_sampler_warmup``)."""
    greedy = "greedy-fp32" if rules.v2_sampler == "copy" else "greedy"
    why = "Model Runner V2's profile samples greedily, without top-k / top-p"
    if rules.v2_sampler != "warmup":
        return SamplerPath((greedy,), why)
    path = _top_k_top_p(rules, device, seqs, flashinfer)
    second = "gumbel" if path.names == ("triton",) else path.name
    return SamplerPath((greedy, second), f"{path.why}, in Model Runner V2's second warm-up call")


def _top_k_top_p(
    rules: EngineRules, device: GPU, seqs: int, flashinfer: bool | None
) -> SamplerPath:
    """FlashInfer's top-k / top-p or vLLM's own, as ``TopKTopPSampler`` picks."""
    from mmcli.kv.whatif.gpu_table import ARCH

    capability, sms = ARCH.get(device.name, ((0, 0), 0))
    rule = rules.flashinfer_sampler
    known = device.name in ARCH
    if known and capability is None:
        return _native(rules, seqs, f"{device.name} runs ROCm: vLLM's own top-k / top-p")
    if rule == "installed":
        if flashinfer:
            return SamplerPath(("flashinfer",), "FlashInfer's, installed (--flashinfer-sampler)")
        return _native(
            rules, seqs, "FlashInfer is an optional extra here, which pip install vllm leaves out"
        )
    if rule == "opt-in" and not flashinfer:
        return _native(rules, seqs, "FlashInfer's sampler only with VLLM_USE_FLASHINFER_SAMPLER=1")
    if flashinfer is False:
        return _native(rules, seqs, "VLLM_USE_FLASHINFER_SAMPLER=0")
    low, high = _CAPABILITY_SM80 if "sm80" in rule else _CAPABILITY
    reason = ""
    if known and capability is not None and not low <= capability <= high:
        reason = f"compute capability {capability[0]}.{capability[1]}"
    elif known and rule.endswith("-sms") and sms <= _MIN_SMS:
        reason = f"{sms} SMs (FlashInfer's top-k needs more than {_MIN_SMS})"
    if reason and (flashinfer or rule == "opt-in"):
        raise InputError(
            f"vLLM {rules.release} refuses to start: VLLM_USE_FLASHINFER_SAMPLER=1 on "
            f"{device.name}, {reason}, which FlashInfer's sampler does not support",
            hint="plan without the variable (vLLM then samples on its own)",
        )
    if reason:
        return _native(rules, seqs, f"FlashInfer's sampler does not run on {reason}")
    why = "FlashInfer's, vLLM's default" if rule != "opt-in" else "VLLM_USE_FLASHINFER_SAMPLER=1"
    if not known:
        why += f" (assumed supported by the GPU; {device.name} is not in the GPU table)"
    return SamplerPath(("flashinfer",), why)


def _native_name(rules: EngineRules, seqs: int) -> str:
    """vLLM's own top-k / top-p: its Triton kernel from 8 rows where the release has it."""
    triton = rules.native_top_k_top_p == "triton" and seqs >= _TRITON_ROWS
    return "triton" if triton else "sort"


def _native(rules: EngineRules, seqs: int, why: str) -> SamplerPath:
    return SamplerPath((_native_name(rules, seqs),), why)


#: Bytes a logit beyond the model-dtype logits, by sampler (``sort`` and the Triton buffer
#: apart): float32 copy 4 + masked logits 4 + probabilities 4 (FlashInfer); float32 copy 4 +
#: probabilities 4 + exponential draws 4 (``triton``); the V2 runner's greedy rows, with or
#: without its float32 copy, and its top-k / top-p on the float32 copy with Gumbel noise drawn
#: in place (``gumbel``).
_PER_LOGIT: Final = {"flashinfer": 12, "triton": 12, "greedy": 0, "greedy-fp32": 4, "gumbel": 4}


def sampler_bytes(path: str, seqs: int, vocab: int, dtype_bytes: int, sms: int) -> int:
    """The bytes the sampler holds at its peak for ``seqs`` × ``vocab`` logits (``sms``: the
    GPU's SM count, 0 if unknown: the Triton buffer then takes a row per sequence)."""
    logits = seqs * vocab
    if path in ("triton", "gumbel"):
        rows = min(1 << (min(seqs, sms) - 1).bit_length(), sms) if sms else seqs
        return logits * (dtype_bytes + _PER_LOGIT[path]) + rows * vocab * 4
    if path in _PER_LOGIT:
        return logits * (dtype_bytes + _PER_LOGIT[path])
    per_logit = 48 if 1 < seqs < _SEGMENTED_ROWS else 36
    return logits * (dtype_bytes + per_logit)


#: How each sampler handles the logits, for the plan's note.
_HOW: Final = {
    "flashinfer": "FlashInfer's top-k / top-p",
    "sort": "vLLM's own top-k / top-p, which sorts them",
    "triton": "vLLM's own top-k / top-p, its Triton kernel masking them in place",
    "gumbel": "vLLM's own top-k / top-p, its Triton kernel masking them in place",
    "greedy": "greedy sampling",
    "greedy-fp32": "greedy sampling of a float32 copy",
}


def sampler_note(path: SamplerPath, seqs: int, vocab: int) -> str:
    """The plan's note where the sampler sets the activation peak."""
    how = " then ".join(dict.fromkeys(_HOW[name] for name in path.names))
    return (
        f"the activation peak is the sampler's: {how}, over {seqs:,} × {vocab:,} logits "
        f"({path.why}; --flashinfer-sampler / --no-flashinfer-sampler for "
        "VLLM_USE_FLASHINFER_SAMPLER=1 / 0)"
    )
