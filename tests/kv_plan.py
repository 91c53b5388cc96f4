"""``kv-share plan … --format json`` run in-process, for tests that read the plan's JSON."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from mmcli.cli.main import app


def plan_json(*args: str, code: int = 0) -> dict[str, Any]:
    """The JSON plan of ``kv-share plan ARGS``, asserting its exit code."""
    result = CliRunner().invoke(
        app, ["kv-share", "plan", *args, "--format", "json"], catch_exceptions=False
    )
    assert result.exit_code == code, result.stdout + result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc
