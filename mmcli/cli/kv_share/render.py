"""The Rich report of ``kv-share plan``: folded layer table, groups, memory, findings."""

from __future__ import annotations

from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from mmcli.cli._output import stdout
from mmcli.cli.kv_share.fold import Row, fold_layers
from mmcli.findings import count
from mmcli.kv.aliasing import AliasingReport
from mmcli.kv.plan import KVPlan, SidePlan
from mmcli.kv.spec import KVCacheSpec, Layer
from mmcli.text import human_bytes, index_ranges

#: Beyond this many rows the folded table is cut (the JSON output has every layer).
MAX_ROWS = 200
#: Beyond this many layers, --all-layers prints plain lines: a Rich table of 100,000 rows
#: takes minutes to lay out.
PLAIN_ROWS = 2000
_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _dims(spec: KVCacheSpec | None) -> str:
    return "–" if spec is None else f"{spec.num_kv_heads}×{spec.head_size}"


def _name_template(layers: list[Layer]) -> tuple[str, list[int]] | None:
    """``model.layers.{i}.self_attn.attn`` when names are that with their own index.

    Returns the template and the indices of the few layers named otherwise; None when the
    names follow no such pattern (then the table shows a name column).
    """
    first = layers[0].name
    if ".0." not in first:
        return None
    prefix = first.partition(".0.")[0]
    suffixes: dict[str, int] = {}
    odd: list[int] = []
    for i, layer in enumerate(layers):
        head = f"{prefix}.{i}."
        if layer.name.startswith(head):
            tail = layer.name[len(head) :]
            suffixes[tail] = suffixes.get(tail, 0) + 1
        else:
            odd.append(i)
    if len(suffixes) > 4 or len(odd) * 10 > len(layers):
        return None
    tails = list(suffixes)
    tail = tails[0] if len(tails) == 1 else "{" + ",".join(tails) + "}"
    return f"{prefix}.{{i}}.{tail}", odd


def _kv_cell(row: Row, index_of: dict[str, int]) -> str:
    if row.role == "none":
        return "[dim]no KV cache[/]"
    if row.role == "owns":
        return "owns"
    if row.target is not None:
        where = index_of.get(row.target)
        shown = str(where) if where is not None else f"{escape(row.target)} (not a layer)"
        return f"→ {shown}"
    return f"→ i−{row.offset}"


def _layer_table(plan: KVPlan, all_layers: bool) -> Table:
    rows = fold_layers(plan.layers, plan.group_of, expand=all_layers)
    found = _name_template(plan.layers)
    if found is not None and all_layers and found[1]:
        found = None  # one row per layer: show each name rather than list the odd ones
    template, odd = found if found is not None else (None, [])
    title = f"layers ({len(plan.layers)})"
    columns = ["layers", "name", "attention", "heads×dim", "window", "KV cache"]
    if template is not None:
        # Names that only repeat the index go to the title, leaving room for the rest.
        title += f": {escape(template)}"
        columns.remove("name")
    table = Table(title=title, title_justify="left")
    # Short cells never wrap; the long ones (ranges, names, targets) wrap rather than vanish.
    widths = {"layers": 7, "name": 12, "KV cache": 8}
    for column in columns:
        table.add_column(
            column,
            no_wrap=column not in widths,
            min_width=widths.get(column),
            overflow="fold" if column in widths else "ellipsis",
        )
    table.add_column("group", justify="right", no_wrap=True, min_width=5)
    shown = rows if all_layers else rows[:MAX_ROWS]
    index_of: dict[str, int] = {}
    for i, layer in enumerate(plan.layers):
        index_of.setdefault(layer.name, i)
    for row in shown:
        count = len(row.indices)
        label = index_ranges(row.indices) + (f" ({count} layers)" if count > 1 else "")
        spec = row.spec
        window = getattr(spec, "sliding_window", None)
        cells = [label]
        if template is None:
            first = plan.layers[row.indices[0]].name
            cells.append(escape(first if count == 1 else f"{first} …"))
        table.add_row(
            *cells,
            escape(row.kind),
            _dims(spec),
            str(window) if window is not None else "–",
            _kv_cell(row, index_of),
            index_ranges(sorted(row.groups)) or "–",
        )
    notes = [f"layer {i} is named {plan.layers[i].name}" for i in odd[:5]]
    if len(odd) > 5:
        notes.append(f"{len(odd) - 5} more layers named otherwise (see --all-layers)")
    if len(shown) < len(rows):
        notes.append(
            f"{len(rows) - len(shown)} more rows not shown: use --all-layers or --format json"
        )
    if notes:
        table.caption = escape("; ".join(notes))
        table.caption_justify = "left"
    return table


