"""Read a vLLM start-up log: the release, the model, the KV figures and the engine arguments.

The lines read are those vLLM has printed since its V1 engine (0.7–0.34), wherever they sit in
a line: after a process prefix ``(EngineCore_DP0 pid=123)``, a stage tag ``[Stage-0]``, a
level and a timestamp ``INFO 05-12 10:00:00 [kv_cache_utils.py:864]``, with or without ANSI
colours. Only the head of a file is read (:data:`DEFAULT_MAX_BYTES`): the start-up report
comes first and serving logs grow without bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mmcli.errors import InputError
from mmcli.kv.explain.log_figures import FLOAT, check_figures
from mmcli.kv.explain.profiler_lines import MemoryProfile, parse_profile_line
from mmcli.kv.inputs.readers import read_head
from mmcli.text import printable

#: How much of a log file is read: the start-up report is in the first few hundred KiB.
DEFAULT_MAX_BYTES: Final = 16 * 2**20

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: The process label vLLM puts before a worker's line: "(EngineCore_DP0 pid=1)",
#: "(Worker_TP1 pid=7 rank=1)". Bounded and without nested repeats, so no line can make the
#: match backtrack; the pid= / rank= part is checked apart (:data:`_PROCESS`).
_PREFIX = re.compile(r"^\s*\((?P<label>[A-Za-z][^()]{0,200})\)")
_PROCESS = re.compile(r"\s(?:pid|rank)=\d")
_NUM = r"(\d{1,3}(?:,\d{3}){1,6}|\d{1,18})"
#: Longer lines are skipped: no KV line of a start-up is near it, and the work per line
#: stays bounded (the non-default-args line is a few KiB).
MAX_LINE = 65_536

_RELEASE = (
    re.compile(r"vLLM API server version (v?\d[\w.+-]*)"),
    re.compile(r"Initializing an? (?:V\d )?LLM engine \((v?\d[\w.+-]*)\)"),
    # From 0.15 (log_version_and_model, entrypoints/utils.py; serve/utils/api_utils.py from
    # 0.26, common/startup.py in 0.34): "vLLM server version X, serving model M", or the
    # logo's "█ ▀▄▀ █  version X" (bold escapes around X where the log is coloured).
    re.compile(r"vLLM server version (v?\d[\w.+-]*)"),
    re.compile(r"▀▄▀ █(?:\x1b?\[\d{1,3}m)?\s{1,8}version\s{1,8}(?:\x1b?\[\d{1,3}m)?(v?\d[\w.+-]*)"),
)
_AVAILABLE = re.compile(rf"Available KV cache memory: {FLOAT} GiB")
_TOKENS = re.compile(rf"GPU KV cache size: {_NUM} tokens")
_CONCURRENCY = re.compile(rf"Maximum concurrency for {_NUM} tokens per request: {FLOAT}x")
_BLOCKS = (
    re.compile(r"# GPU blocks: (\d+)"),
    re.compile(r"num_gpu_blocks is: (\d+)"),
)
_NON_DEFAULT = "non-default args: {"
_DICT_ITEM = re.compile(
    r"'(\w+)': ('(?:[^'\\]|\\.)*'|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?|True|False|None)"
)
_ENGINE_CONFIG = re.compile(r"LLM engine \([^()]{0,200}\) with config: (.*)")
_CONFIG_ITEM = re.compile(r"\b(\w+)=('[^']*'|[\w.:/+-]+)")
_MAX_LEN = re.compile(r"Using max model len (\d+)")
_CHUNKED = re.compile(r"max_num_batched_tokens=(\d+)")
_ASYNC = re.compile(r"Asynchronous scheduling is (enabled|disabled)")
_ARCH = re.compile(r"Resolved architecture: (\w+)")
_PADDING = re.compile(r"Add (\d+) padding layers")
_AUTO_FIT = re.compile(r"Auto-fit max_model_len: reduced from (\d+) to (\d+)")
_REFUSAL = re.compile(
    rf"max seq len \((\d{{1,18}})\), \({FLOAT} GiB KV cache is needed, which is larger than "
    rf"the available KV cache memory \({FLOAT} GiB\)"
)
_ESTIMATED = re.compile(r"estimated maximum model length is (\d+)")
_OLD_REFUSAL = re.compile(
    r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in "
    r"KV cache \((\d+)\)"
)

#: Engine arguments read from the non-default-args line and the engine config line.
ARG_KEYS: Final = (
    "model", "max_model_len", "tensor_parallel_size", "pipeline_parallel_size",
    "data_parallel_size", "kv_cache_dtype", "block_size", "max_num_batched_tokens",
    "max_num_seqs", "gpu_memory_utilization", "enable_prefix_caching", "num_gpu_blocks_override",
    "kv_cache_memory_bytes", "async_scheduling", "dtype", "calculate_kv_scales", "enforce_eager",
    "skip_mm_profiling", "mm_device_do_normalize", "language_model_only",
)  # fmt: skip
#: Engine arguments printed as a dict in the non-default-args line (read with their braces).
DICT_ARG_KEYS: Final = ("limit_mm_per_prompt", "mm_processor_kwargs")
#: The engine config line's names for some of them.
_CONFIG_NAMES: Final = {"max_seq_len": "max_model_len"}

Value = str | int | float | bool | None


@dataclass(frozen=True)
class RankMemory:
    """One "Available KV cache memory" line: the process that printed it, and the GiB."""

    label: str | None
    gib: float


@dataclass(frozen=True)
class Refusal:
    """The engine's start-up refusal: one request at max_model_len does not fit."""

    max_model_len: int
    needed_gib: float | None
    available_gib: float | None
    estimated_max_model_len: int | None


