"""``mmcli compare``: is CAND numerically REF? Every item pair measured, and why they differ."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from mmcli.cli._boundary import guarded
from mmcli.cli._output import OutputFormat, emit_json, stdout
from mmcli.cli.help import PanelledCommand
from mmcli.cli.options import DEVICE_HELP, FormatOpt
from mmcli.text import plural, printable

if TYPE_CHECKING:
    from mmcli.compare import CompareReport, PairReport
    from mmcli.compare.tolerance import Tolerance

app = typer.Typer()


class ProfileChoice(str, Enum):
    """The tolerance profile."""

    same_kernel = "same-kernel"
    kernel = "kernel"
    port = "port"


class PairChoice(str, Enum):
    """How two directories' dumps are paired."""

    auto = "auto"
    name = "name"
    tokens = "tokens"
    order = "order"


TOLERANCE = "Tolerance"
PAIRING = "Pairing and device"

EPILOG = (
    "Examples:\n\n"
    "  mmcli compare samples/compare/ref.safetensors samples/compare/scaled.safetensors\n\n"
    "  mmcli compare hf-dumps/ vllm-dumps/ --profile port --format json\n\n"
    "  mmcli compare ref.safetensors cand.safetensors --profile same-kernel --rtol 1e-2\n\n"
    "Profiles: same-kernel = torch.testing.assert_close defaults; kernel = transformers' "
    "attention-implementation test tolerances; port (default) = cosine floors (rows 0.99 "
    "bf16/fp16, 0.999 fp32; item 0.999, as vLLM's check_embeddings_close). "
    "Exit codes: 0 every pair within tolerance; 1 something differs; 2 bad arguments or "
    "input (a missing file, not a dump, directories that cannot be paired)."
)

_STYLE = {"ok": "green", "failed": "red", "error": "red", "warning": "yellow", "info": "dim"}


@app.command("compare", cls=PanelledCommand, epilog=EPILOG, no_args_is_help=True)
@guarded
def compare(
    ref: Annotated[str, typer.Argument(help="The reference: a dump file or a directory of dumps.")],
    cand: Annotated[
        str, typer.Argument(help="The candidate: a dump file or a directory of dumps.")
    ],
    profile: Annotated[
        ProfileChoice,
        typer.Option(
            "--profile",
            help="The tolerance: same-kernel, kernel or port.",
            rich_help_panel=TOLERANCE,
        ),
    ] = ProfileChoice.port,
    rtol: Annotated[
        float | None,
        typer.Option(
            "--rtol",
            help="Relative tolerance per element (overrides the profile).",
            rich_help_panel=TOLERANCE,
        ),
    ] = None,
    atol: Annotated[
        float | None,
        typer.Option(
            "--atol",
            help="Absolute tolerance per element (overrides the profile).",
            rich_help_panel=TOLERANCE,
        ),
    ] = None,
    min_cosine: Annotated[
        float | None,
        typer.Option(
            "--min-cosine",
            help="Least row and item cosine similarity (overrides the profile).",
            rich_help_panel=TOLERANCE,
        ),
    ] = None,
    pair: Annotated[
        PairChoice,
        typer.Option(
            "--pair",
            help="Directories: auto (file names, else token ids / mm_hashes), name, tokens, "
            "or order (capture order).",
            rich_help_panel=PAIRING,
        ),
    ] = PairChoice.auto,
    device: Annotated[
        str, typer.Option("--device", help=DEVICE_HELP, rich_help_panel=PAIRING)
    ] = "auto",
    output_format: FormatOpt = OutputFormat.table,
) -> None:
    """Compare encoder-output dumps: is the port numerically the reference, and if not, why."""
    from mmcli.compare import compare_dumps

    report = compare_dumps(
        ref,
        cand,
        profile=profile.value,
        rtol=rtol,
        atol=atol,
        min_cosine=min_cosine,
        pair=pair.value,
        device=device,
    )
    if output_format is OutputFormat.json:
        emit_json(report.to_json())
    else:
        _render(report)
    raise typer.Exit(report.exit_code)


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _cos(value: float | None) -> str:
    return "-" if value is None else f"{value:.6f}"


