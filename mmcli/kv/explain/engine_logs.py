"""SGLang and TensorRT-LLM start-up logs: the KV figures they print, read line by line.

Only the lines named below are read, each with an anchored pattern on a line of bounded
length; anything else is ignored. SGLang: ``KV Cache is allocated. #tokens: N, K size: X GB,
V size: Y GB`` (or ``KV size`` for MLA), ``max_total_num_tokens=…, max_running_requests=…,
context_len=…``, a hybrid model's ``Mamba Cache is allocated. max_mamba_cache_size: S,
conv_state size: XGB, ssm_state size: YGB`` (0.5.4, memory_pool.py:222; 0.5.3 prints no
``max_mamba_cache_size``, :177), and the ``server_args=ServerArgs(…)`` line for tp, page size,
KV dtype, ``mem_fraction_static`` and the state-pool settings. TensorRT-LLM: ``Memory usage
when calculating max tokens in paged kv cache: total: T GiB, available: A GiB`` (C++ runtime),
``available KV cache memory when calculating max tokens: B GiB, … kv size is S`` (PyTorch
backend), ``Number of blocks in KV cache primary pool: N``, ``Number of tokens per block: K.``,
``Allocated X GiB for max tokens in paged KV cache (T)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mmcli.kv.sglang.log_releases import ARGS_FIRST_IN
from mmcli.kv.sglang.state_wording import state_line_release

#: Longer lines are skipped (a server_args line is a few KiB; nothing needs more).
MAX_LINE = 65_536

_NUM = r"(\d{1,15}(?:\.\d{1,6})?)"
#: 0.5.13 on name the dtype ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: …");
#: 0.5.18 on print "KV Cache VA upper bound." instead when the post-capture resize is on.
_SGL_POOL = re.compile(
    r"KV Cache (is allocated|VA upper bound)\. (?:dtype: ([A-Za-z0-9_.]{1,40}), )?"
    rf"#tokens: (\d{{1,15}}), (?:K size: {_NUM} GB, V size: {_NUM} GB|KV size: {_NUM} GB)"
)
#: MambaPool's line; with speculative decoding it goes on with intermediate_ssm_state_cache.
_SGL_MAMBA = re.compile(
    r"Mamba Cache is allocated\. (?:max_mamba_cache_size: (\d{1,15}), )?"
    rf"conv_state size: {_NUM}GB, ssm_state size: {_NUM}GB( intermediate_)?"
)
#: The hybrid sliding-window pool's lines (0.5.8 on, mem_cache/swa_memory_pool.py): the
#: split, then each pool's "KV Cache is allocated" line, then the pools' total.
_SGL_SWA = re.compile(r"Use sliding window memory pool\. full_layer_tokens=(\d{1,15}), "
                      r"swa_layer_tokens=(\d{1,15})")  # fmt: skip
_SGL_SWA_USAGE = re.compile(rf"SWAKVPool mem usage: {_NUM} GB, swa size: \d{{1,15}}, full size")
_SGL_SCHED = re.compile(r"max_total_num_tokens=(\d{1,15}),.*?max_running_requests=(\d{1,15})")
_SGL_CONTEXT = re.compile(r"\bcontext_len=(\d{1,15})")
_SGL_ARGS = re.compile(r"server_args=ServerArgs\(")
_ARG = {
    "tp_size": re.compile(r"\btp_size=(\d{1,6})"),
    "page_size": re.compile(r"\bpage_size=(\d{1,6})"),
    "mem_fraction_static": re.compile(r"\bmem_fraction_static=([0-9.]{1,12})"),
    "kv_cache_dtype": re.compile(r"\bkv_cache_dtype='([a-z0-9_]{1,20})'"),
    "context_length": re.compile(r"\bcontext_length=(\d{1,15})"),
    "dp_size": re.compile(r"\bdp_size=(\d{1,6})"),
    "enable_dp_attention": re.compile(r"\benable_dp_attention=(True|False)"),
    "max_running_requests": re.compile(r"\bmax_running_requests=(\d{1,15})"),
    "max_mamba_cache_size": re.compile(r"\bmax_mamba_cache_size=(\d{1,15})"),
    "mamba_ssm_dtype": re.compile(r"\bmamba_ssm_dtype='([a-z0-9_]{1,20})'"),
    "mamba_full_memory_ratio": re.compile(r"\bmamba_full_memory_ratio=([0-9.]{1,12})"),
    "disable_radix_cache": re.compile(r"\bdisable_radix_cache=(True|False)"),
    "speculative_algorithm": re.compile(r"\bspeculative_algorithm='([A-Za-z0-9_]{1,20})'"),
    "max_total_tokens": re.compile(r"\bmax_total_tokens=(\d{1,15})"),
}
#: The ``server_args`` fields that only some releases have (mmcli.kv.sglang.log_releases).
_MARKERS = {name: re.compile(rf"\b{name}=") for name in ARGS_FIRST_IN}
_TRT_CPP = re.compile(
    rf"Memory usage when calculating max tokens in paged kv cache: total: {_NUM} GiB, "
    rf"available: {_NUM} GiB"
)
_TRT_TORCH = re.compile(
    rf"available KV cache memory when calculating max tokens: {_NUM} GiB.*?kv size(?: per "
    r"token)? is (\d{1,15})"
)
_TRT_BLOCKS = re.compile(r"Number of blocks in KV cache primary pool: (\d{1,15})")
_TRT_PER_BLOCK = re.compile(r"Number of tokens per block: (\d{1,9})")
#: The release line TensorRT-LLM prints when it is imported ("[TensorRT-LLM] TensorRT-LLM
#: version: 1.1.0"), bounded.
_TRT_VERSION = re.compile(r"TensorRT-LLM version: v?(\d{1,3}\.\d{1,3}(?:\.\d{1,4})?(?:rc\d{1,3})?)")
_TRT_ALLOC = re.compile(rf"Allocated {_NUM} GiB for max tokens in paged KV cache \((\d{{1,15}})\)")


@dataclass
class SglangLog:
    """The KV figures of an SGLang start-up log (None: not printed)."""

    tokens: int | None = None
    #: K (or, MLA, the latent) buffer size in GiB as printed (2 decimals), and whether MLA.
    k_gib: float | None = None
    mla: bool = False
    max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    context_len: int | None = None
    args: dict[str, str] = field(default_factory=dict)
    #: The dtype the KV line names (0.5.13 on), whether it is the post-capture "VA upper
    #: bound" line, and the ``server_args`` fields read that only some releases have.
    kv_line_dtype: str | None = None
    va_upper_bound: bool = False
    arg_markers: list[str] = field(default_factory=list)
    #: A hybrid model's state pool: its conv and SSM buffer sizes in GiB as printed (2
    #: decimals), its slots (0.5.4 prints them; 0.5.3 does not), and whether the line goes on
    #: with speculative decoding's intermediate caches.
    #: The hybrid sliding-window pool (0.5.8 on): the full and SWA layers' tokens, and each
    #: KV-sizing line as printed (from its text on), to be compared with the plan's.
    swa_full_tokens: int | None = None
    swa_tokens: int | None = None
    pool_lines: list[str] = field(default_factory=list)
    conv_gib: float | None = None
    ssm_gib: float | None = None
    mamba_slots: int | None = None
    mamba_intermediate: bool = False

    @property
    def has_mamba_line(self) -> bool:
        return self.conv_gib is not None

    @property
    def mamba_wording(self) -> str | None:
        """The release whose ``Mamba Cache is allocated`` wording the log has, or None."""
        if not self.has_mamba_line:
            return None
        return state_line_release(names_slots=self.mamba_slots is not None)


@dataclass
class TrtllmLog:
    """The KV figures of a TensorRT-LLM start-up log (None: not printed)."""

    #: "cpp" or "pytorch": which line gave the memory figure.
    path: str | None = None
    total_gib: float | None = None
    available_gib: float | None = None
    kv_size_per_token: int | None = None
    blocks: int | None = None
    tokens_per_block: int | None = None
    allocated_gib: float | None = None
    allocated_tokens: int | None = None
    #: The release its version line names (None: the log has none).
    release: str | None = None


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) <= MAX_LINE]


def parse_sglang_log(text: str) -> SglangLog | None:
    """The SGLang figures of ``text``, or None when it has no SGLang pool line."""
    log = SglangLog()
    for line in _lines(text):
        swa, pool = _SGL_SWA.search(line), _SGL_POOL.search(line)
        if kv := swa or _SGL_SWA_USAGE.search(line) or pool:
            log.pool_lines.append(line[kv.start() :].strip())
        if swa:
            log.swa_full_tokens, log.swa_tokens = int(swa[1]), int(swa[2])
        elif (m := pool) and log.tokens is None:
            log.va_upper_bound, log.kv_line_dtype = m[1] != "is allocated", m[2]
            log.tokens = int(m[3])
            log.mla = m[6] is not None
            log.k_gib = float(m[6] if log.mla else m[4])
        elif (m := _SGL_MAMBA.search(line)) and not log.has_mamba_line:
            log.mamba_slots = None if m[1] is None else int(m[1])
            log.conv_gib, log.ssm_gib = float(m[2]), float(m[3])
            log.mamba_intermediate = m[4] is not None
        elif m := _SGL_SCHED.search(line):
            log.max_total_num_tokens, log.max_running_requests = int(m[1]), int(m[2])
            if c := _SGL_CONTEXT.search(line):
                log.context_len = int(c[1])
        elif _SGL_ARGS.search(line) and not log.args:
            log.args = {k: a[1] for k, p in _ARG.items() if (a := p.search(line))}
            log.arg_markers = [k for k, p in _MARKERS.items() if p.search(line)]
    return log if log.tokens is not None else None


def parse_trtllm_log(text: str) -> TrtllmLog | None:
    """The TensorRT-LLM figures of ``text``, or None when it has no KV-sizing line."""
    log = TrtllmLog()
    for line in _lines(text):
        if m := _TRT_CPP.search(line):
            log.path, log.total_gib, log.available_gib = "cpp", float(m[1]), float(m[2])
        elif m := _TRT_TORCH.search(line):
            log.path, log.available_gib, log.kv_size_per_token = "pytorch", float(m[1]), int(m[2])
        elif m := _TRT_BLOCKS.search(line):
            log.blocks = int(m[1])
        elif m := _TRT_PER_BLOCK.search(line):
            log.tokens_per_block = int(m[1])
        elif m := _TRT_ALLOC.search(line):
            log.allocated_gib, log.allocated_tokens = float(m[1]), int(m[2])
        elif (m := _TRT_VERSION.search(line)) and log.release is None:
            log.release = m[1]
    return log if log.path is not None else None


def engine_log_of(head: bytes) -> SglangLog | TrtllmLog | None:
    """The SGLang or TensorRT-LLM figures of a log's first bytes, or None when it is neither
    (a vLLM log, say)."""
    text = head.decode("utf-8", errors="replace")
    return parse_sglang_log(text) or parse_trtllm_log(text)