@dataclass
class VllmLog:
    """What a vLLM start-up log says about the KV cache (None: the log does not say)."""

    release: str | None = None
    model: str | None = None
    architecture: str | None = None
    available: list[RankMemory] = field(default_factory=list)
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    #: The max_model_len the concurrency line names.
    concurrency_max_model_len: int | None = None
    num_gpu_blocks: int | None = None
    #: Engine arguments (keys of :data:`ARG_KEYS`), from whichever line gave them.
    args: dict[str, Value] = field(default_factory=dict)
    async_scheduling: bool | None = None
    padding_layers: int | None = None
    auto_fit: tuple[int, int] | None = None
    refusal: Refusal | None = None
    #: The dict-valued arguments (:data:`DICT_ARG_KEYS`) the non-default-args line gives.
    dict_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The memory profiler's figures (:mod:`mmcli.kv.explain.profiler_lines`).
    profile: MemoryProfile = field(default_factory=MemoryProfile)
    bytes_read: int = 0
    truncated: bool = False
    #: How many lines gave something.
    lines_used: int = 0

    @property
    def max_model_len(self) -> int | None:
        if self.concurrency_max_model_len is not None:
            return self.concurrency_max_model_len
        value = self.args.get("max_model_len")
        if isinstance(value, int):
            return value
        return self.refusal.max_model_len if self.refusal is not None else None

    @property
    def min_available_gib(self) -> float | None:
        """The smallest rank's KV memory; V0's profiler figure when no V1 line gives it."""
        return min((r.gib for r in self.available), default=self.profile.profiled_kv_gib)

    def int_arg(self, key: str) -> int | None:
        value = self.args.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def str_arg(self, key: str) -> str | None:
        value = self.args.get(key)
        return value if isinstance(value, str) else None

    def has_kv_report(self) -> bool:
        return bool(
            self.available
            or self.kv_cache_tokens is not None
            or self.refusal is not None
            or self.profile.profiled_kv_gib is not None
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "release": self.release,
            "model": self.model,
            "architecture": self.architecture,
            "available_kv_cache_gib": [{"process": r.label, "gib": r.gib} for r in self.available],
            "kv_cache_tokens": self.kv_cache_tokens,
            "max_concurrency": self.max_concurrency,
            "max_model_len": self.max_model_len,
            "num_gpu_blocks": self.num_gpu_blocks,
            "args": dict(self.args),
            "async_scheduling": self.async_scheduling,
            "padding_layers": self.padding_layers,
            "auto_fit": list(self.auto_fit) if self.auto_fit else None,
            "refusal": None
            if self.refusal is None
            else {
                "max_model_len": self.refusal.max_model_len,
                "needed_gib": self.refusal.needed_gib,
                "available_gib": self.refusal.available_gib,
                "estimated_max_model_len": self.refusal.estimated_max_model_len,
            },
            "memory_profile": self.profile.to_json(),
            "bytes_read": self.bytes_read,
            "truncated": self.truncated,
        }


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _value(text: str) -> Value:
    """A Python literal as vLLM prints it in a dict or a config line."""
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1]
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text.removeprefix("torch.")


