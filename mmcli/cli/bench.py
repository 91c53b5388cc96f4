"""``mmcli bench``: time the placeholder scatter/gather implementations against a copy."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from mmcli.cli._boundary import guarded
from mmcli.cli._notes import third_party_notes
from mmcli.cli._output import OutputFormat, emit_json, progress, stderr, stdout
from mmcli.cli.help import PanelledCommand
from mmcli.cli.options import DEVICE_HELP, FormatOpt, flag

if TYPE_CHECKING:
    from mmcli.bench import BenchResult

app = typer.Typer()

WORKLOAD = "Workload"
TIMING = "Timing"

EPILOG = (
    "Examples:\n\n"
    "  mmcli bench --device cpu --placeholders 576,2304 --layout contiguous,interleaved\n\n"
    "  mmcli bench --quick --format json\n\n"
    "  mmcli bench --device cuda --from dump.safetensors --impl reference,fast\n\n"
    "Each implementation is first checked bit-for-bit against the reference. 'of copy' is the "
    "achieved bandwidth as a share of a same-size copy (allocate + copy, like the ops) timed "
    "in the same run on the same device; 'speedup' is over the reference. Exit codes: 0 ran; "
    "1 an implementation disagreed with the reference; 2 bad options or dump."
)


@app.command("bench", cls=PanelledCommand, epilog=EPILOG)
@guarded
def bench(
    device: Annotated[
        str, typer.Option("--device", help=DEVICE_HELP, rich_help_panel=TIMING)
    ] = "auto",
    dtype: Annotated[
        str | None,
        typer.Option(
            "--dtype", help="bf16, fp16 or fp32 (default bf16).", rich_help_panel=WORKLOAD
        ),
    ] = None,
    hidden: Annotated[
        int | None,
        typer.Option(
            "--hidden", help="Hidden size of the rows (default 4096).", rich_help_panel=WORKLOAD
        ),
    ] = None,
    placeholders: Annotated[
        str | None,
        typer.Option(
            "--placeholders",
            help="Comma-separated placeholder counts (default 576,2304,9216).",
            rich_help_panel=WORKLOAD,
        ),
    ] = None,
    layout: Annotated[
        str | None,
        typer.Option(
            "--layout",
            help="contiguous (one run between two markers), interleaved (a break token after "
            "each row of patches), random (90% embeddings); comma-separated (default "
            "interleaved).",
            rich_help_panel=WORKLOAD,
        ),
    ] = None,
    impl: Annotated[
        str,
        typer.Option(
            "--impl",
            help="Comma-separated implementations: reference, fast.",
            rich_help_panel=TIMING,
        ),
    ] = "reference,fast",
    op: Annotated[
        str,
        typer.Option("--op", help="Comma-separated ops: scatter, gather.", rich_help_panel=TIMING),
    ] = ("scatter,gather"),
    from_dump: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="Benchmark the real shapes and masks of an encoder-output dump.",
            show_default=False,
            rich_help_panel=WORKLOAD,
        ),
    ] = None,
    min_time: Annotated[
        float | None,
        typer.Option(
            "--min-time", help="Seconds of calls per timing (default 0.2).", rich_help_panel=TIMING
        ),
    ] = None,
    threads: Annotated[
        int,
        typer.Option(
            "--threads", help="CPU threads for the ops while timed.", rich_help_panel=TIMING
        ),
    ] = 1,
    quick: Annotated[
        bool,
        flag(
            "--quick",
            help="A short run: placeholders 576,2304 and --min-time 0.05.",
            rich_help_panel=TIMING,
        ),
    ] = False,
    output_format: FormatOpt = OutputFormat.table,
) -> None:
    """Time scatter/gather implementations against the reference and a same-size copy."""
    # torch's own warnings (a CUDA build without a GPU has some) stay out of the report:
    # they follow it, once each, as notes.
    with third_party_notes():
        from mmcli.bench import BenchOptions
        from mmcli.bench.run import count_steps, run

        options = BenchOptions.parse(
            device=device,
            dtype=dtype,
            hidden=hidden,
            placeholders=placeholders,
            layout=layout,
            impl=impl,
            op=op,
            from_dump=from_dump,
            min_time=min_time,
            threads=threads,
            quick=quick,
        )
        workloads = options.workloads()
        # The CLI runs without the cyclic collector (see ``mmcli.__main__``); timing leaves
        # reference cycles that hold tensors, case after case, so bench collects them.
        gc.enable()
        table_mode = output_format == OutputFormat.table
        with progress(enabled=table_mode) as bar:
            task = bar.add_task("timing", total=count_steps(workloads, options))

            def advance(label: str) -> None:
                bar.update(task, advance=1, description=escape(label))

            result = run(workloads, options, on_step=advance)
        if table_mode:
            _render(result)
        else:
            emit_json(result.to_json())
    err = stderr()
    for warning in result.warnings:
        err.print(f"warning: {escape(warning)}")
    for failure in result.failures:
        err.print(f"error: {escape(failure)}")
    if result.failures:
        err.print("hint: the implementation is wrong for this input; report it with the command")
    raise typer.Exit(result.exit_code)


def _fmt(value: float | None, digits: int = 1, suffix: str = "") -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}{suffix}"


def _render(result: BenchResult) -> None:
    cuda = result.device.startswith("cuda")
    first = result.cases[0] if result.cases else None
    title = f"mmcli bench · {result.device}"
    if first is not None:
        title += f" · {first.dtype} · hidden {first.hidden}"
    title += f" · torch {result.torch_version}"
    if result.threads is not None:
        title += f" · {result.threads} thread{'s' if result.threads != 1 else ''}"
    table = Table(
        title=escape(title),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=0,
        show_edge=False,
        caption="time: median per call · rows: placeholders→embeddings · of copy: share of "
        "the GB/s of a same-size copy",
        caption_justify="left",
    )
    for name in ("op", "impl", "layout"):
        table.add_column(name)
    for name in ("rows", "time µs", "IQR µs", "GB/s", "of copy", "speedup"):
        table.add_column(name, justify="right")
    if cuda:
        table.add_column("syncs", justify="right")
    for c in result.cases:
        row = [
            c.op,
            c.impl,
            c.layout if c.item is None else f"item {c.item}",
            f"{c.num_placeholders}→{c.num_embeds}",
            _fmt(c.median_us, 0 if c.median_us >= 100 else 1),
            _fmt(c.iqr_us, 0 if c.iqr_us >= 100 else 1),
            _fmt(c.gbps, 2),
            _fmt(c.copy_fraction * 100, 0, "%"),
            _fmt(c.speedup_vs_reference, 2, "×"),
        ]
        if cuda:
            row.append("–" if c.host_syncs is None else str(c.host_syncs))
        table.add_row(*row)
    out = stdout()
    out.print(table)
    for s in result.summary():
        if s["impl"] == "reference":
            continue
        speedup = s["geomean_speedup_vs_reference"]
        versus = s["geomean_time_vs_copy"]
        out.print(
            f"{s['impl']} {s['op']}: {_fmt(speedup, 2, '×')} the reference's speed, "
            f"{_fmt(versus, 2, '×')} a copy's time (geometric means, {s['cases']} cases)"
        )
