"""Start one vLLM engine for one case and write down the KV cache it built.

Usage: python engine_case.py CASE.json RESULT.json (run by run_engine.py, one process per
case, in the venv that has vLLM). CASE.json holds ``config`` (a Hugging Face config.json,
written to a temporary folder: ``load_format="dummy"`` needs no weights and
``skip_tokenizer_init`` no tokenizer) and ``engine_args`` (keyword arguments of ``vllm.LLM``).

What is recorded comes from the engine's own objects, not from its arithmetic redone here:
the arguments and results of ``get_kv_cache_configs`` (the per-layer specs the model
declared, the KV memory the worker reported, the KV cache config it built) are captured by
wrapping that function where ``vllm/v1/engine/core.py`` calls it; the capacity is the
engine's ``cache_config.kv_cache_size_tokens`` / ``kv_cache_max_concurrency`` (run_engine.py
also keeps the log line it printed: "CPU KV cache size: …, Maximum concurrency …").
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def jsonable(value: Any) -> Any:
    """A JSON value for a field of an engine object (dtypes and enums as their names)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return jsonable(value.value) if isinstance(value.value, str | int) else value.name
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return spec_json(value)
    text = str(value)
    return text.removeprefix("torch.")


def spec_json(spec: Any) -> dict[str, Any]:
    """A KV-cache spec: its class, its fields and its page size as the engine computes it."""
    doc: dict[str, Any] = {"type": type(spec).__name__}
    for field in dataclasses.fields(spec):
        doc[field.name] = jsonable(getattr(spec, field.name))
    for prop in ("page_size_bytes", "real_page_size_bytes"):
        try:
            doc[prop] = int(getattr(spec, prop))
        except Exception:  # noqa: BLE001 - a property a spec type does not answer
            continue
    return doc


def config_json(config: Any) -> dict[str, Any]:
    """A KVCacheConfig: block count, tensors and groups (layer names and spec)."""
    return {
        "num_blocks": config.num_blocks,
        "kv_cache_tensors": [
            {"size": t.size, "shared_by": list(getattr(t, "layers", None) or t.shared_by)}
            for t in config.kv_cache_tensors
        ],
        "kv_cache_groups": [
            {"layer_names": list(g.layer_names), "kv_cache_spec": spec_json(g.kv_cache_spec)}
            for g in config.kv_cache_groups
        ],
    }


def run(case: dict[str, Any], folder: Path) -> dict[str, Any]:
    (folder / "config.json").write_text(json.dumps(case["config"], indent=1))
    import vllm
    import vllm.v1.engine.core as core

    captured: dict[str, Any] = {}
    real = core.get_kv_cache_configs

    def recording(vllm_config: Any, specs: Any, memory: Any) -> Any:
        captured["planner_input"] = {
            "block_size": vllm_config.cache_config.block_size,
            "max_model_len": vllm_config.model_config.max_model_len,
            "available_memory": list(memory),
            "layer_specs": {name: spec_json(s) for name, s in specs[0].items()},
        }
        configs = real(vllm_config, specs, memory)
        captured["kv_cache_config"] = config_json(configs[0])
        return configs

    core.get_kv_cache_configs = recording
    started = time.monotonic()
    llm = vllm.LLM(model=str(folder), **case["engine_args"])
    elapsed = time.monotonic() - started
    config = llm.llm_engine.vllm_config
    # {sharing layer: target} as the model runner applied it (Gemma 3n / Gemma 4).
    runner = llm.llm_engine.model_executor.driver_worker.worker.model_runner
    shared = dict(getattr(runner, "shared_kv_cache_layers", {}))
    cache, sched, model = config.cache_config, config.scheduler_config, config.model_config
    return {
        "status": "ran",
        "vllm_version": vllm.__version__,
        "engine": {
            "block_size": cache.block_size,
            "cache_dtype": str(cache.cache_dtype),
            "enable_prefix_caching": bool(cache.enable_prefix_caching),
            "mamba_cache_mode": jsonable(getattr(cache, "mamba_cache_mode", None)),
            "mamba_ssm_cache_dtype": str(cache.mamba_ssm_cache_dtype),
            "kv_cache_memory_bytes": cache.kv_cache_memory_bytes,
            "max_model_len": model.max_model_len,
            "dtype": jsonable(model.dtype),
            "max_num_batched_tokens": sched.max_num_batched_tokens,
            "max_num_seqs": sched.max_num_seqs,
            "async_scheduling": bool(sched.async_scheduling),
            "num_gpu_blocks": cache.num_gpu_blocks,
        },
        **captured,
        "shared_kv_cache_layers": shared,
        "reported": {
            "kv_cache_size_tokens": getattr(cache, "kv_cache_size_tokens", None),
            "max_concurrency": getattr(cache, "kv_cache_max_concurrency", None),
        },
        "start_seconds": round(elapsed, 1),
    }


def main() -> int:
    case = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="mmcli-engine-") as tmp:
        os.environ.setdefault("VLLM_CACHE_ROOT", str(Path(tmp) / "cache"))
        model = Path(tmp) / "model"
        model.mkdir()
        result = run(case, model)
    out.write_text(json.dumps(result, indent=1, sort_keys=True))
    # Leave at once: the engine's shutdown of a single-process LLM can hang on exit.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
