"""The Rich report of ``kv-share plan``: folded layer table, groups, memory, findings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import compress, islice, repeat, tee
from itertools import count as numbers
from operator import attrgetter, eq, is_not, ne, sub
from typing import Any

from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from mmcli.cli._output import stdout
from mmcli.cli.kv_share.fit import fit_columns
from mmcli.cli.kv_share.fold import Folded, Row, first_index, fold_layers, fold_rows
from mmcli.cli.kv_share.stages import stage_table
from mmcli.findings import count
from mmcli.kv import (
    ENGINE_CODES,
    AliasingReport,
    KVCacheSpec,
    KVPlan,
    MambaSpec,
    SidePlan,
    describe,
)
from mmcli.text import human_bytes, index_ranges, plural

#: Beyond this many rows the folded table is cut (the JSON output has every layer).
MAX_ROWS = 200
#: Beyond this many layers, --all-layers prints plain lines: a Rich table of 100,000 rows
#: takes minutes to lay out.
PLAIN_ROWS = 2000
#: Lines --all-layers writes at a time.
_PLAIN_CHUNK = 65536
_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _dims(spec: KVCacheSpec | MambaSpec | None) -> str:
    if spec is None:
        return "–"
    if isinstance(spec, MambaSpec):
        return f"{spec.kind} state"
    return f"{spec.num_kv_heads}×{spec.head_size}"


def _name_template(names: Sequence[str]) -> tuple[str, list[int]] | None:
    """``model.layers.{i}.self_attn.attn`` when names are that with their own index.

    Returns the template and the indices of the few layers named otherwise; None when the
    names follow no such pattern (then the table shows a name column).
    """
    first = names[0]
    if ".0." not in first:
        return None
    prefix = first.partition(".0.")[0]
    n = len(names)
    suffixes: dict[str, int] = {}  # each tail, in order of first use: how many layers
    odd: list[int] = []
    todo: Sequence[int] = range(n)  # the layers not yet matched, ascending
    k = 0
    while k < len(todo):
        i = todo[k]
        head = f"{prefix}.{i}."
        if not names[i].startswith(head):
            odd.append(i)
            if len(odd) * 10 > n:
                return None
            k += 1
            continue
        if len(suffixes) == 4:
            return None  # a fifth tail
        tail = names[i][len(head) :]
        # Every layer left named prefix.<its index>.tail, checked at C level.
        pattern = f"{prefix}.%d.{tail}" if "%" not in prefix + tail else None
        rest = todo[k:]
        expected = (
            map(pattern.__mod__, rest)
            if pattern is not None
            else (f"{prefix}.{j}.{tail}" for j in rest)
        )
        named = names if len(rest) == n else map(names.__getitem__, rest)
        todo = list(compress(rest, map(ne, named, expected)))
        suffixes[tail] = len(rest) - len(todo)
        k = 0
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


def _layer_table(plan: KVPlan, folded: Folded, all_layers: bool, names: list[str]) -> Table:
    """The layer table: the folded rows (the first of them), or one row per layer."""
    rows, count_rows, index_of = folded.rows, folded.count, folded.index_of
    found = _name_template(names)
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
    # Short cells never wrap; the long ones (ranges, names, targets) wrap rather than vanish,
    # and a state's dims ("mamba2 state") at their space.
    widths = {"layers": 7, "name": 12, "KV cache": 8}
    for column in columns:
        table.add_column(
            column,
            no_wrap=column not in widths and column != "heads×dim",
            min_width=widths.get(column),
            overflow="fold" if column in widths else "ellipsis",
        )
    table.add_column("group", justify="right", no_wrap=True, min_width=5)
    for row in rows:
        count = row.size
        label = index_ranges(row.indices) + (f" ({count} layers)" if count > 1 else "")
        spec = row.spec
        window = getattr(spec, "sliding_window", None)
        cells = [label]
        if template is None:
            first = names[row.first]
            cells.append(escape(first if count == 1 else f"{first} …"))
        table.add_row(
            *cells,
            escape(row.kind),
            _dims(spec),
            str(window) if window is not None else "–",
            _kv_cell(row, index_of),
            index_ranges(sorted(row.groups)) or "–",
        )
    notes = [f"layer {i} is named {names[i]}" for i in odd[:5]]
    if len(odd) > 5:
        notes.append(f"{len(odd) - 5} more layers named otherwise (see --all-layers)")
    if len(rows) < count_rows:
        notes.append(
            f"{count_rows - len(rows)} more rows not shown: use --all-layers or --format json"
        )
    if notes:
        table.caption = escape("; ".join(notes))
        table.caption_justify = "left"
    return table


def _group_table(plan: KVPlan) -> Table:
    """The groups, each with its layers' indices."""
    title = "KV-cache groups (after sharing)"
    if plan.engine_side == "without_sharing":
        title = "KV-cache groups with the what-if sharing (the engine does not share)"
    table = Table(title=title, title_justify="left")
    # As in the layer table: short cells never wrap; long ones (window, counts, ranges) do.
    for column in ("group", "attention", "heads×dim", "dtype", "layers", "layer indices"):
        table.add_column(
            column,
            no_wrap=column not in ("attention", "layers", "layer indices"),
            min_width=16 if column == "layer indices" else None,
        )
    # A plan's group_of gives each layer's group, which holds the layer's name (its names are
    # unique: a plan with a duplicate name has no groups). Unless the counts disagree, read
    # the indices off it rather than map a million names back to their index.
    group_of = plan.group_of
    sizes = Counter(group_of)
    index_of = None
    if not all(g.index == k and sizes[k] == len(g.layer_names) for k, g in enumerate(plan.groups)):
        index_of = first_index([layer.name for layer in plan.layers])
    for group in plan.groups:
        spec = group.spec
        window = getattr(spec, "sliding_window", None)
        attention = group.attention + (f" ({window})" if window is not None else "")
        owners = len(plan.owner_groups[group.index].layer_names)
        shared = len(group.layer_names) - owners
        count = f"{owners} own" + (f" + {shared} share" if shared else "")
        if index_of is None:
            indices = _group_ranges(group_of, group.index, limit=6)
        else:
            indices = index_ranges(list(map(index_of.__getitem__, group.layer_names)), limit=6)
        table.add_row(str(group.index), attention, _dims(spec), spec.dtype, count, indices)
    return table