def _args_from(items: list[tuple[str, str]], args: dict[str, Value], *, override: bool) -> bool:
    found = False
    for key, raw in items:
        key = _CONFIG_NAMES.get(key, key)
        if key == "model_tag":
            key = "model"
        if key in ARG_KEYS and (override or key not in args):
            args[key] = _value(raw)
            found = True
    return found


def _dict_args(inner: str, into: dict[str, dict[str, Any]]) -> None:
    """The dict-valued arguments of a non-default-args line (one level of nesting: vLLM's
    ``{'image': {'count': 1}}`` forms), read as Python literals."""
    import ast

    for key in DICT_ARG_KEYS:
        if m := re.search(rf"'{key}': (\{{(?:[^{{}}]|\{{[^{{}}]*\}}){{0,2000}}\}})", inner):
            try:
                value = ast.literal_eval(m[1])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(value, dict):
                into[key] = value


def parse_vllm_log(text: str, name: str = "the log") -> VllmLog:
    """Everything :class:`VllmLog` holds that the text says; the first report wins.

    A KV line whose figure is malformed or beyond any engine is refused (:class:`InputError`
    naming ``name`` and the line number), never passed over.
    """
    log = VllmLog(bytes_read=len(text.encode("utf-8", "replace")))
    for number, raw_line in enumerate(text.splitlines(), start=1):
        if len(raw_line) > MAX_LINE:
            continue
        line = _ANSI.sub("", raw_line)
        if not line.strip():
            continue
        check_figures(line, number, name)
        if _parse_line(line, log):
            log.lines_used += 1
    if log.model is None:
        model = log.args.get("model")
        log.model = model if isinstance(model, str) else None
    return log


def _parse_line(line: str, log: VllmLog) -> bool:
    """Read one line into ``log``; whether it gave anything."""
    release = False
    if log.release is None:
        for pattern in _RELEASE:
            if m := pattern.search(line):
                log.release = m.group(1).removeprefix("v")
                release = True
                break
    return _parse_figures(line, log) or parse_profile_line(line, log.profile) or release


def _parse_figures(line: str, log: VllmLog) -> bool:
    if m := _AVAILABLE.search(line):
        prefix = _PREFIX.match(line)
        label = prefix.group("label") if prefix and _PROCESS.search(prefix.group("label")) else None
        log.available.append(RankMemory(label, float(m[1])))
        return True
    if m := _TOKENS.search(line):
        if log.kv_cache_tokens is None:
            log.kv_cache_tokens = _int(m[1])
        return True
    if m := _CONCURRENCY.search(line):
        if log.max_concurrency is None:
            log.concurrency_max_model_len = _int(m[1])
            log.max_concurrency = float(m[2])
        return True
    for pattern in _BLOCKS:
        if (m := pattern.search(line)) and log.num_gpu_blocks is None:
            log.num_gpu_blocks = int(m[1])
            return True
    if (start := line.find(_NON_DEFAULT)) >= 0 and (end := line.rfind("}")) > start:
        # What the user passed: it wins over derived lines.
        inner = line[start + len(_NON_DEFAULT) : end]
        _dict_args(inner, log.dict_args)
        return _args_from(_DICT_ITEM.findall(inner), log.args, override=True)
    if m := _ENGINE_CONFIG.search(line):
        used = _args_from(_CONFIG_ITEM.findall(m[1]), log.args, override=False)
        if model := re.search(r"\bmodel='([^']*)'", m[1]):
            log.model = log.model or model[1]
        return used
    if m := _MAX_LEN.search(line):
        log.args.setdefault("max_model_len", int(m[1]))
        return True
    if "Chunked prefill is enabled" in line and (m := _CHUNKED.search(line)):
        log.args.setdefault("max_num_batched_tokens", int(m[1]))
        return True
    if m := _ASYNC.search(line):
        log.async_scheduling = m[1] == "enabled"
        return True
    if m := _ARCH.search(line):
        log.architecture = m[1]
        return True
    if m := _PADDING.search(line):
        log.padding_layers = int(m[1])
        return True
    if m := _AUTO_FIT.search(line):
        log.auto_fit = (int(m[1]), int(m[2]))
        return True
    return _parse_refusal(line, log)


