"""Start from the GPU: a table of common GPUs' memory, the weights, and an *estimate* of KV memory.

vLLM sizes its KV cache from a measurement it makes at start-up:

    KV memory = total × gpu_memory_utilization − (weights + activation peak + non-torch memory
                + CUDA graphs)            … all per GPU, measured while profiling a dummy batch

mmcli cannot measure; it estimates the same terms: the GPU's total (as CUDA reports it), the
weights (a figure, which the CLI reads from a size, a checkpoint's index or its safetensors
headers) divided over the tensor- and pipeline-parallel ranks, and one fixed reserve for
everything else. The result is an estimate and is labelled so everywhere; ``--memory`` (the
"Available KV cache memory" a vLLM log prints) stays the exact figure.

**Which bytes.** ``total_bytes`` in :data:`GPUS` is the total that CUDA reports
(``torch.cuda.mem_get_info()[1]``, the figure in torch's "GPU 0 has a total capacity of …"
messages and the one vLLM multiplies by the utilization), *not* the marketing size. The "80 GB"
of an H100 is in fact about 80 GiB of memory chips (nvidia-smi shows 81,559 MiB), and the driver
keeps some back: CUDA reports about 79.1 GiB (84.9 × 10⁹ bytes) — more than 80 × 10⁹ bytes, less
than 80 GiB. The readings vary by about ±0.1 GiB with the driver, ECC and the board; pass
``--gpu`` a size (``--gpu 79.19GiB``) to use your own ``torch.cuda.mem_get_info()``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from mmcli.errors import InputError
from mmcli.kv.inputs.checkpoint import index_total as index_total  # re-exported
from mmcli.kv.options import check_positive, parse_size
from mmcli.kv.releases import rules_for, value_history
from mmcli.kv.whatif.components import Component
from mmcli.kv.whatif.gpu_table import GIB as GIB  # re-exported
from mmcli.kv.whatif.gpu_table import GPU as GPU  # re-exported
from mmcli.kv.whatif.gpu_table import GPUS as GPUS  # re-exported

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name).lower()


_BY_KEY: Final = {_key(n): g for g in GPUS for n in (g.name, *g.aliases)}


def resolve_gpu(text: str) -> GPU:
    """A GPU by name (``H100``, ``a100-80gb``, ``RTX 4090``) or by size (``79.19GiB``, ``80GB``)."""
    found = _BY_KEY.get(_key(text))
    if found is not None:
        return found
    if text.strip()[:1].isdigit():
        size = parse_size(text)
        return GPU(text.strip(), "given", size, "--gpu")
    names = ", ".join(g.name for g in GPUS)
    raise InputError(
        f"--gpu: unknown GPU {text!r}",
        hint=f"name one of {names}, or give its memory as torch.cuda.mem_get_info() reports it, "
        "e.g. --gpu 79.19GiB",
    )


# --- weights ------------------------------------------------------------------------------
#
# ``--weights`` is read by ``mmcli.kv.inputs.weights``: a size, an index
# (:func:`index_total`), a ``.safetensors`` header, a folder or a Hub repo; the total is passed
# to :func:`estimate_kv_budget`.

# --- the estimate -------------------------------------------------------------------------

#: The default reserve for what vLLM's profiling measures besides the weights, per GPU: the
#: activation peak of the dummy batch (max_num_batched_tokens tokens: 2048–8192 by default,
#: about 0.5–1.5 GiB for 7B–70B models), non-torch memory (CUDA context, NCCL buffers: about
#: 0.3–0.6 GiB) and CUDA graphs (0.1–1 GiB; vLLM logs "CUDA graph pool memory"). An estimate:
#: read the real figure from your log, or set --reserve.
DEFAULT_RESERVE_BYTES: Final = 2 * GIB


@dataclass(frozen=True)
class Estimate:
    """An estimate of the KV-cache memory per GPU, with every term kept for display."""

    gpu: GPU
    utilization: float
    weights_bytes: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    reserve_bytes: int
    #: What the weights figure was read from (``--weights 16GiB``, an index, a repo, ...).
    weights_source: str = "--weights"
    #: True when the weights figure is itself an estimate from the config's geometry.
    weights_estimated: bool = False
    #: The extensible KV cache's sizing margin (vLLM 0.34: max(1 GiB, 0.75 × the transient
    #: peak), kept below the device headroom), or 0 before it.
    margin_bytes: int = 0
    #: The named figures the reserve is made of (:mod:`mmcli.kv.whatif.components`); empty:
    #: one flat reserve.
    components: tuple[Component, ...] = ()
    #: Notes on how the figures were taken (``--reserve`` replacing the activation and
    #: graph figures, ``--kv-cache-memory-bytes``).
    notes: tuple[str, ...] = ()
    #: The encoder towers' bytes the checkpoint counts and vLLM does not load, taken off the
    #: weights (:mod:`mmcli.kv.inputs.towers`).
    towers_left_out_bytes: int = 0

    @property
    def upper_bound(self) -> bool:
        """Whether the estimate is an upper bound: on a unified-memory GPU, vLLM's profile
        counts host memory taken while it profiles, which no figure here includes."""
        return self.gpu.unified

    @property
    def extensible(self) -> bool:
        """Whether the release sizes an extensible KV cache (a margin below the headroom)."""
        return self.margin_bytes > 0

    @property
    def margin_cut_bytes(self) -> int:
        """What the margin takes off: the usable memory above total − margin (0 when the
        utilization already keeps that much free)."""
        return max(0, self.usable_bytes - (self.gpu.total_bytes - self.margin_bytes))

    @property
    def usable_bytes(self) -> int:
        """total × utilization: what vLLM lets itself use on one GPU."""
        return int(self.gpu.total_bytes * self.utilization)

    @property
    def weights_per_gpu_bytes(self) -> int:
        """The weights ÷ (tp · pp), rounded up (an even split; embeddings are not replicated)."""
        return math.ceil(
            self.weights_bytes / (self.tensor_parallel_size * self.pipeline_parallel_size)
        )

    @property
    def kv_bytes(self) -> int:
        """min(total × utilization, total − margin) − weights ÷ (tp·pp) − reserve (may be ≤ 0:
        nothing left)."""
        usable = self.usable_bytes - self.margin_cut_bytes
        return usable - self.weights_per_gpu_bytes - self.reserve_bytes

    def terms(self) -> list[tuple[str, int | None]]:
        """(label, bytes) of each term, signed (None: named, not estimated), ending with the
        estimate itself."""
        ranks = self.tensor_parallel_size * self.pipeline_parallel_size
        share = f"weights ÷ {ranks}" if ranks > 1 else "weights"
        if self.weights_estimated:
            share += " (ESTIMATE)"
        if self.towers_left_out_bytes:
            share += " (less the encoder towers vLLM does not load)"
        terms = [
            (f"{self.gpu.name} total (as CUDA reports it)", self.gpu.total_bytes),
            (f"× gpu_memory_utilization {self.utilization:g}", self.usable_bytes),
        ]
        if self.margin_cut_bytes:
            terms.append(("− extensible KV cache margin", -self.margin_cut_bytes))
        held: list[tuple[str, int | None]] = [
            (f"− {c.name} (estimate)", -c.bytes) if c.estimated else (f"− {c.name}", None)
            for c in self.components
        ] or [("− activation / CUDA-graph reserve", -self.reserve_bytes)]
        return [
            *terms,
            (f"− {share}", -self.weights_per_gpu_bytes),
            *held,
            (f"= KV cache per GPU ({self._label})", self.kv_bytes),
        ]

    def formula(self) -> str:
        """``79.11 GiB × 0.9 − 16.00 GiB − 2.00 GiB = 53.20 GiB (estimate)``."""
        ranks = self.tensor_parallel_size * self.pipeline_parallel_size
        weights = f"{self.weights_bytes / GIB:.2f} GiB" + (f" ÷ {ranks}" if ranks > 1 else "")
        margin = f" − {self.margin_cut_bytes / GIB:.2f} GiB" if self.margin_cut_bytes else ""
        return (
            f"{self.gpu.total_gib:.2f} GiB × {self.utilization:g}{margin} − {weights} − "
            f"{self.reserve_bytes / GIB:.2f} GiB = {self.kv_bytes / GIB:.2f} GiB ({self._label})"
        )

    @property
    def _label(self) -> str:
        return "estimate, an upper bound" if self.upper_bound else "estimate"

    def memory_bytes(self) -> int:
        """The KV memory to plan with; refuses an estimate that leaves nothing."""
        if self.kv_bytes <= 0:
            raise InputError(
                f"the estimate leaves no memory for the KV cache: {self.formula()}",
                hint="raise --gpu-memory-utilization or --tensor-parallel-size, use a larger "
                "--gpu, or lower --reserve",
            )
        return self.kv_bytes

    def to_json(self) -> dict[str, Any]:
        doc = self._json()
        if self.extensible:
            doc |= {"extensible_kv_cache_margin_bytes": self.margin_bytes}
            doc |= {"margin_cut_bytes": self.margin_cut_bytes}
        if self.components:
            doc |= {"components": [c.to_json() for c in self.components]}
        if self.notes:
            doc |= {"notes": list(self.notes)}
        if self.upper_bound:
            doc |= {"upper_bound": True}
        if self.towers_left_out_bytes:
            doc |= {"towers_left_out_bytes": self.towers_left_out_bytes}
        return doc

    def _json(self) -> dict[str, Any]:
        return {
            "estimate": True,
            "gpu": self.gpu.name,
            "gpu_total_bytes": self.gpu.total_bytes,
            "gpu_memory_utilization": self.utilization,
            "usable_bytes": self.usable_bytes,
            "weights_bytes": self.weights_bytes,
            "weights_source": self.weights_source,
            "weights_estimated": self.weights_estimated,
            "weights_per_gpu_bytes": self.weights_per_gpu_bytes,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "reserve_bytes": self.reserve_bytes,
            "kv_cache_bytes": self.kv_bytes,
        }


def estimate_kv_budget(
    gpu_bytes: int | GPU,
    utilization: float,
    weights_bytes: int,
    tp: int = 1,
    pp: int = 1,
    reserve: int = DEFAULT_RESERVE_BYTES,
    *,
    weights_source: str = "--weights",
    weights_estimated: bool = False,
    extensible: bool = False,
    components: tuple[Component, ...] = (),
    notes: tuple[str, ...] = (),
    transient: int | None = None,
) -> Estimate:
    """total × utilization − weights ÷ (tp·pp) − reserve, every term kept (an estimate).

    With ``components`` the reserve is their sum; ``transient`` (the activation peak) is
    what the extensible cache's margin scales (default: the reserve)."""
    if components:
        reserve = sum(c.bytes for c in components)
    gpu = gpu_bytes if isinstance(gpu_bytes, GPU) else GPU("GPU", "given", gpu_bytes, "given")
    if not 0 < utilization <= 1:
        raise InputError(
            f"--gpu-memory-utilization must be in (0, 1], got {utilization:g}",
            hint="vLLM's default by release: "
            f"{value_history('default_gpu_memory_utilization')} (the extensible KV cache's)",
        )
    if gpu.total_bytes <= 0:
        raise InputError(
            "--gpu: the GPU memory must be positive", hint="e.g. --gpu H100 or --gpu 79GiB"
        )
    if weights_bytes < 0 or reserve < 0:
        raise InputError(
            "--weights and --reserve must not be negative",
            hint="e.g. --weights 16GiB --reserve 2GiB",
        )
    check_positive("--tensor-parallel-size", tp)
    check_positive("--pipeline-parallel-size", pp)
    peak = reserve if transient is None else transient
    margin = max(GIB, int(peak * EXTENSIBLE_MARGIN_FRACTION)) if extensible else 0
    if gpu.unified:
        notes = (*notes, UNIFIED_MEMORY_NOTE.format(gpu=gpu.name))
    return Estimate(
        gpu,
        utilization,
        weights_bytes,
        tp,
        pp,
        reserve,
        weights_source,
        weights_estimated,
        margin,
        components,
        notes,
    )