def _group_ranges(group_of: list[int | None], g: int, *, limit: int) -> str:
    """``index_ranges`` of the layers in group ``g``, read lazily off ``group_of``: of a
    million layers, only the first ranges and the last are shown."""
    n = len(group_of)

    def breaks(forward: bool) -> Iterator[tuple[int, int]]:
        # Each pair of the group's layers, in order, that are not neighbours: one range ends
        # at the first, the next begins at the second.
        if forward:
            where = compress(numbers(), map(eq, group_of, repeat(g)))
        else:
            where = compress(numbers(n - 1, -1), map(eq, reversed(group_of), repeat(g)))
        a, b, a2, b2 = tee(where, 4)
        next(b, None)
        next(b2, None)
        step = 1 if forward else -1
        return compress(zip(a, b, strict=False), map(ne, map(sub, b2, a2), repeat(step)))

    first = next(compress(numbers(), map(eq, group_of, repeat(g))), None)
    if first is None:
        return ""
    last = next(compress(numbers(n - 1, -1), map(eq, reversed(group_of), repeat(g))))
    cuts = list(islice(breaks(True), max(limit, 2)))
    if len(cuts) < limit:
        starts, ends = [first, *(b for _, b in cuts)], [*(a for a, _ in cuts), last]
        return ", ".join(map(_span, starts, ends))
    second = _span(cuts[0][1], cuts[1][0] if len(cuts) > 1 else last)
    return ", ".join([_span(first, cuts[0][0]), second, "…", _span(next(breaks(False))[0], last)])


def _span(start: int, end: int) -> str:
    return str(start) if start == end else f"{start}–{end}"


def _cell(side: SidePlan | None, value: str | None) -> str:
    return "–" if side is None or value is None else value


def _memory_sides(plan: KVPlan, shares: bool) -> list[tuple[str, SidePlan | None]]:
    """The columns of the memory table: one when nothing is shared, else both sides."""
    w, wo = plan.with_sharing, plan.without_sharing
    if not shares and w is not None:
        return [("", w)]
    if plan.engine_side == "without_sharing" and w is not None:
        return [("engine (no sharing)", wo), ("what-if sharing", w)]
    return [("with sharing", w), ("without sharing", wo)]


