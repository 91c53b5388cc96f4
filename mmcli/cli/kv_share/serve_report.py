"""The "vllm serve settings" section of ``kv-share plan``'s report: what a serve line set."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from mmcli.cli._output import stdout
from mmcli.cli.kv_share.fit import fit_columns

if TYPE_CHECKING:
    from mmcli.kv import ServeArgs


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def serve_table(serve: ServeArgs) -> Table:
    """The settings applied under vLLM's names, with their values and flags, then the flags
    accepted as not affecting the plan."""
    table = Table(
        title=f"vllm serve settings (read with the flags of vLLM {serve.release})",
        title_justify="left",
    )
    table.add_column("setting", no_wrap=True)
    table.add_column("value", overflow="fold", min_width=12)
    table.add_column("flag", no_wrap=True)
    if serve.model is not None:
        table.add_row("model", escape(serve.model), "MODEL")
    for name, value in serve.applied.items():
        table.add_row(name, escape(_value(value)), serve.sources.get(name, ""))
    if serve.not_affecting:
        table.add_section()
        table.add_row("not affecting the plan", escape(", ".join(serve.not_affecting)), "")
    return fit_columns(table, stdout())
