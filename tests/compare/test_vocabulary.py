"""The compare codes: each documented in docs/compare.md and exercised by a test here."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmcli.compare.findings import CODES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("code", sorted(CODES))
def test_code_is_documented_and_tested(code: str) -> None:
    doc = (ROOT / "docs" / "compare.md").read_text(encoding="utf-8")
    assert f"| `{code}` | {CODES[code]} |" in doc, f"{code} is not in the findings table"
    tests = [
        p
        for p in (ROOT / "tests" / "compare").glob("test_*.py")
        if p.name != Path(__file__).name and f'"{code}"' in p.read_text(encoding="utf-8")
    ]
    assert tests, f"no test in tests/compare/ expects {code}"