def _memory_panel(plan: KVPlan, specs: Iterable[KVCacheSpec | MambaSpec | None]) -> Panel:
    """The memory figures; ``specs`` holds every layer's spec (each at least once)."""
    # Whether any layer shares (plan.sharing_map() is non-empty), without building the map.
    targets = map(attrgetter("kv_sharing_target"), plan.layers)
    shares = any(map(is_not, targets, repeat(None)))
    sides = _memory_sides(plan, shares)
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
    dtypes = "/".join(sorted({spec.dtype for spec in specs if spec is not None}))
    title = f"KV memory per GPU · {dtypes} · tp {opts.tensor_parallel_size}"
    if opts.pipeline_parallel_size > 1:
        title += f" · pp {opts.pipeline_parallel_size}"
    if opts.memory_bytes is not None:
        title += f" · {human_bytes(opts.memory_bytes)}"
    savings = plan.savings_fraction
    if not shares:
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


def _print_plain_layers(plan: KVPlan) -> list[KVCacheSpec | MambaSpec | None]:
    """One plain, tab-separated line per layer (for --all-layers on very deep models).

    Returns the layers' distinct spec objects.
    """
    console = stdout()
    console.file.write("index\tname\tattention\theads×dim\twindow\tKV cache\tgroup\n")
    layers = plan.layers
    specs = list(map(attrgetter("spec"), layers))
    targets = list(map(attrgetter("kv_sharing_target"), layers))
    # The columns that depend on the spec alone, made once per distinct spec (by identity:
    # layers share spec objects, and hashing a spec runs Python code).
    distinct = list(dict(zip(map(id, specs), specs, strict=True)).values())
    middle: dict[int, str] = {}
    owner_kv: dict[int, str] = {}
    for spec in distinct:
        window = getattr(spec, "sliding_window", None)
        attention = "none" if spec is None else spec.attention
        middle[id(spec)] = f"{attention}\t{_dims(spec)}\t{'–' if window is None else window}"
        owner_kv[id(spec)] = "no KV cache" if spec is None else "owns"
    # A sharing layer's KV column names its target; the others' come from their spec.
    kv_of_target = {t: f"→ {t}" for t in set(targets) if t is not None}
    kv = map(kv_of_target.get, targets, map(owner_kv.__getitem__, map(id, specs)))
    group_text = {g: "–" if g is None else str(g) for g in set(plan.group_of)}
    lines = map(
        "{}\t{}\t{}\t{}\t{}\n".format,
        range(len(layers)),
        map(attrgetter("name"), layers),
        map(middle.__getitem__, map(id, specs)),
        kv,
        map(group_text.__getitem__, plan.group_of),
    )
    while chunk := "".join(islice(lines, _PLAIN_CHUNK)):
        console.file.write(chunk)
    console.file.flush()
    return distinct


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
    specs: list[KVCacheSpec | MambaSpec | None]
    if all_layers and len(plan.layers) > PLAIN_ROWS:
        specs = _print_plain_layers(plan)
    else:
        names = list(map(attrgetter("name"), plan.layers))
        if all_layers:
            index_of = first_index(names)
            rows = fold_layers(plan.layers, plan.group_of, expand=True, index_of=index_of)
            folded = Folded(rows, len(rows), [row.spec for row in rows], index_of)
        else:
            folded = fold_rows(plan.layers, plan.group_of, limit=MAX_ROWS)
        console.print(fit_columns(_layer_table(plan, folded, all_layers, names), console))
        specs = folded.specs
    if plan.groups:
        console.print(fit_columns(_group_table(plan), console))
    if plan.with_sharing is None and plan.without_sharing is None:
        console.print(
            "KV memory: not planned (the map has errors, and the layers' KV specs differ)"
        )
    else:
        console.print(_memory_panel(plan, specs))
        stages = stage_table(plan)
        if stages is not None:
            console.print(stages)
    for f in plan.findings:
        style = _SEVERITY_STYLE.get(f.severity, "")
        console.print(f"[{style}]{f.severity}[/] [bold]{f.code}[/]: {escape(f.message)}")
        if f.hint:
            console.print(f"  [dim]hint: {escape(f.hint)}[/]")
    errors, warnings = count(plan.findings, "error"), count(plan.findings, "warning")
    map_errors = errors - count([f for f in plan.findings if f.code in ENGINE_CODES], "error")
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
