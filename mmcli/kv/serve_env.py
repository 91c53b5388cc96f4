"""The environment assignments before a ``vllm serve`` line (``VLLM_USE_FLASHINFER_SAMPLER=0
vllm serve MODEL …``), read as vLLM reads its variables (vllm/envs.py).

A variable that changes KV memory the planner models is applied (under its own name, and to
the PlanRequest field it sets); one that changes it in a way not modelled is refused, naming
it; vLLM's logging, networking and telemetry variables and every variable outside vLLM's
``VLLM_`` namespace (``CUDA_VISIBLE_DEVICES``, ``HF_TOKEN``, ``NCCL_…``) are listed as not
affecting the plan; any other ``VLLM_`` variable is refused, since mmcli cannot tell what it
changes.
"""

from __future__ import annotations

import re
from typing import Any, Final

from mmcli.errors import InputError
from mmcli.text import quoted

#: ``NAME=VALUE`` as a POSIX shell reads an assignment before a command.
ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")

#: Variable → the PlanRequest field it sets; each is read as vLLM's ``bool(int(value))``
#: (envs.py), but the layer partition, which is text.
APPLIED: Final = {
    "VLLM_USE_FLASHINFER_SAMPLER": "flashinfer_sampler",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "allow_long_max_model_len",
    "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "chunked_local_attn_hybrid",
    "VLLM_PP_LAYER_PARTITION": "pp_layer_partition",
}

#: Variables that change the KV memory in ways the planner does not model.
REFUSED: Final = {
    "VLLM_USE_V2_MODEL_RUNNER": "the model runner chosen by hand is not modelled",
    "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "the CUDA-graph estimate's switch is a "
    "release default here",
    "VLLM_USE_V1": "the engine chosen by hand is not modelled",
    "VLLM_ATTENTION_BACKEND": "the attention backend sets the block size and the page layout",
    "VLLM_KV_CACHE_LAYOUT": "it changes the KV cache's layout",
    "VLLM_ROCM_USE_AITER": "AITER's kernels (and sampler) are not modelled",
}

#: vLLM's variables that only log, listen, time out or report usage.
NOT_AFFECTING: Final = frozenset(
    {
        "VLLM_LOGGING_LEVEL",
        "VLLM_CONFIGURE_LOGGING",
        "VLLM_LOGGING_CONFIG_PATH",
        "VLLM_LOGGING_PREFIX",
        "VLLM_LOG_STATS_INTERVAL",
        "VLLM_WORKER_MULTIPROC_METHOD",
        "VLLM_HOST_IP",
        "VLLM_PORT",
        "VLLM_API_KEY",
        "VLLM_NO_USAGE_STATS",
        "VLLM_DO_NOT_TRACK",
        "VLLM_CACHE_ROOT",
        "VLLM_CONFIG_ROOT",
        "VLLM_ENGINE_ITERATION_TIMEOUT_S",
        "VLLM_RPC_TIMEOUT",
        "VLLM_HTTP_TIMEOUT_KEEP_ALIVE",
        "VLLM_SERVER_DEV_MODE",
        "VLLM_TORCH_PROFILER_DIR",
    }
)


def split_env(tokens: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """The leading ``NAME=VALUE`` assignments (and an ``env`` before them) and the rest."""
    rest = tokens[1:] if tokens[:1] == ["env"] else tokens
    assignments = []
    while rest and ASSIGNMENT.match(rest[0]):
        name, value = rest[0].split("=", 1)
        assignments.append((name, value))
        rest = rest[1:]
    return assignments, rest if assignments else tokens


def read_env(assignments: list[tuple[str, str]]) -> tuple[dict[str, Any], list[str]]:
    """``({variable: value applied}, [variables not affecting the plan])``; raises
    :class:`InputError` for a variable refused or a value vLLM cannot read."""
    applied: dict[str, Any] = {}
    others: list[str] = []
    for name, value in assignments:
        if name in REFUSED:
            raise InputError(
                f"--serve: {name} changes the KV memory in a way not planned ({REFUSED[name]})",
                hint=f"plan without {name}",
            )
        if name in APPLIED:
            applied[name] = value if name == "VLLM_PP_LAYER_PARTITION" else _flag(name, value)
        elif name.startswith("VLLM_") and name not in NOT_AFFECTING:
            raise InputError(
                f"--serve: {name} is not among the variables mmcli reads, so it cannot tell "
                "whether it changes the KV memory",
                hint=f"plan without {name} (the variables applied: {', '.join(APPLIED)})",
            )
        else:
            others.append(name)
    return applied, others


def _flag(name: str, value: str) -> bool:
    """vLLM's ``bool(int(os.environ[name]))``: an integer, 0 for off."""
    try:
        return bool(int(value))
    except ValueError:
        raise InputError(
            f"--serve: {name}={quoted(value)} is not an integer (vLLM reads bool(int(…)))",
            hint=f"{name}=1 or {name}=0",
        ) from None


def request_fields(applied: dict[str, Any]) -> dict[str, Any]:
    """The PlanRequest fields the applied variables among ``applied`` set."""
    return {APPLIED[name]: value for name, value in applied.items() if name in APPLIED}