_HEADER = ("item", "shape", "dtype", "max abs", "rel RMSE", "cosine", "min row cos", "scale")


def _rows(p: PairReport) -> list[list[str]]:
    rows = [list(_HEADER) + ["status"]]
    for it in p.items:
        dtype = it.ref_dtype if it.ref_dtype == it.cand_dtype else f"{it.ref_dtype}/{it.cand_dtype}"
        shape = "[" + ", ".join(str(d) for d in it.ref_shape) + "]"
        if it.cand_shape != it.ref_shape:
            shape += " / [" + ", ".join(str(d) for d in it.cand_shape) + "]"
        m = it.metrics
        if m is None:
            figures = ["-"] * 5
        else:
            row = "" if m.row_cosine_min_row is None else f" ({m.row_cosine_min_row})"
            low = _cos(m.row_cosine_min) + row
            figures = [_g(m.max_abs), _g(m.rel_rmse), _cos(m.cosine), low, _g(m.scale)]
        status = "failed" if it.failed else ("identical" if m and m.bit_identical else "ok")
        rows.append([str(it.index), shape, dtype, *figures, status])
    return rows


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    right = {0, 3, 4, 5, 7}
    return [
        "  ".join(
            cell.rjust(w) if c in right else cell.ljust(w)
            for c, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def _tolerance_line(tol: Tolerance) -> str:
    parts = []
    if tol.elementwise:
        parts.append(f"rtol {tol.rtol:g}, atol {tol.atol:g}")
    if tol.min_row_cosine is not None:
        parts.append(f"min row cosine {tol.min_row_cosine:g}")
    if tol.min_item_cosine is not None:
        parts.append(f"min item cosine {tol.min_item_cosine:g}")
    if tol.max_rel_rmse is not None:
        parts.append(f"max rel RMSE {tol.max_rel_rmse:.4g}")
    return f"tolerance {tol.profile} ({tol.dtype}): {', '.join(parts)}"


def _line(*parts: str | tuple[str, str]) -> None:
    stdout().print(Text.assemble(*parts), soft_wrap=True, highlight=False)


def _render(report: CompareReport) -> None:
    from mmcli.compare.pairing import HOW

    seen: set[str] = set()
    for p in report.pairs:
        status = "failed" if p.failed else "ok"
        _line(("REF  " + printable(p.ref, None), "bold"))
        _line(
            ("CAND " + printable(p.cand, None), "bold"),
            f"  (paired by {HOW.get(p.how, p.how)})  ",
            (status, _STYLE[status]),
        )
        if p.items:
            for n, text in enumerate(_table(_rows(p))):
                _line((text, "bold") if n == 0 else text)
        for f in p.findings:
            _line(
                "  ",
                (f"{f.severity:<7}", _STYLE[f.severity]),
                " ",
                (f.code, "bold"),
                "  ",
                f.message,
            )
            if f.hint:
                _line(("    hint: " + f.hint, "dim"))
        for it in p.items:
            if it.metrics is not None:
                line = _tolerance_line(it.metrics.tolerance)
                if line not in seen:
                    seen.add(line)
                    _line((line, "dim"))
        _line("")
    for f in report.findings:
        _line((f"{f.severity:<7}", _STYLE[f.severity]), " ", (f.code, "bold"), "  ", f.message)
        if f.hint:
            _line(("  hint: " + f.hint, "dim"))
    for path in report.skipped:
        _line((f"skipped {printable(path, None)} (phase=profile: dummy inputs)", "dim"))
    s = report.summary()
    _line(
        (
            f"{plural(s['pairs'], 'pair')}, {plural(s['items'], 'item')} compared, "
            f"{s['failed_items']} failed, {plural(s['errors'], 'error')}, "
            f"{plural(s['infos'], 'note')}",
            "bold",
        )
    )
