"""The pipeline-stage table of ``kv-share plan -pp N``: what each stage holds and sizes."""

from __future__ import annotations

from rich.table import Table

from mmcli.kv import KVPlan, SidePlan


def _engine_side(plan: KVPlan) -> SidePlan | None:
    return plan.with_sharing if plan.engine_side == "with_sharing" else plan.without_sharing


def stage_table(plan: KVPlan) -> Table | None:
    """One row per stage of the side the engine runs (None with one stage)."""
    side = _engine_side(plan)
    if side is None or not side.stages:
        return None
    table = Table(
        title=f"pipeline stages ({len(side.stages)}): the engine takes the fewest blocks",
        title_justify="left",
    )
    for column in ("stage", "layers", "owners", "bytes per block", "KV blocks", "check (GiB)"):
        table.add_column(column, justify="left" if column == "layers" else "right", no_wrap=True)
    fewest = min((s.num_blocks for s in side.stages if s.num_blocks is not None), default=None)
    for stage in side.stages:
        blocks = "–" if stage.num_blocks is None else f"{stage.num_blocks:,}"
        if stage.num_blocks is not None and stage.num_blocks == fewest:
            blocks = f"[bold]{blocks}[/]"
        check = "–"
        if stage.request_bytes is not None and stage.check_memory_bytes is not None:
            need, have = stage.request_bytes / 2**30, stage.check_memory_bytes / 2**30
            fits = stage.request_bytes <= stage.check_memory_bytes
            check = f"{need:.2f} of {have:.2f}" + ("" if fits else " [bold red]✗[/]")
        table.add_row(
            str(stage.index),
            f"{stage.first_layer}–{stage.last_layer}",
            f"{stage.owners:,}",
            f"{stage.bytes_per_block:,} B",
            blocks,
            check,
        )
    if side.stages[0].request_bytes is None and side.num_blocks is not None:
        table.caption = "this release checks the whole model once, against one stage's memory"
        table.caption_justify = "left"
    return table
