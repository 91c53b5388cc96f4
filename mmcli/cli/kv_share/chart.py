"""A swept plan as a picture: a Rich table and bar chart in the terminal, a PNG/SVG on request.

The terminal chart needs nothing beyond Rich. The image needs matplotlib, an optional extra
(``pip install 'mmcli[plot]'``), imported only when ``--plot`` is given.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from mmcli.atomic import atomic_write, check_target
from mmcli.cli._output import OutputFormat, emit_json, stderr, stdout
from mmcli.errors import InputError
from mmcli.kv import Sweep
from mmcli.text import printable

_EIGHTHS = " ▏▎▍▌▋▊▉█"
_WITH, _WITHOUT = "█", "▒"
GIB = 2**30


def value_label(sweep: Sweep, value: int) -> str:
    """A swept value as a person reads it: ``32,768`` tokens or ``20.0 GiB``."""
    if sweep.parameter == "memory":
        return f"{value / GIB:.1f} GiB"
    return f"{value:,}"


def _bar(value: float, top: float, width: int, *, fine: bool) -> str:
    if top <= 0 or value <= 0:
        return ""
    cells = value / top * width
    if not fine:
        return _WITHOUT * max(1, round(cells))
    whole = int(cells)
    part = _EIGHTHS[round((cells - whole) * 8)] if whole < width else ""
    return (_WITH * whole + part.strip()) or _EIGHTHS[1]


def sweep_table(sweep: Sweep) -> Table:
    """Value, max concurrency and KV tokens at each point (both sides when sharing matters)."""
    name = "max_model_len" if sweep.parameter == "max-model-len" else "KV memory"
    table = Table(title=f"{sweep.model}: capacity by {name}", title_justify="left")
    table.add_column(name, justify="right")
    sides = ["with_sharing", "without_sharing"] if sweep.shares else [sweep.engine_side]
    suffix = {"with_sharing": "\nshared", "without_sharing": "\nnot shared"}
    for figure in ("concurrency", "KV tokens"):
        for side in sides:
            table.add_column(figure + (suffix[side] if sweep.shares else ""), justify="right")
    for point in sweep.points:
        cells = [value_label(sweep, point.value)]
        got = [getattr(point, side) for side in sides]
        for side_point in got:
            conc = side_point.max_concurrency if side_point else None
            refuse = side_point is not None and not side_point.fits
            cells.append("–" if conc is None else f"{conc:,.2f}×" + (" ✗" if refuse else ""))
        for side_point in got:
            tokens = side_point.kv_tokens if side_point else None
            cells.append("–" if tokens is None else f"{tokens:,}")
        table.add_row(*cells)
    return table


def sweep_chart(sweep: Sweep, width: int = 80) -> Text:
    """Max concurrency at each point as horizontal bars (█ with sharing, ▒ without)."""
    sides = ["with_sharing", "without_sharing"] if sweep.shares else [sweep.engine_side]
    values = [
        v
        for side in sides
        for v in sweep.series(side, "max_concurrency")
        if isinstance(v, int | float)
    ]
    top = max(values, default=0.0)
    labels = [value_label(sweep, p.value) for p in sweep.points]
    pad = max(len(label) for label in labels)
    room = max(10, width - pad - 14)
    text = Text()
    legend = "█ with sharing, ▒ without" if sweep.shares else "█"
    text.append(f"max concurrency ({legend}; ✗: the engine refuses to start)\n", style="bold")
    for label, point in zip(labels, sweep.points, strict=True):
        for i, side in enumerate(sides):
            got = getattr(point, side)
            conc = got.max_concurrency if got is not None else None
            text.append((label if i == 0 else "").rjust(pad) + " │")
            if conc is None:
                text.append(" –\n", style="dim")
                continue
            fine = side == sides[0]
            text.append(_bar(conc, top, room, fine=fine), style="green" if fine else "cyan")
            mark = "" if got is None or got.fits else " ✗"
            text.append(f" {conc:,.2f}×{mark}\n", style="red" if mark else "")
    text.rstrip()
    return text


def render_sweep(sweep: Sweep, console: Console | None = None) -> None:
    """Print the table and the chart (on stdout unless another console is given)."""
    console = console or stdout()
    width = min(console.width, 100)
    console.print(Group(sweep_table(sweep), Text(""), sweep_chart(sweep, width)))


def write_plot(sweep: Sweep, path: Path) -> Path:
    """Draw max concurrency and KV tokens against the swept value into a PNG or SVG file."""
    fmt = _plot_format(path)
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise InputError(
            "--plot needs matplotlib, which is not installed",
            hint="pip install 'mmcli[plot]' (or pip install matplotlib)",
        ) from None
    memory = sweep.parameter == "memory"
    xs = [p.value / GIB if memory else p.value for p in sweep.points]
    fig = Figure(figsize=(8, 6), dpi=100, layout="constrained")
    ax_conc, ax_tokens = fig.subplots(2, 1, sharex=True)
    sides = ["with_sharing", "without_sharing"] if sweep.shares else [sweep.engine_side]
    style: dict[str, dict[str, Any]] = {
        "with_sharing": {"label": "with sharing", "linestyle": "-", "marker": "o"},
        "without_sharing": {"label": "without sharing", "linestyle": "--", "marker": "s"},
    }
    for side in sides:
        kwargs = style[side] if sweep.shares else {"marker": "o"}
        conc = [_nan(v) for v in sweep.series(side, "max_concurrency")]
        tokens = [_nan(v) for v in sweep.series(side, "kv_tokens")]
        ax_conc.plot(xs, conc, **kwargs)
        ax_tokens.plot(xs, tokens, **kwargs)
    ax_conc.axhline(1.0, color="red", linewidth=0.8, linestyle=":")
    ax_conc.set_ylabel("max concurrency (×)")
    ax_tokens.set_ylabel("KV cache (tokens)")
    ax_tokens.set_xlabel("KV memory per GPU (GiB)" if memory else "max_model_len (tokens)")
    if len(xs) > 1 and min(xs) > 0 and max(xs) / min(xs) >= 8:
        ax_tokens.set_xscale("log", base=2)
        ax_tokens.set_xticks(xs)
    ax_tokens.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.4g}"))
    ax_tokens.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    for ax in (ax_conc, ax_tokens):
        ax.grid(True, alpha=0.3)
        if sweep.shares:
            ax.legend()
    swept = "KV memory" if memory else "max_model_len"
    fig.suptitle(f"{_title_text(sweep.model)}: capacity by {swept}")
    # Drawn in memory, then written like every other output (atomic_write): never through a
    # FIFO or a device, never over an input (a symlink to one included), never into a
    # directory that does not exist, and an existing plot is kept whole when drawing fails.
    image = io.BytesIO()
    fig.savefig(image, format=fmt)
    with atomic_write(path) as out:
        out.write(image.getbuffer())
    return path


#: The longest model name a plot title shows (a longer one is cut in the middle).
_TITLE_LIMIT = 80


def _title_text(name: str) -> str:
    """A model name as a plot title can hold it: control characters and lone surrogates
    escaped (matplotlib cannot encode a surrogate), cut to :data:`_TITLE_LIMIT` characters
    (laying out a megabyte of text takes minutes), and ``$`` escaped so that matplotlib does
    not read the name as mathematical text."""
    return printable(name, _TITLE_LIMIT).replace("$", r"\$")


def check_plot_path(path: Path) -> None:
    """Refuse a ``--plot`` target before any planning: a suffix that is not .png or .svg, or
    a path :func:`~mmcli.atomic.atomic_write` would refuse (a device, an input, a directory,
    a missing parent directory)."""
    _plot_format(path)
    check_target(path)


def _plot_format(path: Path) -> str:
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise InputError(
            f"--plot: {printable(str(path))} is neither .png nor .svg",
            hint="name the image FILE.png or FILE.svg",
        )
    return fmt


def _nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def sweep_command(
    swept: Sweep,
    plot: Path | None,
    output_format: OutputFormat,
    est: Any,
    notes: Sequence[str] = (),
) -> None:
    """``--sweep``'s result: its table and chart (or JSON), the plot, then ``notes`` (lines
    for stderr held back until the command has succeeded), exit."""
    written = write_plot(swept, plot) if plot is not None else None
    if output_format is OutputFormat.json:
        doc = {"sweep": swept.to_json(), "exit_code": swept.exit_code}
        if est is not None:
            doc["memory_estimate"] = est.to_json()
        emit_json(doc)
    else:
        if est is not None:
            from mmcli.cli.kv_share.budget import estimate_panel

            stdout().print(estimate_panel(est))
        render_sweep(swept)
        out = stdout()
        for finding in swept.errors:
            out.print(f"error {escape(finding.code)}: {escape(finding.message)}", soft_wrap=True)
            if finding.hint:
                out.print(f"  hint: {escape(finding.hint)}", soft_wrap=True)
        if swept.errors:
            out.print("map invalid: the with-sharing series need a valid map")
        if swept.none_fits:
            out.print("the engine would refuse to start at every point of the sweep")
    for note in notes:  # said once the command has succeeded, never before an error
        stderr().print(note, markup=False)
    if written is not None:
        stderr().print(f"wrote {printable(str(written))}", markup=False)
    raise typer.Exit(swept.exit_code)
