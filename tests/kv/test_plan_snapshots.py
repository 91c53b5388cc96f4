"""``kv-share plan`` prints what it printed when the snapshots were taken (plan_snapshots.py)."""

from __future__ import annotations

import json

import pytest
from plan_snapshots import FIXTURE, ROOT, cases, configs, digest

STORED: dict[str, dict[str, object]] = json.loads(FIXTURE.read_text("utf-8"))
CASES = dict(cases())


def test_every_bundled_config_has_its_snapshots() -> None:
    missing = sorted(set(CASES) - set(STORED))
    assert not missing, f"run `python tests/plan_snapshots.py --write`: {missing[:3]}"
    assert {case.split(" :: ")[1] for case in STORED} <= set(configs())


@pytest.mark.parametrize("case", sorted(STORED))
def test_the_output_is_unchanged(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert digest(CASES[case]) == STORED[case]
