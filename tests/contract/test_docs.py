"""README stays true: its Python example runs, and every `$ mmcli …` example, run against
samples/, prints what the README shows (lines with timings excepted)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")

# Lines whose numbers are measurements, different on every run.
VOLATILE = re.compile(
    r"\d(\.\d+)?\s?(ms|µs|us|s|GB/s|MB/s|×|x)\b"
    r"|\"(load|check|scatter|gather|median_us|iqr_us|gbps|copy_fraction|"
    r"speedup_vs_reference|torch_version|mmcli_version)\":"
    r"|\bmmcli \d+\.\d+"
)


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def _examples(lang: str = "console") -> list[tuple[str, list[str]]]:
    examples: list[tuple[str, list[str]]] = []
    for block in _blocks(lang):
        command: str | None = None
        output: list[str] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                if command is not None:
                    examples.append((command, output))
                command, output = line[2:], []
            elif command is not None:
                output.append(line)
        if command is not None:
            examples.append((command, output))
    return examples


def _run(command: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    assert argv[0] == "mmcli", f"README example does not start with mmcli: {command}"
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("MMCLI_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "mmcli", *argv[1:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_readme_python_examples_run() -> None:
    for block in _blocks("python"):
        exec(compile(block, "README.md", "exec"), {})  # noqa: S102


def test_readme_documents_every_command() -> None:
    from mmcli.cli.main import app

    names = [c.name for c in app.registered_commands if c.name]
    for group in app.registered_groups:
        names += [c.name for c in group.typer_instance.registered_commands if c.name]
        if group.name:
            names.append(group.name)
    for name in names:
        assert f"mmcli {name}" in README or f" {name} " in README, f"README omits `{name}`"


@pytest.mark.parametrize(("command", "expected"), _examples(), ids=lambda v: str(v)[:60])
def test_readme_command_output(command: str, expected: list[str]) -> None:
    proc = _run(command)
    assert proc.returncode in (0, 1), f"{command}: exit {proc.returncode}\n{proc.stderr}"
    actual = [line.rstrip() for line in (proc.stdout + proc.stderr).splitlines()]
    position = 0
    for line in (e.rstrip() for e in expected):
        if not line.strip() or VOLATILE.search(line):
            continue
        try:
            position = actual.index(line, position) + 1
        except ValueError:
            pytest.fail(f"{command}: README line not in the output (or out of order):\n{line!r}")


@pytest.mark.parametrize(("command", "expected"), _examples("text"), ids=lambda v: str(v)[:60])
def test_readme_timing_examples_still_run(command: str, expected: list[str]) -> None:
    """Timing output differs on every run and a full suite takes minutes, so these examples
    run in their quick form and must still accept every option shown and print the same
    columns."""
    quick = " --quick" if command.startswith("mmcli bench") and "--quick" not in command else ""
    proc = _run(command + quick)
    assert proc.returncode in (0, 1), f"{command}: exit {proc.returncode}\n{proc.stderr}"
    columns = next((line for line in expected if line.startswith("op ")), None)
    if columns is not None:
        assert columns.split() == proc.stdout.splitlines()[1].split(), proc.stdout
    else:
        assert expected[0].strip() in proc.stdout.splitlines()[0], proc.stdout
