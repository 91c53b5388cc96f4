"""A ``vllm serve`` command line read as that release's argument parser reads it.

:func:`parse_serve_line` takes the line (tokens, or text split as a shell splits it) and the
release whose flags to read (``--vllm-version``): equals and space forms, aliases (``-tp``),
``--x`` / ``--no-x`` pairs, JSON values and dotted keys, ``-O`` forms, and ``NAME=VALUE``
assignments before it (:mod:`mmcli.kv.serve_env`). What changes KV memory is applied under
vLLM's names, every other known flag listed as not affecting the plan, the rest refused (an
unknown flag naming the release that had it, a bad value, a change not modelled).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import takewhile
from typing import Any

from mmcli.errors import InputError
from mmcli.kv import serve_env
from mmcli.kv.serve_flags import (
    Flag,
    flags_release,
    index,
    is_argument,
    optimization_form,
    where_else,
)
from mmcli.text import quoted

#: vLLM setting (the flag's long name in snake case) → the PlanRequest field it sets and how its
#: text is read: ``length`` as vLLM's ``human_readable_int_or_auto`` (``32k``; ``auto`` and
#: ``-1`` are -1), ``human`` as its ``human_readable_int`` (``8k``, ``20G``).
APPLIED: dict[str, tuple[str, str]] = {
    "model": ("model", "str"),
    "revision": ("revision", "str"),
    "tensor_parallel_size": ("tensor_parallel_size", "int"),
    "pipeline_parallel_size": ("pipeline_parallel_size", "int"),
    "data_parallel_size": ("data_parallel_size", "int"),
    "max_model_len": ("max_model_len", "length"),
    "max_num_batched_tokens": ("max_num_batched_tokens", "human"),
    "max_num_seqs": ("max_num_seqs", "int"),
    "kv_cache_dtype": ("kv_cache_dtype", "str"),
    "block_size": ("block_size", "int"),
    "enable_prefix_caching": ("enable_prefix_caching", "bool"),
    "speculative_config": ("speculative_config", "json"),
    "enforce_eager": ("enforce_eager", "bool"),
    "skip_mm_profiling": ("skip_mm_profiling", "bool"),
    "limit_mm_per_prompt": ("limit_mm_per_prompt", "limits"),
    "mm_processor_kwargs": ("mm_processor_kwargs", "json"),
    "mm_device_do_normalize": ("mm_device_do_normalize", "bool"),
    "language_model_only": ("language_model_only", "bool"),
    "gpu_memory_utilization": ("gpu_memory_utilization", "float"),
    "kv_cache_memory_bytes": ("kv_cache_memory_bytes", "human"),
    "num_gpu_blocks_override": ("num_gpu_blocks_override", "int"),
    "mamba_ssm_cache_dtype": ("mamba_ssm_cache_dtype", "str"),
    "disable_hybrid_kv_cache_manager": ("disable_hybrid_kv_cache_manager", "bool"),
    "async_scheduling": ("async_scheduling", "bool"),
}

#: Settings that change the KV memory or the model's layers in ways the planner does not model.
REFUSED: dict[str, str] = {
    "kv_transfer_config": "a KV connector (offloading, P/D transfer) changes where KV lives",
    "kv_offloading_size": "KV offloading to CPU memory",
    "kv_offloading_backend": "KV offloading to CPU memory",
    "decode_context_parallel_size": "decode context parallelism splits the KV cache",
    "prefill_context_parallel_size": "prefill context parallelism splits the KV cache",
    "dcp_kv_cache_interleave_size": "context parallelism splits the KV cache",
    "cp_kv_cache_interleave_size": "context parallelism splits the KV cache",
    "hf_overrides": "it changes the model's config",
    "hf_config_path": "it changes the model's config",
    "rope_scaling": "it changes the model's length",
    "rope_theta": "it changes the model's config",
    "mamba_block_size": "it changes the SSM state blocks",
    "mamba_cache_mode": "it changes the SSM states kept",
    "enable_mamba_shared_prefix_checkpoint": "it changes the SSM states kept",
    "enable_mamba_fine_grained_prefix_cache": "it changes the SSM states kept",
    "use_replayssm": "it changes the SSM states kept",
    "replayssm_buffer_len": "it changes the SSM states kept",
    "kv_cache_dtype_skip_layers": "per-layer KV dtypes",
    "enable_extensible_kv_cache": "an extensible KV cache",
    "num_lookahead_slots": "lookahead slots reserve blocks",
    "config": "a YAML file of flags is not read",
    "mm_encoder_only": "an encoder-only instance (disaggregated encoding) holds no KV cache",
}

#: Settings that change the weights' memory: they matter when ``--gpu`` derives the KV memory
#: from the weights mmcli reads (give ``--weights`` the size they load to).
WEIGHTS = frozenset({"quantization", "cpu_offload_gb", "offload_backend", "load_format", "dtype"})
#: Settings that change the CUDA graphs captured (their sizes, their mode, the compilation
#: level): they matter when ``--gpu`` estimates the graphs' memory from the release defaults.
GRAPHS = frozenset(
    {
        "compilation_config",
        "optimization_level",
        "max_cudagraph_capture_size",
        "cuda_graph_sizes",
        "max_seq_len_to_capture",
    }
)

#: Settings that change the multimodal encoder's forward in the profile run (its sharding, its
#: attention kernel): they matter when ``--gpu`` estimates the encoder profile.
ENCODER = frozenset({"mm_encoder_tp_mode", "mm_encoder_attn_backend", "mm_encoder_attn_dtype"})

_DTYPES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32",
           "float32": "float32"}  # fmt: skip
_PREFIXES = (("vllm", "serve"), ("python", "-m", "vllm.entrypoints.openai.api_server"),
             ("python3", "-m", "vllm.entrypoints.openai.api_server"))  # fmt: skip


@dataclass(frozen=True)
class ServeArgs:
    """A ``vllm serve`` line, read: its model, the settings applied (vLLM's names), the flags
    that do not affect the plan, the flags that change the weights, and the flag of each."""

    release: str
    model: str | None = None
    applied: dict[str, Any] = field(default_factory=dict)
    not_affecting: tuple[str, ...] = ()
    weights: tuple[str, ...] = ()
    #: vLLM setting → the flag as the line wrote it.
    sources: dict[str, str] = field(default_factory=dict)
    #: The values of the :data:`ENCODER` settings the line sets.
    encoder_values: dict[str, Any] = field(default_factory=dict)

    @property
    def encoder(self) -> tuple[str, ...]:
        """The flags that change the encoder's forward (see :data:`ENCODER`); a tensor-parallel
        encoder (``--mm-encoder-tp-mode weights``, the default) is the one estimated."""
        return tuple(
            flag
            for setting, flag in self.sources.items()
            if setting in ENCODER and self.encoder_values.get(setting) != "weights"
        )

    @property
    def graphs(self) -> tuple[str, ...]:
        """The flags that change the CUDA graphs captured (see :data:`GRAPHS`)."""
        return tuple(flag for setting, flag in self.sources.items() if setting in GRAPHS)

    def request_fields(self) -> dict[str, Any]:
        """The PlanRequest fields the applied settings set."""
        out = {APPLIED[name][0]: value for name, value in self.applied.items() if name in APPLIED}
        out |= serve_env.request_fields(self.applied)
        if "dtype" in self.applied and "kv_cache_dtype" not in self.applied:
            out["kv_cache_dtype"] = self.applied["dtype"]  # "auto" KV follows --dtype
        return out

    def to_json(self) -> dict[str, Any]:
        return {"release": self.release, "applied": dict(self.applied),
                "not_affecting": list(self.not_affecting)}  # fmt: skip


def split_line(line: str | Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """The line's ``NAME=VALUE`` assignments and its shell tokens after them, less vllm serve."""
    if isinstance(line, str):
        try:
            tokens = shlex.split(line)
        except ValueError as err:
            raise InputError(
                f"--serve: cannot split the line as a shell would ({err})",
                hint='close the quotes, e.g. --speculative-config \'{"method": "mtp"}\'',
            ) from None
    else:
        tokens = list(line)
    assignments, rest = serve_env.split_env(tokens)
    for prefix in _PREFIXES:
        if tuple(rest[: len(prefix)]) == prefix:
            return assignments, rest[len(prefix) :]
    return assignments, rest


def _spelling(token: str) -> tuple[str, str | None, list[str]]:
    """``--max_model_len=8k`` → (``--max-model-len``, ``8k``, []); dotted keys split off."""
    value = None
    if "=" in token:
        token, value = token.split("=", 1)
    name, *keys = token.split(".")
    if name.startswith("--"):
        name = name.replace("_", "-")
    return name, value, keys


def parse_serve_line(line: str | Sequence[str], release: str | None = None) -> ServeArgs:
    """Read a ``vllm serve`` line with the flags of ``release`` (``--vllm-version``; None: the
    newest mirrored). Raises :class:`InputError` for what cannot be planned."""
    from mmcli.kv.releases import rules_for

    mirrored = flags_release(release)
    dotted_cc = rules_for(release).dotted_o_cc
    spelled = index(mirrored)
    assignments, tokens = split_line(line)
    env, env_others = serve_env.read_env(assignments)
    model: str | None = None
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("-") or token == "-":
            if model is not None:
                raise InputError(
                    f"--serve: a second model argument {quoted(token)} (the model is "
                    f"{quoted(model)})",
                    hint="vllm serve takes one model; flags start with --",
                )
            model = token
            continue
        name, value, keys = _spelling(token)
        if name.startswith("-O") and not name.startswith("--"):
            form = optimization_form(token, name, value, keys, tokens, i, spelled, dotted_cc)
            name, value, keys, i = form
        negated = False
        flag: Flag | None = spelled.get(name)
        if flag is None and name.startswith("--no-"):
            flag = spelled.get("--" + name[5:])
            negated = flag is not None and flag.kind == "bool"
            flag = flag if negated else None
        if flag is None:
            raise InputError(
                f"--serve: {where_else(name, mirrored)}; the line is read with the flags "
                f"of vLLM {mirrored}",
                hint="drop the flag, or read the line as its release does: --vllm-version",
            )
        if flag.kind in ("bool", "flag"):
            if value is not None or keys:
                raise InputError(
                    f"--serve: {name} takes no value (got {quoted(token)})",
                    hint=f"write {name}" + (f" or --no-{name[2:]}" if flag.kind == "bool" else ""),
                )
            parsed: Any = not negated
        else:
            taken: list[str] = []
            if value is None and flag.kind == "optional":
                if i < len(tokens) and not tokens[i].startswith("-"):
                    value, i = tokens[i], i + 1
            elif value is None:  # a list (nargs "+") takes every argument up to the next flag
                many = flag.kind == "list"
                taken = list(takewhile(is_argument, tokens[i:])) if many else tokens[i : i + 1]
                if not taken:
                    raise InputError(f"--serve: {name} needs a value", hint=f"{name} VALUE")
                value, i = taken[0], i + len(taken)
            parsed = True if value is None else _json_value(flag, name, value, keys)
            if flag.kind == "list":
                parsed = [_scalar(v) for v in taken or [str(value)]]
        setting = flag.name[2:].replace("-", "_") if flag.name.startswith("--") else flag.dest
        if keys and isinstance(values.get(setting), dict):
            _merge(values[setting], parsed)
        else:
            values[setting] = parsed
        sources[setting] = name
    read = _classify(mirrored, model, values, sources, release)
    others, named = (*env_others, *read.not_affecting), {name: name for name in env}
    return replace(
        read, applied=read.applied | env, not_affecting=others, sources=read.sources | named
    )


def _json_value(flag: Flag, name: str, value: str, keys: list[str]) -> Any:
    if keys:  # --compilation-config.mode 3: {"mode": 3}
        if flag.kind != "json":
            raise InputError(f"--serve: {name} takes no dotted keys", hint=f"{name} VALUE")
        leaf: Any = _scalar(value)
        for key in reversed(keys):
            leaf = {key: leaf}
        return leaf
    if flag.kind != "json":
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise InputError(
            f"--serve: {name} takes JSON, got {quoted(value)}",
            hint=f"quote the object, e.g. {name} '{{\"key\": 1}}'",
        ) from None


def _scalar(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _classify(
    release: str,
    model: str | None,
    values: dict[str, Any],
    sources: dict[str, str],
    version: str | None,
) -> ServeArgs:
    applied: dict[str, Any] = {}
    others: list[str] = []
    weights: list[str] = []
    for setting, raw in values.items():
        flag = sources[setting]
        if setting in REFUSED:
            raise InputError(
                f"--serve: {flag} changes the KV memory in a way not planned ({REFUSED[setting]})",
                hint=f"plan without {flag}",
            )
        if setting == "enable_chunked_prefill" and raw is False:
            raise InputError(
                f"--serve: {flag} (chunked prefill off) is not planned",
                hint="plan with chunked prefill on (vLLM's default), or drop the flag",
            )
        if setting == "model":
            model = _model(model, raw, flag)
        elif setting in APPLIED:
            applied[setting] = _convert(setting, raw, flag, version)
        elif setting == "dtype":
            weights.append(flag)
            if raw != "auto":
                applied["dtype"] = _dtype(raw, flag)
        else:
            (weights if setting in WEIGHTS else others).append(flag)
            if setting in WEIGHTS:
                applied[setting] = raw
    encoder = {k: values[k] for k in ENCODER if k in values}
    return ServeArgs(release, model, applied, tuple(others), tuple(weights), dict(sources), encoder)


def _model(model: str | None, value: Any, flag: str) -> str:
    if model is not None and model != value:
        raise InputError(
            f"--serve: two models, {quoted(model)} and {flag} {quoted(str(value))}",
            hint="name the model once",
        )
    return str(value)


def _dtype(value: Any, flag: str) -> str:
    if value not in _DTYPES:
        raise InputError(
            f"--serve: {flag} {quoted(str(value))} is not planned",
            hint="auto, bfloat16, float16 (half) or float32 (float)",
        )
    return _DTYPES[value]


def _convert(setting: str, raw: Any, flag: str, version: str | None) -> Any:
    from mmcli.kv.engine.max_len import human_readable_int, parse_max_model_len

    kind = APPLIED[setting][1]
    if kind == "limits":
        from mmcli.kv.whatif.encoder import parse_limits

        return parse_limits(raw, flag)
    try:
        if kind == "length" and not isinstance(raw, bool):
            length = parse_max_model_len(str(raw), version)
            return -1 if length == "auto" else length
        if kind == "human" and not isinstance(raw, bool):
            return human_readable_int(str(raw), flag, version)
    except InputError as err:
        raise InputError(f"--serve: {err}", hint=err.hint) from None
    if kind in ("str", "json") or isinstance(raw, bool):
        if kind == "bool" and not isinstance(raw, bool):
            raise InputError(f"--serve: {flag} takes no value", hint=f"write {flag}")
        if kind == "json" and not isinstance(raw, dict):
            raise InputError(f"--serve: {flag} takes a JSON object", hint=f"{flag} '{{…}}'")
        return raw
    text = str(raw).strip()
    try:
        return int(text) if kind == "int" else float(text)
    except ValueError:
        expected = "an integer" if kind == "int" else "a number"
        raise InputError(
            f"--serve: {flag} takes {expected}, got {quoted(text)}",
            hint=f"e.g. {flag} {'2' if kind == 'int' else '0.9'}",
        ) from None


def serve_option(text: str) -> str:
    """``--serve TEXT``: the line itself, ``@path`` a file holding it, ``-`` standard input."""
    import sys
    from pathlib import Path

    if text == "-":
        return sys.stdin.read()
    if text.startswith("@"):
        try:
            return Path(text[1:]).read_text()
        except OSError as err:
            raise InputError(
                f"--serve: cannot read {quoted(text[1:])} ({err.strerror})",
                hint="--serve @FILE names a file holding the vllm serve line",
            ) from None
    return text