#: On a unified-memory GPU vLLM's memory snapshot takes the free memory as the host's
#: (vllm/utils/mem_utils.py ``MemorySnapshot.measure``: ``psutil.virtual_memory().available``
#: on Orin, Thor and Spark from 0.11.1, on integrated GPUs from 0.20; cudaMemGetInfo reports
#: the system's free memory before), and counts whatever is not torch's as non-torch memory.
UNIFIED_MEMORY_NOTE: Final = (
    "{gpu} shares the host's memory: vLLM counts the memory the host takes while it profiles "
    "(torch.compile's workers, the engine process, other programs) as its own non-torch "
    "memory, which this estimate cannot know; the KV memory is at most this estimate"
)
#: The extensible KV cache's margin below the device headroom: max(1 GiB, 0.75 × the
#: transient peak), for which the estimate takes its reserve (vLLM 0.34
#: v1/worker/extensible_kv_cache.py, ``KV_CACHE_MARGIN_FLOOR_BYTES`` on CUDA and
#: ``KV_CACHE_MARGIN_FRACTION``).
EXTENSIBLE_MARGIN_FRACTION: Final = 0.75


# --- vLLM's defaults that depend on the GPU -----------------------------------------------

#: vLLM picks larger batch defaults on GPUs with at least this much memory (and not an A100).
LARGE_GPU_BYTES: Final = 70 * GIB
#: ... and its largest on GPUs with at least this much (release row ``largest_batch_tier``).
LARGEST_GPU_BYTES: Final = 160 * GIB
#: The entry points whose defaults differ: ``vllm serve`` and the ``LLM`` class.
ENTRIES: Final = ("serve", "llm")
#: (``vllm serve``, ``LLM`` class) max_num_batched_tokens and max_num_seqs of each tier.
BATCH_TIERS: Final = {
    "small": ((2048, 8192), 256),
    "large": ((8192, 16384), 1024),
    "largest": ((16384, 16384), 1024),
}


