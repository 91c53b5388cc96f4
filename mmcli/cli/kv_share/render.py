"""The Rich report of ``kv-share plan``: folded layer table, groups, memory, findings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from mmcli.cli._output import stdout
from mmcli.cli.kv_share.fold import Row, fold_layers
from mmcli.findings import count
from mmcli.kv.aliasing import AliasingReport
from mmcli.kv.releases import describe
from mmcli.kv.result import KVPlan, SidePlan
from mmcli.kv.spec import KVCacheSpec, Layer
from mmcli.kv.state import MambaSpec
from mmcli.text import human_bytes, index_ranges, plural

#: Beyond this many rows the folded table is cut (the JSON output has every layer).
MAX_ROWS = 200
#: Beyond this many layers, --all-layers prints plain lines: a Rich table of 100,000 rows
#: takes minutes to lay out.
PLAIN_ROWS = 2000
_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _dims(spec: KVCacheSpec | MambaSpec | None) -> str:
    if spec is None:
        return "–"
    if isinstance(spec, MambaSpec):
        return f"{spec.kind} state"
    return f"{spec.num_kv_heads}×{spec.head_size}"


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
    title = "KV-cache groups (after sharing)"
    if plan.engine_side == "without_sharing":
        title = "KV-cache groups with the what-if sharing (the engine does not share)"
    table = Table(title=title, title_justify="left")
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


def _memory_sides(plan: KVPlan) -> list[tuple[str, SidePlan | None]]:
    """The columns of the memory table: one when nothing is shared, else both sides."""
    w, wo = plan.with_sharing, plan.without_sharing
    if not plan.sharing_map() and w is not None:
        return [("", w)]
    if plan.engine_side == "without_sharing" and w is not None:
        return [("engine (no sharing)", wo), ("what-if sharing", w)]
    return [("with sharing", w), ("without sharing", wo)]


def _memory_panel(plan: KVPlan) -> Panel:
    sides = _memory_sides(plan)
    table = Table(box=None, show_header=len(sides) > 1, pad_edge=False)
    table.add_column("")
    for label, _ in sides:
        table.add_column(label, justify="right")

    def row(label: str, fn: Callable[[SidePlan], str | None]) -> None:
        table.add_row(label, *(_cell(s, fn(s) if s is not None else None) for _, s in sides))

    def some(attr: str) -> bool:
        return any(s is not None and getattr(s, attr) for _, s in sides)

    row("layers owning a cache", lambda s: str(s.owners))
    row("KV-cache groups", lambda s: f"{s.num_groups} × {s.group_size} layers")
    row("block", lambda s: f"{s.block_size:,} tokens")
    row("bytes per block", lambda s: f"{s.bytes_per_block:,} B")
    row("bytes per token", lambda s: f"{s.bytes_per_token:,} B")
    if some("state_bytes"):
        row("state per request", lambda s: f"{s.state_bytes:,} B")
    if plan.max_model_len is not None:
        per_sequence = f"per sequence ({plan.max_model_len:,} tokens)"
        row(per_sequence, lambda s: _maybe(s.per_sequence_bytes, human_bytes))
        row("blocks per request", lambda s: _maybe(s.blocks_per_request, "{:,}".format))
        if plan.options.sizes_pool:
            row("KV blocks", lambda s: _maybe(s.num_blocks, "{:,}".format))
            row("KV tokens", lambda s: _maybe(s.max_tokens, "{:,}".format))
            row("max concurrency", lambda s: _maybe(s.max_concurrency, "{:,.2f}×".format))
    opts = plan.options
    dtypes = "/".join(sorted({lay.spec.dtype for lay in plan.layers if lay.spec is not None}))
    title = f"KV memory per GPU · {dtypes} · tp {opts.tensor_parallel_size}"
    if opts.memory_bytes is not None:
        title += f" · {human_bytes(opts.memory_bytes)}"
    savings = plan.savings_fraction
    if not plan.sharing_map():
        subtitle = None
    elif savings is None:
        subtitle = "with-sharing figures need a valid map"
    elif plan.engine_side == "without_sharing":
        subtitle = f"sharing would save {savings:.1%} (the engine does not share)"
    else:
        subtitle = f"sharing saves {savings:.1%} of the KV cache per sequence"
    return Panel(table, title=title, subtitle=subtitle, expand=False)


def _maybe(value: Any, fmt: Callable[[Any], str]) -> str | None:
    return None if value is None else fmt(value)


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
    length = (
        "no max_model_len"
        if plan.max_model_len is None
        else f"max_model_len {plan.max_model_len:,}"
    )
    console.print(
        f"[bold]{escape(plan.model)}[/] ({plan.source} config) · {len(plan.layers)} layers · "
        f"{length} · {describe(plan.rules)}"
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
    map_errors = errors - count([f for f in plan.findings if f.code == "memory-too-small"], "error")
    if aliasing is None:
        console.print("aliasing check: skipped, the map has errors")
    elif aliasing.verified and aliasing.checked == 0:
        console.print(f"aliasing check ({aliasing.device}): nothing to check, no layer shares")
    elif aliasing.verified:
        console.print(
            f"aliasing check ({aliasing.device}): [green]verified[/], {aliasing.checked} "
            "sharing layers alias their target's cache and sit in its group"
        )
    else:
        console.print(f"aliasing check on {aliasing.device}: [bold red]FAILED[/]")
        for problem in aliasing.problems:
            console.print(f"  {escape(problem)}")
    status = "[bold red]map invalid[/]" if map_errors else "[green]map valid[/]"
    if errors > map_errors:
        status += ", [bold red]the engine would not start[/]"
    console.print(f"{status}: {plural(errors, 'error')}, {plural(warnings, 'warning')}")
