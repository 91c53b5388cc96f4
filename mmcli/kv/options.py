"""What the command line can change about a plan, parsed and checked in one place."""

from __future__ import annotations

import re
from dataclasses import InitVar, dataclass
from typing import Final

from mmcli.dtypes import kv_dtype
from mmcli.errors import InputError
from mmcli.kv.releases import EngineRules, first_release, rules_for

#: vLLM's default ``max_num_batched_tokens`` for ``vllm serve`` on a GPU; it bounds how far
#: past its window a sliding layer's blocks reach during a prefill chunk.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


#: Bounds well past any real run; larger numbers are typos (and would overflow floats).
MAX_MEMORY_BYTES = 2**60
MAX_COUNT = 2**40


def parse_size(text: str, *, allow_zero: bool = False) -> int:
    """Bytes in ``20GiB``, ``80GB``, ``512MiB``, ``1.5GiB`` or a plain byte count (zero
    refused unless ``allow_zero``: no memory is ever zero, a reserve may be)."""
    if len(text) > 64:
        raise InputError(
            f"cannot read a {len(text):,}-character memory size",
            hint="write a number with a unit, e.g. 20GiB",
        )
    match = _SIZE.match(text) if text.isascii() else None
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise InputError(
            f"cannot read {text!r} as a memory size",
            hint="write a number with a unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, "
            "GiB, TiB (powers of 1024), e.g. 20GiB; or plain bytes",
        )
    from decimal import Decimal, InvalidOperation  # exact for "1.5GiB"; lazy: slow import

    try:
        value = int(Decimal(match.group(1)) * _UNITS[unit])
    except InvalidOperation:  # pragma: no cover - the regex admits only decimals
        raise InputError(f"cannot read {text!r} as a memory size") from None
    if value <= 0 and not (allow_zero and value == 0):
        raise InputError(
            f"memory size {text!r} is zero bytes", hint="give the KV-cache memory per GPU"
        )
    if value > MAX_MEMORY_BYTES:
        raise InputError(
            f"memory size {text!r} is more than 1 EiB", hint="give the KV-cache memory per GPU"
        )
    return value


#: vLLM's ``--kv-cache-dtype`` for DeepSeek's MLA cache: 656 bytes per token per layer.
DS_MLA = "fp8_ds_mla"

_EXAMPLES = {
    "--max-num-batched-tokens": "e.g. 8192 (vllm serve's default)",
    "--max-model-len": "e.g. 32768",
    "--block-size": "the engine's default is 16",
    "--tensor-parallel-size": "the number of GPUs the model is split across, e.g. 1, 2, 8",
    "--pipeline-parallel-size": "the number of pipeline stages, e.g. 1, 2, 4",
    "--pp-layer-partition": "one count per stage adding up to the layers, e.g. 8,12,12",
    "--num-gpu-blocks-override": "the block count the engine should use, e.g. 1024",
    "--max-num-seqs": "e.g. 256",
}


#: At most this many pipeline stages: each is planned and reported on its own row (a
#: thousand take about a second; a million took minutes).
MAX_PIPELINE_STAGES: Final = 1024


def check_positive(option: str, value: int) -> None:
    """Refuse a count option that is not positive, or larger than any engine uses."""
    if value > MAX_COUNT:
        digits = len(str(value))
        raise InputError(
            f"{option} is a {digits}-digit number, more than any engine uses",
            hint=_EXAMPLES[option],
        )
    if value <= 0:
        raise InputError(
            f"{option} must be a positive integer, got {value}", hint=_EXAMPLES[option]
        )


