"""``kv-share plan --from-log LOG``: replan a run from what its vLLM start-up log printed.

The KV memory is the log's "Available KV cache memory" (the smallest rank's, as the engine
sizes every rank by it; V0's profiler "kv_cache_size" where no V1 line gives it), taken exactly
as ``--memory``. The release and the settings the log shows (the non-default args, the engine
config and "Using max model len" lines) fill the request's fields; an option given on the
command line that the log sets otherwise is refused, naming both.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Final

from mmcli.errors import InputError
from mmcli.text import printable, quoted

if TYPE_CHECKING:
    from mmcli.kv.explain.vllm_log import VllmLog
    from mmcli.kv.request import PlanRequest

#: Engine arguments a log may show → the request field each sets.
LOG_FIELDS: Final = {
    "max_model_len": "max_model_len",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "block_size": "block_size",
    "kv_cache_dtype": "kv_cache_dtype",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "enable_prefix_caching": "enable_prefix_caching",
    "enforce_eager": "enforce_eager",
}


def log_settings(log: VllmLog) -> dict[str, object]:
    """The request fields the log sets: the memory, the release and the settings it shows."""
    memory = log.min_available_gib
    if memory is None:
        raise InputError(
            "the log gives no 'Available KV cache memory' (a refusal's is not the memory of a "
            "run that started)",
            hint="give the log of a start-up that reached 'Available KV cache memory', or plan "
            "with --memory",
        )
    settings: dict[str, object] = {"memory": f"{memory}GiB"}
    if log.release is not None:
        settings["vllm_version"] = log.release
    for key, name in LOG_FIELDS.items():
        value = log.max_model_len if key == "max_model_len" else log.args.get(key)
        if value is None:
            continue
        expected = bool if name in ("enable_prefix_caching", "enforce_eager") else None
        if expected is bool and not isinstance(value, bool):
            continue
        if name == "kv_cache_dtype" and not isinstance(value, str):
            continue
        if expected is None and name != "kv_cache_dtype" and not _is_int(value):
            continue
        settings[name] = value
    return settings


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: Options that give the KV memory another way: refused beside --from-log.
_MEMORY_OPTIONS: Final = (
    ("memory", "--memory"),
    ("gpu", "--gpu"),
    ("kv_cache_memory_bytes", "--kv-cache-memory-bytes"),
    ("sweep", "--sweep"),
    ("serve", "--serve"),
)


def apply_log(request: PlanRequest) -> VllmLog:
    """Read the request's log and set the fields it gives; a conflicting option is refused."""
    from mmcli.kv.explain.vllm_log import read_vllm_log

    assert request.from_log is not None
    name = printable(str(request.from_log))
    for field_name, option in _MEMORY_OPTIONS:
        if getattr(request, field_name) is not None:
            raise InputError(
                f"--from-log and {option} both give the run: the log's KV memory is the plan's",
                hint=f"drop {option}, or plan without --from-log",
            )
    log = read_vllm_log(Path(request.from_log))
    defaults = {f.name: f.default for f in fields(request) if f.init}
    for key, value in log_settings(log).items():
        given = getattr(request, key)
        if given != defaults[key] and str(given) != str(value):
            option = f"--{key.replace('_', '-')}"
            raise InputError(
                f"{option} {quoted(str(given))} and the log {name} ({key} "
                f"{quoted(str(value))}) disagree",
                hint=f"drop {option} to replan the logged run, or plan without --from-log",
            )
        object.__setattr__(request, key, value)
    if request.model in ("", None):
        if log.model is None:
            raise InputError(
                f"the log {name} names no model", hint="give MODEL: kv-share plan MODEL --from-log"
            )
        object.__setattr__(request, "model", log.model)
    return log
