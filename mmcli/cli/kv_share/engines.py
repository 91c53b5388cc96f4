"""``kv-share plan --engine sglang|trtllm|all``: other engines' pools, one column per engine.

The options are declared here once (``Annotated`` aliases) and the plan command passes them
through; the figures come from :mod:`mmcli.kv.sglang`, :mod:`mmcli.kv.trtllm` and, for
``all``, the vLLM plan (:mod:`mmcli.kv.vllm_figures`). Every figure is shown with its engine
and release; an estimate says so in its cell and its reason under the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from mmcli.cli._output import OutputFormat, emit_json, stdout
from mmcli.errors import EXIT_FINDINGS, EXIT_OK, InputError

if TYPE_CHECKING:
    from mmcli.cli.kv_share.weights import WeightsFigure
    from mmcli.kv.figures import EngineFigures
    from mmcli.kv.inputs.model_source import ModelSource
    from mmcli.kv.options import PlanOptions
    from mmcli.kv.result import KVPlan
    from mmcli.kv.whatif.gpus import GPU

ENGINES = ("vllm", "sglang", "trtllm", "all")

EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="Plan for vllm (default), sglang, trtllm, or all three side by side.",
    ),
]
SglangVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--sglang-version",
        help="With --engine sglang/all: the SGLang release (0.4.6, 0.4.7, 0.4.9, 0.5.3, 0.5.4; "
        "default 0.5.4).",
    ),
]
TrtllmVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--trtllm-version",
        help="With --engine trtllm/all: the TensorRT-LLM release (0.13: C++ runtime; 1.1: "
        "PyTorch backend, the default).",
    ),
]
MemFractionOpt = Annotated[
    float | None,
    typer.Option(
        "--mem-fraction-static",
        help="With --gpu: SGLang's mem_fraction_static (default: the release's own choice).",
    ),
]
PageSizeOpt = Annotated[
    int | None, typer.Option("--page-size", help="SGLang's --page-size (default 1).")
]
TokensPerBlockOpt = Annotated[
    int | None,
    typer.Option(
        "--tokens-per-block",
        help="TensorRT-LLM's tokens per block (default: 64 in 0.13 engines, 32 in 1.1).",
    ),
]
FreeFractionOpt = Annotated[
    float | None,
    typer.Option(
        "--free-gpu-memory-fraction",
        help="TensorRT-LLM's free_gpu_memory_fraction (default 0.9).",
    ),
]


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
    config_path: Path,
    args: EngineArgs,
    budget: Budget,
    *,
    tp: int,
    pp: int,
    kv_dtype: str,
    max_model_len: int | None,
) -> EngineFigures:
    """SGLang's or TensorRT-LLM's figures for the model at ``config_path``."""
    from mmcli.kv.inputs.layer_config import load_config, read_document

    config = load_config(config_path)
    doc = read_document(config_path) if config.source == "hf" else {}
    gpu_bytes = budget.gpu.total_bytes if budget.gpu is not None else None
    gpu_name = budget.gpu.name if budget.gpu is not None else ""
    if name == "sglang":
        from mmcli.kv.sglang import SglangOptions, plan_sglang

        return plan_sglang(
            config,
            doc,
            SglangOptions(
                release=args.sglang_version,
                tp=tp,
                pp=pp,
                memory_bytes=budget.memory_bytes,
                gpu_bytes=gpu_bytes,
                gpu_name=gpu_name,
                weights_bytes=budget.weights_bytes,
                mem_fraction_static=args.mem_fraction_static,
                page_size=args.page_size or 1,
                page_size_given=args.page_size is not None,
                kv_dtype=kv_dtype,
                max_model_len=max_model_len,
            ),
        )
    from mmcli.kv.trtllm import TrtllmOptions, plan_trtllm

    return plan_trtllm(
        config,
        doc,
        TrtllmOptions(
            release=args.trtllm_version,
            tp=tp,
            pp=pp,
            memory_bytes=budget.memory_bytes,
            gpu_bytes=gpu_bytes,
            gpu_name=gpu_name,
            weights_bytes=budget.weights_bytes,
            free_gpu_memory_fraction=args.free_gpu_memory_fraction,
            tokens_per_block=args.tokens_per_block,
            kv_dtype=kv_dtype,
            max_model_len=max_model_len,
        ),
    )


def _cell(name: str, value: int | float | None, estimate: bool) -> str:
    if value is None:
        return "–"
    if name == "budget_bytes":
        text = f"{value / 2**30:.2f} GiB"
    elif name == "max_concurrency":
        text = f"{value:.2f}×"
    else:
        text = f"{int(value):,}"
        text += " B" if name == "bytes_per_token" else ""
    return f"{text} (estimate)" if estimate else text


def render_engines(model: str, results: list[EngineFigures], output_format: OutputFormat) -> int:
    """Print the engines' figures (a table, or one JSON document); returns the exit code."""
    from mmcli.kv.figures import FIGURE_LABELS

    exit_code = EXIT_FINDINGS if any(r.refusal for r in results) else EXIT_OK
    if output_format is OutputFormat.json:
        emit_json(
            {"model": model, "engines": [r.to_json() for r in results], "exit_code": exit_code}
        )
        return exit_code
    out = stdout()
    title = f"KV pool per GPU · {escape(model)}"
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("figure")
    for result in results:
        table.add_column(escape(result.label), justify="right")
    for name, label in FIGURE_LABELS.items():
        if not any(name in r.figures for r in results):
            continue
        cells = []
        for r in results:
            figure = r.figures.get(name)
            cells.append(
                "–" if figure is None else _cell(name, figure.value, figure.estimate is not None)
            )
        table.add_row(label, *cells)
    table.add_row("kept back", *(escape(r.kept_back or "–") for r in results))
    out.print(table)
    if len(results) > 1:
        # Side by side: the table, and what makes a column uncertain or fail; each engine's
        # budget, reserves and start-up lines are in its own plan and in the JSON.
        if any(r.budget_source.startswith("--memory") for r in results):
            out.print("--memory is each engine's own budget figure (docs/kv-share-engines.md)")
        for result in results:
            for line in _flags(result):
                out.print(f"{escape(result.label)}: {escape(line)}", soft_wrap=True)
        return exit_code
    for result in results:
        lines: list[str] = [f"budget: {result.budget_source}", f"reserves: {result.reserves}"]
        lines += [f"note: {note}" for note in result.notes]
        printed = "would print (estimate)" if result.estimates else "would print"
        lines += [f"{printed}: {line}" for line in result.log_lines]
        out.print(f"{escape(result.label)}:")
        for line in [*lines, *_flags(result)]:
            out.print(f"  {escape(line)}", soft_wrap=True)
    return exit_code


def _flags(result: EngineFigures) -> list[str]:
    """Why a column is an estimate, and why its engine would not start."""
    lines = [f"ESTIMATE: {r.removeprefix('estimate: ')}" for r in result.estimates]
    if result.not_planned:
        lines.append(f"not planned: {result.not_planned}")
    if result.refusal:
        lines.append(f"error engine-refuses: {result.refusal}")
    return lines


def as_budget(memory: int | None, gpu: str | None, weights: int | None) -> Budget:
    """The budget options, resolved (a GPU by name)."""
    from mmcli.kv.whatif.gpus import resolve_gpu

    return Budget(memory, resolve_gpu(gpu) if gpu is not None else None, weights)


def run_engines(
    args: EngineArgs,
    source: ModelSource,
    options: PlanOptions,
    gpu: str | None,
    weights: WeightsFigure | None,
    output_format: OutputFormat,
    *,
    vllm: KVPlan | None = None,
) -> int:
    """Plan the engines ``args`` asks for (``vllm``: its plan, for ``all``), print, exit code."""
    from mmcli.kv.vllm_figures import vllm_figures

    config_path = source.config
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
                config_path,
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
    return render_engines(config_path.name, results, output_format)


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
