"""The repository owns everything its tests, scripts and Makefile read.

A fresh ``git clone`` has nothing beside it: a test that reads ``../shared`` (or climbs out of
the repository with ``parents[N]`` / ``.parent`` chains / ``ROOT.parent``) passes where that
folder happens to exist and fails for every user. Data the tests need is copied in, with its
provenance (``tests/kv/realworld/PROVENANCE.md``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = ("mmcli", "tests", "benchmarks", "e2e", "examples", "samples")
SCRIPTS = ["Makefile", ".ci/run"]

#: A path outside the repository named by a string: the folder beside it, or a machine path.
OUTSIDE = re.compile(r"""/\s*["']shared["']|["']shared["']\s*/|/shared/|["']/work/""")
#: A relative path going up: outside when it climbs past the root from the file's folder.
UP = re.compile(r"(?:^|(?<=[\s\"'=(]))((?:\.\./)+)")
#: ``Path(__file__)...parents[N]`` and ``Path(__file__)...parent.parent...``: how far up.
PARENTS = re.compile(r"__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")
PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\))?((?:\.parent)+)")
#: A name for the repository root, climbed out of.
ROOT_PARENT = re.compile(r"\b(?:ROOT|REPO|REPO_ROOT|REPOSITORY)\.parent\b")


def sources() -> list[Path]:
    files = [p for tree in TREES for p in sorted((ROOT / tree).rglob("*.py"))]
    files += [p for tree in TREES for p in sorted((ROOT / tree).rglob("*.sh"))]
    return files + [ROOT / s for s in SCRIPTS if (ROOT / s).is_file()]


def escapes(path: Path, text: str) -> list[str]:
    """What in `text` (the content of `path`) reaches outside the repository."""
    found = [m.group(0) for m in OUTSIDE.finditer(text)]
    found += [m.group(0) for m in ROOT_PARENT.finditer(text)]
    depth = len(path.relative_to(ROOT).parts) - 1  # folders between the file and the root
    found += [m.group(0) for m in UP.finditer(text) if m.group(1).count("../") > depth]
    for m in PARENTS.finditer(text):
        if int(m.group(1)) > depth:
            found.append(m.group(0))
    for m in PARENT_CHAIN.finditer(text):
        if m.group(1).count(".parent") > depth + 1:
            found.append(m.group(0))
    return found


@pytest.mark.parametrize("path", sources(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_nothing_outside_the_repository_is_read(path: Path) -> None:
    if path == Path(__file__).resolve():
        return  # this file names the patterns it looks for
    found = escapes(path, path.read_text(encoding="utf-8", errors="replace"))
    assert not found, f"{path.relative_to(ROOT)} reaches outside the repository: {found}"


@pytest.mark.parametrize(
    "text",
    [
        'REALWORLD = ROOT.parent / "shared" / "realworld"',
        'REALWORLD = Path(__file__).resolve().parents[3] / "shared"',
        "data = Path(__file__).parent.parent.parent.parent / 'x'",
        "cat ../shared/realworld/cases.json",
        'open("/work/shared/cases.json")',
    ],
)
def test_each_way_out_is_caught(text: str) -> None:
    assert escapes(ROOT / "tests" / "kv" / "test_x.py", text)


def test_climbing_to_the_root_is_fine() -> None:
    assert not escapes(ROOT / "tests" / "kv" / "test_x.py", "Path(__file__).resolve().parents[2]")
    assert not escapes(ROOT / "tests" / "kv" / "test_x.py", "Path(__file__).parent.parent.parent")