def _group_table(plan: KVPlan) -> Table:
    table = Table(title="KV-cache groups (after sharing)", title_justify="left")
    for column in ("group", "attention", "heads×dim", "dtype", "layers", "layer indices"):
        table.add_column(
            column,
            no_wrap=column != "layer indices",
            min_width=16 if column == "layer indices" else None,
        )
    index_of = {layer.name: i for i, layer in enumerate(plan.layers)}
    for group in plan.groups:
        spec = group.spec
        window = getattr(spec, "sliding_window", None)
        attention = group.attention + (f" ({window})" if window is not None else "")
        owners = len(plan.owner_groups[group.index].layer_names)
        shared = len(group.layer_names) - owners
        count = f"{owners} own" + (f" + {shared} share" if shared else "")
        indices = [index_of[name] for name in group.layer_names]
        table.add_row(
            str(group.index),
            attention,
            _dims(spec),
            spec.dtype,
            count,
            index_ranges(indices, limit=6),
        )
    return table


def _cell(side: SidePlan | None, value: str | None) -> str:
    return "–" if side is None or value is None else value


def _memory_panel(plan: KVPlan) -> Panel:
    w, wo = plan.with_sharing, plan.without_sharing
    table = Table(box=None, show_header=True, pad_edge=False)
    table.add_column("")
    table.add_column("with sharing", justify="right")
    table.add_column("without sharing", justify="right")

    def row(label: str, fn: object) -> None:
        assert callable(fn)
        table.add_row(label, *(_cell(s, fn(s) if s is not None else None) for s in (w, wo)))

    row("layers owning a cache", lambda s: str(s.owners))
    row("KV-cache groups", lambda s: f"{s.num_groups} × {s.group_size} layers")
    row("bytes per token", lambda s: f"{s.bytes_per_token:,} B")
    row(
        f"per sequence ({plan.max_model_len:,} tokens)", lambda s: human_bytes(s.per_sequence_bytes)
    )
    row("blocks per request", lambda s: f"{s.blocks_per_request:,}")
    if plan.options.memory_bytes is not None:
        row("KV blocks", lambda s: f"{s.num_blocks:,}")
        row("KV tokens", lambda s: f"{s.max_tokens:,}")
        row("max concurrency", lambda s: f"{s.max_concurrency:,.2f}×")
    opts = plan.options
    dtypes = "/".join(sorted({lay.spec.dtype for lay in plan.layers if lay.spec is not None}))
    title = (
        f"KV memory per GPU · page {plan.page_size_bytes:,} B · block {plan.block_size} · "
        f"{dtypes} · tp {opts.tensor_parallel_size}"
    )
    if opts.memory_bytes is not None:
        title += f" · budget {human_bytes(opts.memory_bytes)}"
    savings = plan.savings_fraction
    subtitle = (
        f"sharing saves {savings:.1%} of the KV cache per sequence"
        if savings is not None
        else "with-sharing figures need a valid map"
    )
    return Panel(table, title=title, subtitle=subtitle, expand=False)


def _print_plain_layers(plan: KVPlan) -> None:
    """One plain, tab-separated line per layer (for --all-layers on very deep models)."""
    console = stdout()
    console.file.write("index\tname\tattention\theads×dim\twindow\tKV cache\tgroup\n")
    lines = []
    for i, layer in enumerate(plan.layers):
        spec = layer.spec
        window = getattr(spec, "sliding_window", None)
        target = layer.kv_sharing_target
        kv = "no KV cache" if spec is None and target is None else "owns"
        if target is not None:
            kv = f"→ {target}"
        group = plan.group_of[i]
        lines.append(
            f"{i}\t{layer.name}\t{layer.attention}\t{_dims(spec)}\t"
            f"{'–' if window is None else window}\t{kv}\t{'–' if group is None else group}\n"
        )
    console.file.write("".join(lines))
    console.file.flush()


def render_plan(plan: KVPlan, aliasing: AliasingReport | None, *, all_layers: bool) -> None:
    """Print the plan report on stdout."""
    console = stdout()
    console.print(
        f"[bold]{escape(plan.model)}[/] ({plan.source} config) · {len(plan.layers)} layers · "
        f"max_model_len {plan.max_model_len:,}"
    )
    if all_layers and len(plan.layers) > PLAIN_ROWS:
        _print_plain_layers(plan)
    else:
        console.print(_layer_table(plan, all_layers))
    if plan.groups:
        console.print(_group_table(plan))
    if plan.with_sharing is None and plan.without_sharing is None:
        console.print(
            "KV memory: not planned (the map has errors, and the layers' KV specs differ)"
        )
    else:
        console.print(_memory_panel(plan))
    for f in plan.findings:
        style = _SEVERITY_STYLE.get(f.severity, "")
        console.print(f"[{style}]{f.severity}[/] [bold]{f.code}[/]: {escape(f.message)}")
        if f.hint:
            console.print(f"  [dim]hint: {escape(f.hint)}[/]")
    errors, warnings = count(plan.findings, "error"), count(plan.findings, "warning")
    if aliasing is None:
        console.print("aliasing check: skipped, the map has errors")
    elif aliasing.verified:
        console.print(
            f"aliasing check ({aliasing.device}): [green]verified[/], {aliasing.checked} "
            "sharing layers alias their target's cache and sit in its group"
        )
    else:
        console.print(f"aliasing check on {aliasing.device}: [bold red]FAILED[/]")
        for problem in aliasing.problems:
            console.print(f"  {escape(problem)}")
    status = "[bold red]map invalid[/]" if errors else "[green]map valid[/]"
    console.print(f"{status}: {errors} errors, {warnings} warnings")
