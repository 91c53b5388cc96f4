"""Every table ``kv-share plan`` prints fits an 80-column terminal.

Run through the CLI (``CliRunner``, ``COLUMNS=80``) on every sample of ``samples/kv`` and a
Gemma 4 config (its groups table was 86 columns wide), with the options that add a table:
``--all-layers``, ``-pp 2`` (the stage table), ``--sweep`` (a table and a chart) and
``--engine all`` (the engines side by side).

What is measured is every line of every table, as stdout has it: the console marks where
each drawn renderable (a table, a panel, a group) begins and ends. The report's sentences
(the header line, findings, hints) are not tables: in a pipe they stay whole, one line
each, so that grep finds them (``mmcli/cli/_output.py``); at a terminal they wrap.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.testing import CliRunner

from mmcli.cli import _output
from mmcli.cli.kv_share.fit import fit_columns
from mmcli.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
GEMMA4 = ROOT / "tests" / "kv" / "realworld" / "configs" / "google--gemma-4-E4B-it.text_config.json"
MODELS = [*sorted((ROOT / "samples" / "kv").iterdir()), GEMMA4]
WIDTH = 80
BEGIN, END = "<<drawn>>", "<</drawn>>"

#: Options → what they add to the report (every run has the layer table, the groups table
#: and the memory panel).
VARIANTS: dict[str, list[str]] = {
    "plan": ["--memory", "20GiB"],
    "all-layers": ["--memory", "20GiB", "--all-layers"],
    "pipeline": ["--memory", "20GiB", "-pp", "2"],
    "sweep": ["--max-model-len", "8192", "--sweep", "memory=8GiB..80GiB:4"],
    "engines": ["--memory", "20GiB", "--engine", "all"],
}
#: Runs refused as bad input (exit 2, no table): toy's sharing crosses the stage boundary.
REFUSED = {("toy.toml", "pipeline")}

runner = CliRunner()


@pytest.fixture
def marked(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each drawn renderable that stdout's console prints, between a BEGIN and an END line.

    The console is made afresh inside the run, so that it takes the run's COLUMNS (one made
    earlier in this process keeps its own width), and dropped afterwards.
    """
    real = Console.print

    def print_marked(self: Console, *objects: Any, **kwargs: Any) -> None:
        drawn = self is _output.stdout() and any(not isinstance(o, str | Text) for o in objects)
        if drawn:
            self.file.write(BEGIN + "\n")
        real(self, *objects, **kwargs)
        if drawn:
            self.file.write(END + "\n")

    _output.stdout.cache_clear()
    monkeypatch.setattr(Console, "print", print_marked)
    yield
    _output.stdout.cache_clear()


def drawn_lines(stdout: str) -> list[list[str]]:
    """The lines of each drawn renderable in ``stdout``."""
    blocks: list[list[str]] = []
    inside = False
    for line in stdout.splitlines():
        if line in (BEGIN, END):
            inside = line == BEGIN
            if inside:
                blocks.append([])
        elif inside:
            blocks[-1].append(line)
    return blocks


