"""Snapshots of ``kv-share plan`` over every bundled config: each engine, ``-pp`` 1 and 2, with
``--memory`` and with ``--gpu``, ``--max-model-len auto`` and a sweep. A case is the SHA-256 of
its stdout and stderr and its exit code, so a refactoring of the planner's plumbing can be
held byte-identical to what the command printed before.

``python tests/plan_snapshots.py --write`` (from the repository root) records the current
output in ``tests/kv/plan_snapshots.json``: run it only when a change of output is meant, and
say so in the commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests/kv/plan_snapshots.json"

ENGINES = ("vllm", "sglang", "trtllm", "all")
BUDGETS = (("--memory", "40GiB"), ("--gpu", "H100", "--weights", "16GiB"))


def configs() -> list[str]:
    """Every bundled model: samples/kv (files and folders) and tests/kv/configs, relative."""
    found = [p for p in sorted((ROOT / "samples/kv").iterdir()) if not p.name.startswith(".")]
    found += sorted((ROOT / "tests/kv/configs").glob("*.json"))
    return [str(p.relative_to(ROOT)) for p in found]


def cases() -> Iterator[tuple[str, list[str]]]:
    """(case id, the ``kv-share plan`` arguments)."""
    for config in configs():
        for engine in ENGINES:
            for pp in ("1", "2"):
                for budget in BUDGETS:
                    args = [config, "--engine", engine, "-pp", pp, *budget, "--format", "json"]
                    yield " ".join(args[1:]) + f" :: {config}", args
        yield f"table :: {config}", [config, "--memory", "40GiB"]
        yield f"auto :: {config}", [config, "--memory", "40GiB", "--max-model-len", "auto"]
        sweep = ["--sweep", "memory=8GiB..80GiB:4", "--format", "json"]
        yield f"sweep :: {config}", [config, "--max-model-len", "8192", *sweep]


def digest(args: list[str]) -> dict[str, object]:
    """The exit code and the SHA-256 of stdout and stderr of ``kv-share plan ARGS``."""
    from typer.testing import CliRunner

    from mmcli.cli.main import app

    result = CliRunner().invoke(
        app, ["kv-share", "plan", *args], catch_exceptions=False, env={"COLUMNS": "100"}
    )
    return {
        "exit": result.exit_code,
        "stdout": hashlib.sha256(result.stdout.encode()).hexdigest(),
        "stderr": hashlib.sha256(result.stderr.encode()).hexdigest(),
    }


def main() -> int:
    if sys.argv[1:] != ["--write"]:
        print(__doc__)
        return 2
    import os

    os.chdir(ROOT)
    doc = {case: digest(args) for case, args in cases()}
    FIXTURE.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", "utf-8")
    print(f"wrote {len(doc)} cases to {FIXTURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
