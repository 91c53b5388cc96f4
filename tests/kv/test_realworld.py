"""Published vLLM start-up numbers, reproduced with the rules of the release that printed them.

The cases live in ``tests/kv/realworld`` (``cases.json``, the model configs, and
``PROVENANCE.md`` with each figure's source). vLLM prints "Available KV cache memory" to
0.01 GiB, so each case is planned at both ends of ``mem_gib ± 0.005 GiB``; the printed "GPU KV
cache size" and "Maximum concurrency" (to 0.01) must fall between the two plans' figures.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app

REALWORLD = Path(__file__).resolve().parent / "realworld"
GiB = 2**30

#: Options of mmcli 0.1 that the cases use, mapped to today's names.
RENAMED = {"--kv-dtype": "--kv-cache-dtype"}


def load_cases() -> list[dict[str, Any]]:
    path = REALWORLD / "cases.json"
    cases: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return cases


CASES = load_cases()


def plan(case: dict[str, Any], memory_bytes: int) -> dict[str, Any]:
    args = [RENAMED.get(a, a) for a in case["args"]]
    command = [
        "kv-share",
        "plan",
        str(REALWORLD / "configs" / case["config"]),
        "--vllm-version",
        case["vllm_version"],
        "--max-model-len",
        str(case["max_model_len"]),
        "--memory",
        str(memory_bytes),
        "--format",
        "json",
        *args,
    ]
    result = CliRunner().invoke(app, command, catch_exceptions=False)
    assert result.exit_code == 0, result.stdout + result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def engine_figures(doc: dict[str, Any]) -> tuple[int, float]:
    side = doc["engine_side"]
    memory = doc["memory"]
    return memory["max_tokens"][side], memory["max_concurrency"][side]


def test_the_cases_are_there() -> None:
    # The repository owns its cases; an empty list would make the test below vacuous.
    assert len(CASES) >= 8, f"no real-world cases found under {REALWORLD}"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_published_start_up_numbers(case: dict[str, Any]) -> None:
    gib = Decimal(case["mem_gib"])
    low = plan(case, int((gib - Decimal("0.005")) * GiB))
    high = plan(case, int((gib + Decimal("0.005")) * GiB))
    assert low["vllm_rules"]["release"] == case["vllm_version"]
    tokens_low, conc_low = engine_figures(low)
    tokens_high, conc_high = engine_figures(high)
    assert tokens_low <= case["tokens"] <= tokens_high, (tokens_low, tokens_high)
    assert round(conc_low, 2) <= case["conc"] <= round(conc_high, 2), (conc_low, conc_high)