def plan_at_80(*args: str) -> list[list[str]]:
    """Run ``kv-share plan`` at 80 columns; the lines of each table it drew."""
    argv = ["kv-share", "plan", *args]
    result = runner.invoke(app, argv, env={"COLUMNS": str(WIDTH)}, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.stderr  # 1: the map or the memory is refused
    blocks = drawn_lines(result.stdout)
    assert blocks, result.stdout  # the run drew its tables, and the markers found them
    return blocks


@pytest.mark.usefixtures("marked")
@pytest.mark.parametrize(
    ("model", "variant"),
    [
        pytest.param(model, variant, id=f"{model.name}-{variant}")
        for model in MODELS
        for variant in VARIANTS
        if (model.name, variant) not in REFUSED
    ],
)
def test_every_table_fits_80_columns(model: Path, variant: str) -> None:
    blocks = plan_at_80(str(model), *VARIANTS[variant])
    wide = [
        f"{cell_len(line)}: {line}" for block in blocks for line in block if cell_len(line) > WIDTH
    ]
    assert not wide, "\n".join(wide)


@pytest.mark.usefixtures("marked")
def test_the_gemma4_groups_table_wraps_its_long_cells() -> None:
    """Its 6 columns were 86 wide, all but the index ranges kept on one line: now the
    window and the own + share counts wrap."""
    blocks = plan_at_80(str(GEMMA4), "--memory", "20GiB")
    groups = next(block for block in blocks if any("layer indices" in line for line in block))
    assert max(map(cell_len, groups)) <= WIDTH
    assert any("4 own + 15" in line for line in groups)
    assert any("share" in line and "own" not in line for line in groups)  # wrapped


def test_fit_columns_honours_min_width_where_rich_alone_does_not() -> None:
    """Rich narrows the wrapping columns past their minima, then widens them back: a table
    2 columns too wide, run past the edge in a pipe (and cropped at a terminal)."""

    def table() -> Table:  # the layer table's columns (render.py)
        t = Table()
        minima = {"layers": 7, "name": 12, "KV cache": 8}
        for column in ("layers", "name", "attention", "heads×dim", "window", "KV cache"):
            wraps = column in minima or column == "heads×dim"
            t.add_column(column, no_wrap=not wraps, min_width=minima.get(column), overflow="fold")
        t.add_column("group", no_wrap=True, min_width=5)
        t.add_row("0", "model.layers.0.self_attn.attn", "full", "8×128", "–", "owns", "0")
        t.add_row("5", "model.layers.6.mlp", "none", "mamba2 state", "–", "no KV cache", "–")
        return t

    def width(t: Table) -> int:
        console = Console(width=WIDTH, file=io.StringIO(), record=True)
        console.print(t, soft_wrap=True)  # as in a pipe: nothing cropped
        return max(map(cell_len, console.export_text().splitlines()))

    assert width(table()) == WIDTH + 2
    console = Console(width=WIDTH, file=io.StringIO())
    fitted = fit_columns(table(), console)
    assert width(fitted) <= WIDTH
    assert [c.max_width for c in fitted.columns] == [7, 12, None, 9, None, 9, None]
    roomy = fit_columns(table(), Console(width=200, file=io.StringIO()))
    assert all(c.max_width is None for c in roomy.columns)  # it fits: untouched


def test_each_run_reads_the_width_anew() -> None:
    """Two runs in one process at 160 and then 80 columns draw tables of those widths: the
    consoles are not kept from the first run (the suite passed in one order only before)."""
    sample = Path(__file__).resolve().parents[2] / "samples" / "kv" / "gemma3n-e2b-like.json"
    widths = []
    for columns in ("160", "80"):
        result = CliRunner(env={"COLUMNS": columns}).invoke(
            app, ["kv-share", "plan", str(sample), "--memory", "20GiB"], catch_exceptions=False
        )
        assert result.exit_code == 0, result.stderr
        widths.append(max(cell_len(line) for line in result.stdout.splitlines() if "┃" in line))
    assert widths[1] <= 80 < widths[0]


@pytest.mark.usefixtures("marked")
def test_the_serve_settings_table_fits_80_columns() -> None:
    """A serve line's section: the applied settings under vLLM's names, a JSON value wrapped,
    and the flags accepted as not affecting the plan (vLLM 0.34.0
    vllm/entrypoints/common/cli_args.py has host, port and api_key;
    vllm/engine/arg_utils.py registers --served-model-name)."""
    from mmcli.kv.serve_flags import releases

    spec = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'
    line = (
        f"vllm serve -tp 2 --speculative-config '{spec}' --max-model-len 4096 --host 0.0.0.0 "
        "--port 8000 --served-model-name a-rather-long-served-model-name --api-key x"
    )
    blocks = plan_at_80(str(MODELS[0].parent / "qwen3-14b-like.json"), "--memory", "20GiB",
                        "--serve", line)  # fmt: skip
    serve = next(block for block in blocks if any("vllm serve settings" in b for b in block))
    assert max(map(cell_len, serve)) <= WIDTH
    text = "\n".join(serve)
    assert f"flags of vLLM {releases()[-1]}" in text
    assert "tensor_parallel_size" in text and "speculative_config" in text
    assert "not affecting the plan" in text and "--served-model-name" in text
