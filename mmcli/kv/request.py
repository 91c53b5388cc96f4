"""Every input of a KV plan as one value: :class:`PlanRequest`, which ``kv-share plan`` builds
from its command line and a library user builds in code (``plan_run(PlanRequest(...))``).

Its fields take what the command line takes, under the engine's own names (vLLM's where vLLM
has the setting, e.g. ``gpu_memory_utilization``), as text where the command line reads text
(``memory="20GiB"``, ``max_model_len="128k"``) or as numbers. Whatever can be checked without
the model is checked when the request is built, each error naming the option it comes from,
and what that reading resolved is kept in :attr:`PlanRequest.resolved`; the vLLM planner's
:class:`~mmcli.kv.options.PlanOptions` are made in :func:`mmcli.kv.run.plan_run`, with the
``--gpu`` budget and the batch default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mmcli.errors import InputError
from mmcli.kv.release_range import refuse_unmirrored_release
from mmcli.kv.side_by_side import EngineArgs, refuse_vllm_only
from mmcli.text import quoted

if TYPE_CHECKING:
    from mmcli.kv.serve import ServeArgs
    from mmcli.kv.whatif.sweep import SweepSpec

#: The engines a plan is made for (``all``: vLLM, SGLang and TensorRT-LLM side by side).
Engine = Literal["vllm", "sglang", "trtllm", "all"]


@dataclass(frozen=True)
class PlanRequest:
    """One ``kv-share plan``: the model, the memory, the engine and its settings."""

    #: A config file, a local model folder, or a Hub repo id (a local path wins); empty: the
    #: model of the ``serve`` line.
    model: str | Path = ""
    #: With a Hub repo id: the branch, tag or commit.
    revision: str | None = None
    #: A ``{layer: target}`` JSON map that replaces the map the config implies.
    map_path: str | Path | None = None
    engine: Engine = "vllm"
    # --- memory -------------------------------------------------------------------------------
    #: The KV memory per GPU (``20GiB``, bytes): what vLLM logs as "Available KV cache memory".
    memory: str | int | None = None
    #: Estimate the KV memory from a GPU (``H100``, ``A100-80GB``, a size such as ``79GiB``).
    gpu: str | None = None
    #: With ``gpu``: the weights (a size, an index / .safetensors file, a folder, a repo id).
    weights: str | None = None
    gpu_memory_utilization: float | None = None
    #: With ``gpu``: activation and CUDA-graph memory held back (default 2GiB).
    reserve: str | None = None
    #: vLLM's ``--kv-cache-memory-bytes``: the KV memory as given (the engine skips its
    #: profile); with ``gpu`` it replaces the estimate, which is still shown. Text is read as
    #: vLLM's ``human_readable_int`` reads it (``20G``), into ``resolved``.
    kv_cache_memory_bytes: int | str | None = None
    #: Whose batch defaults the ``gpu`` estimate takes: ``vllm serve``'s or the ``LLM`` class's.
    entry: Literal["serve", "llm"] = "serve"
    # --- the requests ---------------------------------------------------------------------------
    #: A length (``32768``, ``"128k"``), ``"auto"`` (the largest that fits), or the model's.
    max_model_len: int | str | None = None
    allow_long_max_model_len: bool = False
    #: None: 8192, or with ``gpu`` what ``vllm serve`` picks for that GPU.
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    # --- the cache and parallelism --------------------------------------------------------------
    kv_cache_dtype: str = "auto"
    block_size: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    #: vLLM's ``--data-parallel-size``: replicas of tp × pp GPUs each; they multiply the
    #: deployment's KV tokens and concurrency, not the memory of one GPU.
    data_parallel_size: int = 1
    #: Decoder layers per stage (``"8,12,12"`` or a tuple), vLLM's ``VLLM_PP_LAYER_PARTITION``.
    pp_layer_partition: tuple[int, ...] | str | None = None
    # --- vLLM -----------------------------------------------------------------------------------
    #: The vLLM release whose rules to mirror (None: the newest mirrored).
    vllm_version: str | None = None
    async_scheduling: bool = True
    enable_prefix_caching: bool | None = None
    mamba_ssm_cache_dtype: str = "auto"
    disable_hybrid_kv_cache_manager: bool = False
    chunked_local_attn_hybrid: bool | None = None
    num_draft_layers: int = 0
    mtp: bool = False
    num_speculative_tokens: int | None = None
    #: vLLM's ``--speculative-config`` JSON (text or a dict), instead of mtp / the token count.
    speculative_config: str | dict[str, Any] | None = None
    enforce_eager: bool = False
    #: ``VLLM_USE_FLASHINFER_SAMPLER`` (None: unset; False also for FlashInfer not installed):
    #: the sampler of the ``--gpu`` estimate's profile (:mod:`mmcli.kv.whatif.sampler`).
    flashinfer_sampler: bool | None = None
    #: vLLM's ``--skip-mm-profiling``: the profile run leaves out the multimodal encoder.
    skip_mm_profiling: bool = False
    #: vLLM's ``--limit-mm-per-prompt`` (JSON text or a dict, ``{"image": 2, "video": 0}``):
    #: the items the ``--gpu`` estimate's encoder profile may take a prompt (999 by default).
    limit_mm_per_prompt: str | dict[str, Any] | None = None
    #: vLLM's ``--mm-processor-kwargs`` (JSON text or a dict): ``max_pixels`` sizes the
    #: encoder profile's dummy image of a Qwen2-VL-style model.
    mm_processor_kwargs: str | dict[str, Any] | None = None
    #: vLLM's ``--mm-device-do-normalize`` (None: the release's default for the model): the
    #: encoder profile's dummy pixel values stay ``uint8`` bytes on the GPU where it is on.
    mm_device_do_normalize: bool | None = None
    #: vLLM's ``--language-model-only``: every modality off (no encoder profile).
    language_model_only: bool = False
    num_gpu_blocks_override: int | None = None
    #: Sharing the engine accepts but that is likely a mistake is an error.
    strict: bool = False
    #: Where the aliasing check allocates: ``meta`` (nothing), ``cpu``, ``cuda[:N]``.
    device: str = "meta"
    #: Plan over a range: ``max-model-len=4K..128K`` or ``memory=8GiB..80GiB[:N|:xF]``.
    sweep: str | None = None
    # --- SGLang and TensorRT-LLM ------------------------------------------------------------------
    sglang_version: str | None = None
    trtllm_version: str | None = None
    mem_fraction_static: float | None = None
    page_size: int | None = None
    tokens_per_block: int | None = None
    free_gpu_memory_fraction: float | None = None
    #: SGLang's ``--speculative-num-steps`` / ``-eagle-topk`` / ``-num-draft-tokens``.
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    #: A ``vllm serve`` line (text split as a shell splits it, or tokens) read with the flags of
    #: ``vllm_version``: its model and its settings that change KV memory fill these fields.
    serve: str | tuple[str, ...] | list[str] | None = None
    #: A vLLM start-up log: its "Available KV cache memory" (exact, as ``memory``), release
    #: and logged settings fill the request (:mod:`mmcli.kv.from_log`).
    from_log: str | Path | None = None
    #: What the checks resolved (filled in by ``__post_init__``).
    resolved: _Resolved = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from mmcli.kv.engine.max_len import parse_max_model_len
        from mmcli.kv.speculative import speculative_options

        if self.from_log is not None:
            from mmcli.kv.from_log import apply_log

            refuse_vllm_only(EngineArgs(self.engine), {"--from-log": self.from_log})
            apply_log(self)
        serve = None if self.serve is None else apply_serve(self)
        size = self.kv_cache_memory_bytes
        if isinstance(size, str):
            from mmcli.kv.engine.max_len import human_readable_int

            size = human_readable_int(size, "--kv-cache-memory-bytes", self.vllm_version)

        partition = self.pp_layer_partition
        if isinstance(partition, str):
            partition = parse_partition(partition)
        config = self.speculative_config
        text = None if config is None else config if isinstance(config, str) else json.dumps(config)
        mtp, tokens, drafts = speculative_options(
            text, self.mtp, self.num_speculative_tokens, self.num_draft_layers
        )
        refuse_unmirrored_release(self.vllm_version)
        if self.entry not in ("serve", "llm"):
            raise InputError(
                f"--entry must be serve or llm, got {self.entry!r}",
                hint="serve: vllm serve's batch defaults (the default); llm: the LLM class's",
            )
        length: int | str | None = self.max_model_len
        if isinstance(length, str) or length == -1:
            length = parse_max_model_len(str(length), self.vllm_version)
        engines = EngineArgs(
            self.engine,
            self.sglang_version,
            self.trtllm_version,
            self.mem_fraction_static,
            self.page_size,
            self.tokens_per_block,
            self.free_gpu_memory_fraction,
            self.speculative_num_steps,
            self.speculative_eagle_topk,
            self.speculative_num_draft_tokens,
        )
        given = {"--map": self.map_path, "--sweep": self.sweep}
        refuse_vllm_only(engines, {**given, "--max-model-len auto": length == "auto"})
        vllm_args: dict[str, object] = {
            "--block-size": self.block_size,
            "--vllm-version": self.vllm_version,
            "--num-speculative-tokens": tokens,
            "--enable-prefix-caching": self.enable_prefix_caching,
            "--max-num-seqs": self.max_num_seqs,
            "--num-gpu-blocks-override": self.num_gpu_blocks_override,
            "--strict": self.strict,
            "--disable-hybrid-kv-cache-manager": self.disable_hybrid_kv_cache_manager,
            "--mtp": mtp,
            "--speculative-config": text,
            "--enforce-eager": self.enforce_eager,
            "--flashinfer-sampler": self.flashinfer_sampler is not None,
            "--skip-mm-profiling": self.skip_mm_profiling,
            "--limit-mm-per-prompt": self.limit_mm_per_prompt,
            "--mm-processor-kwargs": self.mm_processor_kwargs,
            "--mm-device-do-normalize": self.mm_device_do_normalize is not None,
            "--language-model-only": self.language_model_only,
            "--gpu-memory-utilization": self.gpu_memory_utilization,
            "--entry llm": self.entry != "serve",
            "--chunked-local-attn-hybrid": self.chunked_local_attn_hybrid is not None,
        }
        if engines.engine in ("sglang", "trtllm"):  # with all, they shape vLLM's column
            refuse_vllm_only(engines, {**vllm_args, "--num-draft-layers": drafts})
        refuse_vllm_only(engines, {"--data-parallel-size": self.data_parallel_size != 1})
        if self.data_parallel_size < 1 or self.data_parallel_size > 1_000_000:
            raise InputError(
                f"--data-parallel-size must be a positive integer, got {self.data_parallel_size}",
                hint="the replicas of the model, e.g. 1, 2, 8",
            )
        if self.skip_mm_profiling:
            _refuse_skip_mm_profiling(self.vllm_version)
        _refuse_new_mm_flags(self)
        sweep = None
        if self.sweep is not None:
            from mmcli.kv.whatif.sweep import parse_sweep

            sweep = parse_sweep(self.sweep)  # refused before any planning
        resolved = _Resolved(engines, partition, mtp, tokens, drafts, length, sweep, serve, size)
        object.__setattr__(self, "resolved", resolved)


def _refuse_skip_mm_profiling(version: str | None) -> None:
    """``--skip-mm-profiling`` is refused for a release that has no such flag."""
    from mmcli.kv.releases import first_release, rules_for

    if not rules_for(version).skip_mm_profiling_flag:
        first = first_release("skip_mm_profiling_flag", True)
        raise InputError(
            f"--skip-mm-profiling: vLLM {version} has no such flag",
            hint=f"give --vllm-version {first} or newer, or leave the flag out",
        )


def _refuse_new_mm_flags(request: PlanRequest) -> None:
    """``--mm-device-do-normalize`` and ``--language-model-only`` are refused for a release
    that has no such flag (the engine's parser would refuse them)."""
    from mmcli.kv.releases import first_release, rules_for

    rules = rules_for(request.vllm_version)
    missing = {
        "--mm-device-do-normalize": request.mm_device_do_normalize is not None
        and not rules.mm_device_normalize,
        "--language-model-only": request.language_model_only and not rules.language_model_only_flag,
    }
    first = {
        "--mm-device-do-normalize": first_release(
            "mm_device_normalize", ("qwen2_vl", "qwen2_5_vl")
        ),
        "--language-model-only": first_release("language_model_only_flag", True),
    }
    for flag, refused in missing.items():
        if refused:
            raise InputError(
                f"{flag}: vLLM {rules.release} has no such flag",
                hint=f"give --vllm-version {first[flag]} or newer, or leave the flag out",
            )


@dataclass(frozen=True)
class _Resolved:
    """A request's options once read: the engines, the stages' layers, speculative decoding,
    the length (an int, ``"auto"`` or None), the sweep, the serve line and the KV bytes."""

    engines: EngineArgs
    partition: tuple[int, ...] | None
    mtp: bool
    num_speculative_tokens: int | None
    num_draft_layers: int
    max_model_len: int | str | None
    sweep: SweepSpec | None
    serve: ServeArgs | None = None
    #: ``kv_cache_memory_bytes`` in bytes.
    kv_cache_memory_bytes: int | None = None


def apply_serve(request: PlanRequest) -> ServeArgs:
    """Read the request's serve line and set the fields its settings name; a setting also
    given as an mmcli option is refused, naming both."""
    from dataclasses import fields

    from mmcli.kv.serve import parse_serve_line

    assert request.serve is not None
    args = parse_serve_line(request.serve, request.vllm_version)
    defaults = {f.name: f.default for f in fields(request) if f.init}
    if args.model is not None and request.model not in ("", args.model):
        raise InputError(
            f"the model is named twice: MODEL {quoted(str(request.model))} and the serve "
            f"line's {quoted(args.model)}",
            hint="name the model once, on the serve line",
        )
    model = args.model if args.model is not None else request.model
    if model in ("", None):
        raise InputError("the serve line names no model", hint="vllm serve MODEL [FLAGS]")
    object.__setattr__(request, "model", model)
    settings = {_field_of(k): k for k in args.applied}
    for name, value in args.request_fields().items():
        if getattr(request, name) != defaults[name]:
            flag = args.sources[settings.get(name, "dtype")]
            raise InputError(
                f"{flag} on the serve line and --{name.replace('_', '-')} both set {name}",
                hint="give the setting once, on the serve line or as an mmcli option",
            )
        object.__setattr__(request, name, value)
    if args.graphs and request.gpu is not None and not request.enforce_eager:
        raise InputError(
            f"{', '.join(args.graphs)} on the serve line change(s) the CUDA graphs that the "
            "--gpu estimate counts with the release's default capture sizes",
            hint="plan with --memory (the KV memory the engine logs), or without the flag",
        )
    if args.weights and request.gpu is not None and request.weights is None:
        raise InputError(
            f"{', '.join(args.weights)} on the serve line change(s) the weights that --gpu "
            "reads from the model",
            hint="give --weights the size the weights load to, or plan with --memory",
        )
    return args


def _field_of(setting: str) -> str:
    from mmcli.kv.serve import APPLIED

    return APPLIED[setting][0] if setting in APPLIED else setting


def parse_partition(text: str) -> tuple[int, ...]:
    """``--pp-layer-partition 8,12,12`` → ``(8, 12, 12)``."""
    parts = text.split(",")
    if len(text) > 10_000 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise InputError(
            f"--pp-layer-partition: cannot read {quoted(text)} as layer counts",
            hint="one count per stage, comma-separated, e.g. 8,12,12",
        )
    return tuple(int(p) for p in parts)
