"""``kv-share plan --engine sglang|trtllm|all``: other engines' pools, one column per engine.

The options are declared here once (``Annotated`` aliases) and the plan command passes them
through; the figures come from :mod:`mmcli.kv.sglang`, :mod:`mmcli.kv.trtllm` and, for
``all``, the vLLM plan (:mod:`mmcli.kv.vllm_figures`). Every figure is shown with its engine
and release; an estimate says so in its cell and its reason under the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from mmcli import kv
from mmcli.cli._output import stdout
from mmcli.cli.options import ENGINE
from mmcli.kv import sglang_version_help

if TYPE_CHECKING:
    from mmcli.kv import EngineFigures

EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="Plan for vllm (default), sglang, trtllm, or all three side by side.",
        rich_help_panel=ENGINE,
    ),
]
SglangVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--sglang-version",
        help=sglang_version_help(),
        rich_help_panel=ENGINE,
    ),
]
TrtllmVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--trtllm-version",
        help=kv.trtllm_releases_help(),
        rich_help_panel=ENGINE,
    ),
]
MemFractionOpt = Annotated[
    float | None,
    typer.Option(
        "--mem-fraction-static",
        help="With --gpu: SGLang's mem_fraction_static (default: the release's own choice).",
        rich_help_panel=ENGINE,
    ),
]
PageSizeOpt = Annotated[
    int | None,
    typer.Option("--page-size", help="SGLang's --page-size (default 1).", rich_help_panel=ENGINE),
]
TokensPerBlockOpt = Annotated[
    int | None,
    typer.Option(
        "--tokens-per-block",
        help=f"TensorRT-LLM's tokens per block (default: {kv.trtllm_blocks_by_path()}).",
        rich_help_panel=ENGINE,
    ),
]
FreeFractionOpt = Annotated[
    float | None,
    typer.Option(
        "--free-gpu-memory-fraction",
        help="TensorRT-LLM's free_gpu_memory_fraction (default 0.9).",
        rich_help_panel=ENGINE,
    ),
]


SpecStepsOpt = Annotated[
    int | None,
    typer.Option(
        "--speculative-num-steps",
        help="SGLang's EAGLE / NEXTN --speculative-num-steps (hybrid GDN / Mamba models; with "
        "--speculative-eagle-topk).",
        rich_help_panel=ENGINE,
    ),
]
SpecTopkOpt = Annotated[
    int | None,
    typer.Option(
        "--speculative-eagle-topk",
        help="SGLang's --speculative-eagle-topk (1: draft tokens = steps + 1).",
        rich_help_panel=ENGINE,
    ),
]
SpecDraftOpt = Annotated[
    int | None,
    typer.Option(
        "--speculative-num-draft-tokens",
        help="SGLang's --speculative-num-draft-tokens (needed with a top-k above 1).",
        rich_help_panel=ENGINE,
    ),
]


def _cell(name: str, value: int | float | None, estimate: bool) -> str:
    if value is None:
        return "–"
    if name == "budget_bytes":
        text = f"{value / 2**30:.2f} GiB"
    elif name == "max_concurrency":
        text = f"{value:.2f}×"
    else:
        text = f"{int(value):,}"
        text += " B" if name in ("bytes_per_token", "allocated_bytes_per_token") else ""
    return f"{text} (estimate)" if estimate else text


def render_engines(model: str, results: list[EngineFigures]) -> None:
    """Print the engines' figures as a table, one column per engine (their JSON document is
    ``PlanRun.to_json``)."""
    from mmcli.kv import FIGURE_LABELS

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
        return
    for result in results:
        lines: list[str] = [f"budget: {result.budget_source}", f"reserves: {result.reserves}"]
        lines += [f"note: {note}" for note in result.notes]
        printed = "would print (estimate)" if result.estimates else "would print"
        lines += [f"{printed}: {line}" for line in result.log_lines]
        out.print(f"{escape(result.label)}:")
        for line in [*lines, *_flags(result)]:
            out.print(f"  {escape(line)}", soft_wrap=True)


def _flags(result: EngineFigures) -> list[str]:
    """Why a column is an estimate, and why its engine would not start."""
    lines = [f"ESTIMATE: {r.removeprefix('estimate: ')}" for r in result.estimates]
    if result.not_planned:
        lines.append(f"not planned: {result.not_planned}")
    if result.refusal:
        lines.append(f"error engine-refuses: {result.refusal}")
    return lines
