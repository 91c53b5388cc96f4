"""``kv-share explain`` of an SGLang or TensorRT-LLM start-up log: the logged figures beside
the ones mmcli plans for the same run."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from mmcli.cli._output import OutputFormat, emit_json, stdout
from mmcli.errors import EXIT_FINDINGS, EXIT_OK

_STATUS = {"match": "[green]match[/]", "differs": "[bold red]differs[/]", "not in log": "[dim]–[/]"}


def explain_engine_log(head: bytes, config_path: Path, output_format: OutputFormat) -> int | None:
    """Explain the log (its first bytes) if it is SGLang's or TensorRT-LLM's; the exit code,
    or None if not."""
    from mmcli.kv import (
        SglangLog,
        engine_log_of,
        explain_sglang,
        explain_trtllm,
        load_config,
        read_document,
        refuse_deepseek_v4_on_sglang,
    )

    log = engine_log_of(head)
    if log is None:
        return None
    if isinstance(log, SglangLog):
        refuse_deepseek_v4_on_sglang(config_path, None)
    config = load_config(config_path)
    doc = read_document(config_path) if config.source == "hf" else {}
    if isinstance(log, SglangLog):
        result = explain_sglang(config, doc, log)
    else:
        result = explain_trtllm(config, doc, log)
    exit_code = EXIT_OK if result.matches else EXIT_FINDINGS
    if output_format is OutputFormat.json:
        emit_json(result.to_json(exit_code=exit_code))
        return exit_code
    names = {"sglang": "SGLang", "trtllm": "TensorRT-LLM"}
    console = stdout()
    console.print(
        f"log: {names[result.engine]} · plan: {escape(result.model)} · "
        f"{names[result.engine]} {escape(result.release)} rules"
    )
    table = Table(title="log vs plan", title_justify="left")
    for column in ("figure", "log", "plan", ""):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for row in result.rows:
        table.add_row(
            escape(row.figure), escape(row.logged), escape(row.planned), _STATUS[row.status]
        )
    console.print(table)
    for note in result.notes:
        console.print(f"• {escape(note)}")
    verdict = "the plan reproduces the log" if result.matches else "the plan differs from the log"
    console.print(f"[bold]{verdict}[/]")
    return exit_code
