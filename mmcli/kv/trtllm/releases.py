"""The TensorRT-LLM releases mmcli mirrors, and what differs between them, as data.

Two code paths size the pool from a memory figure the engine logs:

* ``0.13`` — the C++ runtime serving a TensorRT engine (``KVCacheManager::
  calculateMaxNumBlocks``): ``maxTokens = int(fraction × available / bytes_per_token)`` with the
  fraction a C++ ``float`` (0.9f), then ``ceilDiv(maxTokens, tokensPerBlock)`` blocks. The
  engine's ``tokens_per_block`` is fixed at build time (``trtllm-build``'s default: 64). The log
  line ``Memory usage when calculating max tokens in paged kv cache: total: …, available: A
  GiB`` gives ``A`` — what ``--memory`` is.
* ``1.1`` — the PyTorch backend (``KvCacheCreator`` in ``_torch/pyexecutor/_util.py``, then
  ``KVCacheManager.calculate_max_num_blocks``): after a profiling run, ``budget = int((total −
  peak + tmp KV) × fraction)``, logged as ``available KV cache memory when calculating max
  tokens: B GiB`` — what ``--memory`` is here, the fraction already applied; ``max_tokens =
  budget // bytes_per_token`` and ``ceil(max_tokens / tokens_per_block)`` blocks, with
  ``KvCacheConfig.tokens_per_block`` 32 by default.

The facts, with their sources, are in docs/kv-share-engines.md.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mmcli.errors import InputError


@dataclass(frozen=True)
class TrtllmRules:
    """What one TensorRT-LLM release does that matters to its KV pool."""

    release: str
    #: "cpp" (TensorRT engine, C++ runtime) or "pytorch" (the PyTorch backend).
    path: str
    tokens_per_block: int
    #: The default free_gpu_memory_fraction as the code multiplies it.
    default_fraction: float
    #: Whether --memory is the figure before the fraction (C++) or after it (PyTorch).
    memory_before_fraction: bool
    mla: bool


#: 0.9f as a C++ float, widened to double as calculateMaxNumBlocks multiplies it.
_CPP_09: float = struct.unpack("f", struct.pack("f", 0.9))[0]

RELEASES: tuple[TrtllmRules, ...] = (
    TrtllmRules("0.13", "cpp", 64, _CPP_09, memory_before_fraction=True, mla=False),
    TrtllmRules("1.1", "pytorch", 32, 0.9, memory_before_fraction=False, mla=True),
)
DEFAULT_RELEASE = RELEASES[-1].release
_BY_NAME = {r.release: r for r in RELEASES}


@dataclass(frozen=True)
class UnreadRelease:
    """A TensorRT-LLM release series that exists but is not mirrored, and exactly why."""

    #: The major.minor every release of the series starts with (``1.2`` covers 1.2.0, 1.2.1).
    series: str
    #: The published releases of the series the refusal was checked against.
    known: str
    #: What was tried to read its KV sizing, and what failed.
    tried: str
    #: What its KV sizing changed that is therefore not mirrored.
    unread: str


_NO_SOURCE = (
    "pip finds no tensorrt-llm {known} wheel{sdist}, and no stored copy of "
    "tensorrt_llm/_torch/pyexecutor/_util.py, resource_manager.py or llmapi/llm_args.py is "
    "at a commit of the release (the GitHub repository is too large to fetch)"
)

#: Releases refused for want of their source; the provenance is in docs/kv-share-engines.md.
UNREAD: tuple[UnreadRelease, ...] = (
    UnreadRelease(
        "1.2",
        "1.2.0, 1.2.1",
        _NO_SOURCE.format(known="1.2.0 or 1.2.1", sdist=" (PyPI's sdist is a stub)"),
        "its per-window (VSWA) pools, max_gpu_total_bytes and use_kv_cache_manager_v2 were "
        "not read",
    ),
    UnreadRelease(
        "1.3",
        "1.3.0rc7",
        _NO_SOURCE.format(known="1.3.0rcN", sdist=""),
        "the KV cache manager V2 its pre-releases may pick by default "
        "(use_kv_cache_manager_v2 'auto', capacity from max_gpu_total_bytes) was not read",
    ),
)
_UNREAD = {u.series: u for u in UNREAD}


def release_of(path: str) -> TrtllmRules:
    """The newest release read whose pool is sized on ``path`` ("cpp" or "pytorch")."""
    return next(r for r in reversed(RELEASES) if r.path == path)


def trtllm_blocks_by_path() -> str:
    """``64 (0.13 engines) or 32 (1.1)``: each path's default tokens per block, for hints."""
    return " or ".join(
        f"{r.tokens_per_block} ({r.release}{' engines' if r.path == 'cpp' else ''})"
        for r in (release_of("cpp"), release_of("pytorch"))
    )


def trtllm_rules(release: str | None) -> TrtllmRules:
    """The rules of ``release`` (None: the newest mirrored); refuses a release not read."""
    if release is None:
        return _BY_NAME[DEFAULT_RELEASE]
    name = release.strip().lstrip("v")
    found = _BY_NAME.get(name) or _BY_NAME.get(".".join(name.split(".")[:2]))
    if found is None:
        read = ", ".join(r.release for r in RELEASES)
        unread = _UNREAD.get(".".join(name.split(".")[:2]))
        why = (
            "its KV-sizing source was not read"
            if unread is None
            else f"{unread.tried}: {unread.unread}"
        )
        raise InputError(
            f"--trtllm-version {release}: TensorRT-LLM {release} is not mirrored ({why})",
            hint=f"use one of the releases read: {read}",
        )
    return found


def trtllm_releases_help() -> str:
    """The --trtllm-version help: the releases read, then those refused, from the tables."""
    read = "; ".join(
        f"{r.release}: {'C++ runtime' if r.path == 'cpp' else 'PyTorch backend'}"
        + (", the default" if r.release == DEFAULT_RELEASE else "")
        for r in RELEASES
    )
    refused = ", ".join(f"{u.series}.x ({u.known})" for u in UNREAD)
    return (
        f"With --engine trtllm/all: the TensorRT-LLM release ({read}). Others are refused, "
        f"among them {refused}: their KV-sizing source was not read."
    )