def _parse_refusal(line: str, log: VllmLog) -> bool:
    if log.refusal is not None:
        return False
    if m := _REFUSAL.search(line):
        estimated = _ESTIMATED.search(line)
        log.refusal = Refusal(
            int(m[1]), float(m[2]), float(m[3]), int(estimated[1]) if estimated else None
        )
        return True
    if m := _OLD_REFUSAL.search(line):
        log.refusal = Refusal(int(m[1]), None, None, int(m[2]))
        return True
    return False


def read_vllm_log(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> VllmLog:
    """Parse the first ``max_bytes`` of the log file at ``path`` (see :func:`parse_vllm_log`)."""
    if max_bytes <= 0:
        raise InputError(
            f"the log's read limit must be positive, got {max_bytes}",
            hint="give --max-mib 1 or more",
        )
    head, truncated = read_head(Path(path), max_bytes)
    return vllm_log_of(head, truncated, str(path))


def vllm_log_of(head: bytes, truncated: bool, name: str) -> VllmLog:
    """Parse a log's first bytes (``truncated``: the log went on) as :func:`read_vllm_log`."""
    path = printable(name)
    if truncated:  # do not parse half a line
        head = head[: head.rfind(b"\n") + 1] or head
    log = parse_vllm_log(head.decode("utf-8", errors="replace"), path)
    log.bytes_read = len(head)
    log.truncated = truncated
    if not log.has_kv_report():
        read = f"the first {len(head):,} bytes of " if truncated else ""
        raise InputError(
            f"{path}: {read}the log holds no KV-cache report (no 'Available KV cache memory', "
            "'GPU KV cache size' or start-up refusal line)",
            hint="give the log of a vLLM V1 start-up (vllm serve or LLM(...)) up to the line "
            "'GPU KV cache size'",
        )
    return log


def startup_lines(
    *,
    release: str,
    model: str,
    available_gib: float,
    kv_cache_tokens: int,
    max_model_len: int,
    max_concurrency: float,
    args: dict[str, Value] | None = None,
) -> list[str]:
    """The KV lines a vLLM start-up prints, in its wording (for tests and examples)."""
    stamp = "INFO 01-01 00:00:00"
    core = "(EngineCore_DP0 pid=1)"
    shown = {"model_tag": model, "model": model, **(args or {})}
    return [
        f"(APIServer pid=1) {stamp} [api_server.py:1] vLLM API server version {release}",
        f"(APIServer pid=1) {stamp} [utils.py:1] non-default args: {shown!r}",
        f"{core} {stamp} [gpu_worker.py:1] Available KV cache memory: {available_gib:.2f} GiB",
        f"{core} {stamp} [kv_cache_utils.py:1] GPU KV cache size: {kv_cache_tokens:,} tokens",
        f"{core} {stamp} [kv_cache_utils.py:1] Maximum concurrency for {max_model_len:,} "
        f"tokens per request: {max_concurrency:.2f}x",
    ]