def batch_tier(gpu: GPU | int, rules: EngineRules | None = None) -> str:
    """vLLM's batch-default tier of a GPU under a release (default: the newest mirrored):
    "largest" (at least 160 GiB, where the release has it), "large" (at least 70 GiB, not an
    A100, nor a GB10 where the release keeps it small) or "small"."""
    rules = rules or rules_for(None)
    total = gpu.total_bytes if isinstance(gpu, GPU) else gpu
    name = gpu.name.lower() if isinstance(gpu, GPU) else ""
    if rules.largest_batch_tier and total >= LARGEST_GPU_BYTES:
        return "largest"
    if rules.gb10_small_tier and name == "gb10":
        return "small"
    return "large" if total >= LARGE_GPU_BYTES and "a100" not in name else "small"


def default_max_num_batched_tokens(
    gpu: GPU | int, *, entry: str = "serve", rules: EngineRules | None = None
) -> int:
    """vLLM's default ``max_num_batched_tokens`` for this GPU, entry point and release
    (:data:`BATCH_TIERS`): ``vllm serve`` 2048 / 8192 / 16384, the ``LLM`` class 8192 /
    16384 / 16384."""
    if entry not in ENTRIES:
        raise ValueError(f"entry must be 'serve' or 'llm', got {entry!r}")
    tokens, _ = BATCH_TIERS[batch_tier(gpu, rules)]
    return tokens[ENTRIES.index(entry)]


def default_max_num_seqs(gpu: GPU | int, *, rules: EngineRules | None = None) -> int:
    """vLLM's default ``max_num_seqs`` for this GPU and release (either entry point): 256 on
    the small tier, 1024 on the others."""
    return BATCH_TIERS[batch_tier(gpu, rules)][1]
