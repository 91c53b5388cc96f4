"""``mmcli kv-share explain``: an engine's start-up log beside mmcli's plan of that run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mmcli.cli._boundary import guarded
from mmcli.cli._output import OutputFormat, emit_json, stdout
from mmcli.cli.help import PanelledCommand
from mmcli.cli.options import ENGINE, MEMORY, REVISION_HELP, FormatOpt
from mmcli.errors import EXIT_FINDINGS, EXIT_OK, InputError

if TYPE_CHECKING:
    from mmcli.kv import Explanation, MemoryComparison

INPUT = "Input"

EXAMPLE = (
    "Example: mmcli kv-share explain samples/vllm/startup.log "
    "--config samples/kv/qwen3-14b-like.json"
)
_STATUS = {"match": "[green]match[/]", "differs": "[bold red]differs[/]", "not in log": "[dim]–[/]"}


def register_explain(app: typer.Typer) -> None:
    """Add ``explain`` to the ``kv-share`` group (this module does not import the group)."""
    app.command("explain", cls=PanelledCommand, epilog=EXAMPLE, no_args_is_help=True)(explain)


@guarded
def explain(
    log_path: Annotated[
        Path,
        typer.Argument(
            metavar="LOG",
            help="A vLLM start-up log (vllm serve or LLM(...)) up to 'GPU KV cache size', or an "
            "SGLang or TensorRT-LLM one up to its KV-cache lines.",
            show_default=False,
        ),
    ],
    config: Annotated[
        str,
        typer.Option(
            "--config",
            "--model",
            metavar="MODEL",
            help="The model: a Hugging Face config.json or an mmcli layer config, a local model "
            "folder, or a Hub repo id (org/name).",
            show_default=False,
            rich_help_panel=INPUT,
        ),
    ],
    revision: Annotated[
        str | None,
        typer.Option("--revision", help=REVISION_HELP, show_default=False, rich_help_panel=INPUT),
    ] = None,
    vllm_version: Annotated[
        str | None,
        typer.Option(
            "--vllm-version",
            help="Plan with this release's rules instead of the one the log names.",
            rich_help_panel=ENGINE,
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu",
            help="The GPU (a name or its memory, as kv-share plan --gpu) for the memory "
            "section's estimate when the log does not print the GPU's total memory.",
            show_default=False,
            rich_help_panel=MEMORY,
        ),
    ] = None,
    max_mib: Annotated[
        int,
        typer.Option(
            "--max-mib",
            help="Read at most this many MiB of the log (its head).",
            rich_help_panel=INPUT,
        ),
    ] = 16,
    output_format: FormatOpt = OutputFormat.table,
) -> None:
    """Explain a vLLM start-up log: plan the same run and compare every KV figure.

    Exit 0 when every figure the log printed is reproduced, 1 when one differs (each
    difference is explained), 2 for bad input.
    """
    from mmcli.cli.kv_share.explain_engines import explain_engine_log
    from mmcli.kv import explain_vllm_log, load_document, read_head, resolve_model, vllm_log_of

    if max_mib < 1:
        raise InputError(
            f"--max-mib must be at least 1, got {max_mib}",
            hint="the log's first MiB already holds a start-up's KV lines; the default is 16",
        )
    source = resolve_model(config, revision)
    # The log is read once (a regular file, or stdin as -), at most --max-mib of its head.
    head, truncated = read_head(log_path, max_mib * 2**20)
    # An SGLang or TensorRT-LLM log is explained by its own reader; anything else is vLLM's.
    engine_code = explain_engine_log(head, source.config, output_format)
    if engine_code is not None:
        raise typer.Exit(engine_code)
    log = vllm_log_of(head, truncated, str(log_path))
    model, doc = load_document(source.config)
    result = explain_vllm_log(
        model, log, vllm_version=vllm_version, doc=doc, gpu=gpu, source=source
    )
    exit_code = EXIT_OK if result.matches else EXIT_FINDINGS
    if output_format is OutputFormat.json:
        emit_json(result.to_json(exit_code=exit_code))
    else:
        render_explanation(result)
    raise typer.Exit(exit_code)


def render_explanation(result: Explanation) -> None:
    """The log's figures and the plan's, side by side, then the notes."""
    from rich.markup import escape
    from rich.table import Table

    from mmcli.kv import MemoryComparison

    log = result.log
    console = stdout()
    release = log.release or "not in the log"
    console.print(f"log: vLLM {escape(release)} · model {escape(log.model or 'not in the log')}")
    console.print(f"plan: {escape(result.model)} · {escape(result.rules)}")
    table = Table(title="log vs plan", title_justify="left")
    table.add_column("figure")
    table.add_column("log", justify="right")
    table.add_column("plan", justify="right")
    table.add_column("")
    for row in result.comparisons:
        table.add_row(
            escape(row.figure), escape(row.logged or "–"), escape(row.planned), _STATUS[row.status]
        )
    console.print(table)
    if result.options.memory_bytes is not None:
        console.print(
            f"planned per GPU at {result.options.memory_bytes / 2**30:.3f} GiB "
            f"(max_model_len {result.options.max_model_len or 0:,}, "
            f"tp {result.options.tensor_parallel_size}, kv {result.options.kv_dtype})"
        )
    if result.matching_releases:
        console.print(
            "releases whose rules reproduce the log: " + ", ".join(result.matching_releases)
        )
    for note in result.notes:
        console.print(f"• {escape(note)}")
    if isinstance(result.memory, MemoryComparison):
        render_memory(result.memory)
    verdict = "the plan reproduces the log" if result.matches else "the plan differs from the log"
    console.print(f"[bold]{verdict}[/]")


def _gib(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def render_memory(memory: MemoryComparison) -> None:
    """The profiler's figures beside mmcli's estimate of each component."""
    from rich.markup import escape
    from rich.table import Table

    console = stdout()
    table = Table(title="memory (GiB): log vs mmcli's estimate", title_justify="left")
    for name, justify in (("component", "left"), ("log", "right"), ("estimate", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("est. − log", justify="right")
    for row in memory.rows:
        diff = row.difference_gib
        table.add_row(
            escape(row.component),
            _gib(row.logged_gib),
            _gib(row.estimate_gib),
            "–" if diff is None else f"{diff:+.2f}",
        )
    console.print(table)
    shown = ", ".join(f"{k} {v} ({s})" for k, (v, s) in memory.inputs.items())
    console.print(f"estimate inputs: {escape(shown)}")
    for item in memory.missing:
        console.print(f"• estimate: missing {escape(item)}")
    for note in memory.notes:
        console.print(f"• {escape(note)}")
