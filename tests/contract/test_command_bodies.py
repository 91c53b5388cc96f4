"""The commands stay thin: options in, a library call, a render out. ``kv-share plan`` builds a
:class:`~mmcli.kv.PlanRequest`, calls :func:`~mmcli.kv.plan_run` and renders; its body (the
statements after the docstring) stays within 40 lines, so planning logic lands in the
library, not in the command."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _body_lines(path: Path, name: str) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    body = func.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    end = body[-1].end_lineno or body[-1].lineno
    return end - body[0].lineno + 1


def test_the_plan_command_is_request_call_render() -> None:
    path = ROOT / "mmcli" / "cli" / "kv_share" / "__init__.py"
    assert _body_lines(path, "plan") <= 40
    source = path.read_text(encoding="utf-8")
    assert "PlanRequest(" in source and "plan_run(" in source