@dataclass(frozen=True)
class PlanOptions:
    """What the command line can change about a plan, checked when built.

    ``kv_dtype`` is any spelling :func:`mmcli.dtypes.kv_dtype` knows, or ``auto`` (the
    config's dtype); it is stored canonical. ``memory`` is the memory budget as text
    (``20GiB``), read by :func:`parse_size` into ``memory_bytes``; pass one or the other.
    Errors name the command-line option they come from.
    """

    block_size: int | None = None
    kv_dtype: str = "auto"
    max_model_len: int | None = None
    memory_bytes: int | None = None
    tensor_parallel_size: int = 1
    #: Pipeline stages: layers split across them as the engine splits them.
    pipeline_parallel_size: int = 1
    #: Decoder layers per stage instead of the engine's split (``VLLM_PP_LAYER_PARTITION``).
    pp_layer_partition: tuple[int, ...] | None = None
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    #: The vLLM release whose rules to mirror (None: the newest mirrored).
    vllm_version: str | None = None
    #: Async scheduling (on by default in vLLM): two batches in flight from 0.26.
    async_scheduling: bool = True
    #: Prefix caching (None: the release's default for the model).
    enable_prefix_caching: bool | None = None
    disable_hybrid_kv_cache_manager: bool = False
    #: ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` (None: the release's default).
    chunked_local_attn_hybrid: bool | None = None
    #: The SSM / recurrent state's dtype (``auto``: the config's or the model's).
    mamba_ssm_cache_dtype: str = "auto"
    #: Sharing the engine accepts but that is likely a mistake (full ↔ sliding) is an error.
    strict: bool = False
    #: Attention layers a speculative-decoding drafter (an EAGLE head) adds to the pool.
    num_draft_layers: int = 0
    #: Plan the config's multi-token-prediction layers (vLLM builds them for MTP decoding).
    mtp: bool = False
    #: ``num_speculative_tokens`` of vLLM's ``--speculative-config`` (None: the MTP layer
    #: count with ``mtp``, else none). A recurrent state grows with it (see the planner).
    num_speculative_tokens: int | None = None
    #: Use this many blocks whatever the memory (vLLM's ``--num-gpu-blocks-override``).
    num_gpu_blocks_override: int | None = None
    #: Requests the scheduler may run at once (checked against a hybrid model's state pool).
    max_num_seqs: int | None = None
    #: ``--enforce-eager``: no CUDA graphs (a state pool smaller than max_num_seqs starts).
    enforce_eager: bool = False
    #: Plan a ``max_model_len`` above the config's derived maximum, as vLLM does with
    #: ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (else the engine refuses to start).
    allow_long_max_model_len: bool = False
    #: ``max_num_batched_tokens`` is the default (not given): the engine may raise it.
    max_num_batched_tokens_default: bool = False
    memory: InitVar[str | None] = None

    def __post_init__(self, memory: str | None) -> None:
        dtype = self.kv_dtype.strip().lower()
        if dtype not in ("auto", DS_MLA):
            dtype = kv_dtype(self.kv_dtype, where="--kv-dtype")
        object.__setattr__(self, "kv_dtype", dtype)
        ssm = self.mamba_ssm_cache_dtype.strip().lower()
        if ssm != "auto":
            ssm = kv_dtype(ssm, where="--mamba-ssm-cache-dtype")
        object.__setattr__(self, "mamba_ssm_cache_dtype", ssm)
        if memory is not None:
            if self.memory_bytes is not None:
                raise TypeError("pass memory or memory_bytes, not both")
            object.__setattr__(self, "memory_bytes", parse_size(memory))
        check_positive("--max-num-batched-tokens", self.max_num_batched_tokens)
        if self.max_model_len is not None:
            check_positive("--max-model-len", self.max_model_len)
        if self.block_size is not None:
            check_positive("--block-size", self.block_size)
        check_positive("--tensor-parallel-size", self.tensor_parallel_size)
        check_positive("--pipeline-parallel-size", self.pipeline_parallel_size)
        if self.pipeline_parallel_size > MAX_PIPELINE_STAGES:  # refused before any planning
            raise InputError(
                f"--pipeline-parallel-size {self.pipeline_parallel_size:,}: mmcli plans at most "
                f"{MAX_PIPELINE_STAGES:,} pipeline stages (each is a row of the report)",
                hint=f"use at most {MAX_PIPELINE_STAGES:,} stages",
            )
        if self.pp_layer_partition is not None:
            if any(n < 0 or n > MAX_COUNT for n in self.pp_layer_partition):
                raise InputError(
                    "--pp-layer-partition: each stage's layer count must be 0 or more",
                    hint=_EXAMPLES["--pp-layer-partition"],
                )
            if len(self.pp_layer_partition) != self.pipeline_parallel_size:
                raise InputError(
                    f"--pp-layer-partition gives {len(self.pp_layer_partition)} counts for "
                    f"--pipeline-parallel-size {self.pipeline_parallel_size}",
                    hint=_EXAMPLES["--pp-layer-partition"],
                )
        if self.max_num_seqs is not None:
            check_positive("--max-num-seqs", self.max_num_seqs)
        if self.num_gpu_blocks_override is not None:
            check_positive("--num-gpu-blocks-override", self.num_gpu_blocks_override)
        if self.num_draft_layers > 1000:
            raise InputError(
                f"--num-draft-layers {self.num_draft_layers} is more than a drafter has",
                hint="an EAGLE drafter adds 1 layer; EAGLE-3 heads up to a few",
            )
        if self.num_draft_layers < 0:
            raise InputError(
                f"--num-draft-layers must be 0 or more, got {self.num_draft_layers}",
                hint="an EAGLE drafter adds 1 layer; EAGLE-3 heads up to a few",
            )
        rules = rules_for(self.vllm_version)  # refuses an unreadable release now, not mid-plan
        if self.chunked_local_attn_hybrid is False and rules.chunked_local_hybrid == "always":
            raise InputError(
                f"--no-chunked-local-attn-hybrid: vLLM {rules.release} has no "
                "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE (it came in "
                f"{first_release('chunked_local_hybrid', 'off')}); its chunked local layers "
                "always keep their own KV-cache groups",
                hint="drop the option, or pass --disable-hybrid-kv-cache-manager to plan them "
                "as full attention",
            )

    @property
    def sizes_pool(self) -> bool:
        """Whether the pool has a size (--memory or --num-gpu-blocks-override)."""
        return self.memory_bytes is not None or self.num_gpu_blocks_override is not None

    @property
    def chunked_local_hybrid(self) -> bool:
        """Whether chunked local layers keep their own groups beside the hybrid KV cache
        manager; else the engine turns the manager off and plans them as full attention. An
        EAGLE or MTP drafter always turns it off (``VllmConfig.__post_init__``)."""
        if self.num_draft_layers or self.mtp:
            return False
        if self.chunked_local_attn_hybrid is not None:
            return self.chunked_local_attn_hybrid
        return self.rules.chunked_local_hybrid != "off"

    @property
    def rules(self) -> EngineRules:
        """The rules of the release these options name."""
        return rules_for(self.vllm_version)
