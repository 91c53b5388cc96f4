"""The engines planned side by side (``kv-share plan --engine sglang|trtllm|all``): which
engines a request asks for, their options checked, and each engine's figures
(:mod:`mmcli.kv.sglang`, :mod:`mmcli.kv.trtllm` and, for ``all``, the vLLM plan through
:mod:`mmcli.kv.vllm_figures`). Every figure carries its engine and release; an engine that
cannot plan the model keeps an empty column that says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from mmcli.errors import InputError
from mmcli.kv.figures import PoolRequest

if TYPE_CHECKING:
    from mmcli.kv.figures import EngineFigures
    from mmcli.kv.inputs.weights import WeightsFigure
    from mmcli.kv.model import ModelConfig
    from mmcli.kv.options import PlanOptions
    from mmcli.kv.result import KVPlan
    from mmcli.kv.whatif.gpus import GPU

#: The engines ``--engine`` names (``all``: the three side by side).
ENGINES: Final = ("vllm", "sglang", "trtllm", "all")


@dataclass(frozen=True)
class EngineArgs:
    """The engine options of one ``kv-share plan`` call."""

    engine: str = "vllm"
    sglang_version: str | None = None
    trtllm_version: str | None = None
    mem_fraction_static: float | None = None
    page_size: int | None = None
    tokens_per_block: int | None = None
    free_gpu_memory_fraction: float | None = None
    #: SGLang's EAGLE / NEXTN speculative decoding (hybrid models, mmcli.kv.sglang.speculative).
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None

    def __post_init__(self) -> None:
        name = self.engine.strip().lower()
        if name not in ENGINES:
            raise InputError(
                f"--engine must be one of {', '.join(ENGINES)}, got {self.engine!r}",
                hint="e.g. --engine all for vLLM, SGLang and TensorRT-LLM side by side",
            )
        object.__setattr__(self, "engine", name)
        self._check_owners()
        for option, value in (
            ("--page-size", self.page_size),
            ("--tokens-per-block", self.tokens_per_block),
        ):
            if value is not None and value <= 0:
                raise InputError(
                    f"{option} must be a positive integer, got {value}", hint=f"e.g. {option} 64"
                )

    def _check_owners(self) -> None:
        """An option of an engine that is not planned is refused, naming its engine."""
        owners = {
            "sglang": (
                ("--sglang-version", self.sglang_version),
                ("--mem-fraction-static", self.mem_fraction_static),
                ("--page-size", self.page_size),
                ("--speculative-num-steps", self.speculative_num_steps),
                ("--speculative-eagle-topk", self.speculative_eagle_topk),
                ("--speculative-num-draft-tokens", self.speculative_num_draft_tokens),
            ),
            "trtllm": (
                ("--trtllm-version", self.trtllm_version),
                ("--tokens-per-block", self.tokens_per_block),
                ("--free-gpu-memory-fraction", self.free_gpu_memory_fraction),
            ),
        }
        for owner, options in owners.items():
            if owner in self.wants:
                continue
            for option, value in options:
                if value is not None:
                    name = {"sglang": "SGLang", "trtllm": "TensorRT-LLM"}[owner]
                    raise InputError(
                        f"{option} is a {name} option; it does not apply to --engine {self.engine}",
                        hint=f"add --engine {owner} (or all), or drop {option}",
                    )

    @property
    def wants(self) -> tuple[str, ...]:
        """The engines to plan, in column order."""
        return ("vllm", "sglang", "trtllm") if self.engine == "all" else (self.engine,)


@dataclass(frozen=True)
class Budget:
    """What the command line says about memory: --memory, or --gpu with --weights."""

    memory_bytes: int | None
    gpu: GPU | None
    weights_bytes: int | None


def other_engine(
    name: str,
    config: ModelConfig,
    doc: dict[str, Any],
    args: EngineArgs,
    budget: Budget,
    *,
    tp: int,
    pp: int,
    kv_dtype: str,
    max_model_len: int | None,
) -> EngineFigures:
    """SGLang's or TensorRT-LLM's figures for ``config`` (``doc``: its HF document, or {})."""
    pool = PoolRequest(
        tp=tp,
        pp=pp,
        memory_bytes=budget.memory_bytes,
        gpu_bytes=budget.gpu.total_bytes if budget.gpu is not None else None,
        gpu_name=budget.gpu.name if budget.gpu is not None else "",
        weights_bytes=budget.weights_bytes,
        kv_dtype=kv_dtype,
        max_model_len=max_model_len,
    )
    if name == "sglang":
        from mmcli.kv.sglang import SglangOptions, plan_sglang

        sglang = SglangOptions.from_request(
            pool,
            release=args.sglang_version,
            mem_fraction_static=args.mem_fraction_static,
            page_size=args.page_size or 1,
            page_size_given=args.page_size is not None,
            speculative_num_steps=args.speculative_num_steps,
            speculative_eagle_topk=args.speculative_eagle_topk,
            speculative_num_draft_tokens=args.speculative_num_draft_tokens,
        )
        return plan_sglang(config, doc, sglang)
    from mmcli.kv.trtllm import TrtllmOptions, plan_trtllm

    trtllm = TrtllmOptions.from_request(
        pool,
        release=args.trtllm_version,
        free_gpu_memory_fraction=args.free_gpu_memory_fraction,
        tokens_per_block=args.tokens_per_block,
    )
    return plan_trtllm(config, doc, trtllm)


def as_budget(memory: int | None, gpu: str | None, weights: int | None) -> Budget:
    """The budget options, resolved (a GPU by name)."""
    from mmcli.kv.whatif.gpus import resolve_gpu

    return Budget(memory, resolve_gpu(gpu) if gpu is not None else None, weights)


def engine_figures(
    args: EngineArgs,
    config: ModelConfig,
    doc: dict[str, Any],
    options: PlanOptions,
    gpu: str | None,
    weights: WeightsFigure | None,
    *,
    vllm: KVPlan | None = None,
) -> list[EngineFigures]:
    """The figures of the engines ``args`` asks for, in column order (``vllm``: its plan, for
    ``all``); one engine alone raises its refusal, side by side it becomes its column."""
    from mmcli.kv.vllm_figures import vllm_figures

    weights_bytes = weights.total_bytes if weights is not None else None
    # With --gpu, vLLM's plan ran on its own estimate; the others estimate from the GPU.
    memory = options.memory_bytes if gpu is None else None
    budget = as_budget(memory, gpu, weights_bytes)
    results = []
    for name in args.wants:
        if name == "vllm":
            assert vllm is not None
            reason = None
            if gpu is not None:
                reason = "estimate: vLLM profiles its activation peak; mmcli's --gpu estimate "
                reason += "takes a fixed reserve for it"
            results.append(vllm_figures(vllm, estimate=reason))
            continue
        try:
            result = other_engine(
                name,
                config,
                doc,
                args,
                budget,
                tp=options.tensor_parallel_size,
                pp=options.pipeline_parallel_size,
                kv_dtype=options.kv_dtype,
                max_model_len=options.max_model_len,
            )
        except InputError as refusal:
            if len(args.wants) == 1:
                raise  # that engine alone: its refusal is the command's
            # Side by side, one engine that mmcli cannot plan this model for keeps the others:
            # its column is empty and says why (never a figure mmcli cannot stand behind).
            result = _not_planned(name, args, refusal)
        results.append(result)
    return results


def _not_planned(name: str, args: EngineArgs, refusal: InputError) -> EngineFigures:
    """The column of an engine mmcli refuses to plan the model for, with the reason."""
    if name == "sglang":
        from mmcli.kv.sglang.releases import DEFAULT_RELEASE as SGLANG_DEFAULT

        release = args.sglang_version or SGLANG_DEFAULT
    else:
        from mmcli.kv.trtllm.releases import DEFAULT_RELEASE as TRTLLM_DEFAULT

        release = args.trtllm_version or TRTLLM_DEFAULT
    from mmcli.kv.figures import EngineFigures

    reason = refusal.message + (f" ({refusal.hint})" if refusal.hint else "")
    return EngineFigures(
        engine=name,
        release=release,
        figures={},
        budget_source="–",
        reserves="–",
        kept_back="not planned",
        not_planned=reason,
    )


def refuse_vllm_only(args: EngineArgs, given: dict[str, object]) -> None:
    """Options only the vLLM plan has, refused for another engine (naming the first)."""
    if args.engine == "vllm":
        return
    for option, value in given.items():
        if value not in (None, False):
            raise InputError(
                f"{option} is a vLLM option; it does not apply to --engine {args.engine}",
                hint="drop it, or plan with --engine vllm",
            )
