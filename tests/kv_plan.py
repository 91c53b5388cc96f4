"""``kv-share plan …`` for tests that read the plan's JSON: the command line is parsed by the
command's own options into a :class:`~mmcli.kv.PlanRequest`, planned through the library
(``plan_run``), and the run's document returned — what ``--format json`` prints
(tests/kv/test_run.py holds the two equal). ``cli_plan_json`` runs the command itself."""

from __future__ import annotations

import json
from typing import Any

import typer.main
from typer.testing import CliRunner

from mmcli.cli.kv_share import OUTPUT_PARAMETERS
from mmcli.cli.main import app
from mmcli.kv import PlanRequest, plan_run


def plan_request(*args: str) -> PlanRequest:
    """The request ``kv-share plan ARGS`` builds (its options parsed as the command parses them)."""
    group: Any = typer.main.get_command(app)
    command = group.commands["kv-share"].commands["plan"]
    params = dict(command.make_context("plan", list(args)).params)
    for name in OUTPUT_PARAMETERS:
        params.pop(name, None)
    return PlanRequest(**params)


def plan_json(*args: str, code: int = 0) -> dict[str, Any]:
    """The JSON plan of ``kv-share plan ARGS`` through the library, asserting its exit code."""
    run = plan_run(plan_request(*args))
    assert run.exit_code == code, [f.message for f in (run.plan.findings if run.plan else [])]
    doc: dict[str, Any] = json.loads(json.dumps(run.to_json()))
    return doc


def cli_plan_json(*args: str, code: int = 0) -> dict[str, Any]:
    """The JSON plan ``kv-share plan ARGS --format json`` prints, asserting its exit code."""
    result = CliRunner().invoke(
        app, ["kv-share", "plan", *args, "--format", "json"], catch_exceptions=False
    )
    assert result.exit_code == code, result.stdout + result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc
