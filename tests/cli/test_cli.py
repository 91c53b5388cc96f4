"""The CLI shell: entry points, start-up cost, and the error boundary."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

import mmcli
from mmcli.cli._boundary import guarded
from mmcli.cli.main import app
from mmcli.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, InputError

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.stdout.strip() == f"mmcli {mmcli.__version__}"


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help(flag: str) -> None:
    result = runner.invoke(app, [flag], catch_exceptions=False)
    assert result.exit_code == 0
    assert "Usage" in result.stdout


def test_python_dash_m() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mmcli", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"mmcli {mmcli.__version__}"


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_help_and_version_do_not_import_torch_or_safetensors(args: list[str]) -> None:
    code = (
        "import sys\n"
        "from mmcli.cli.main import app\n"
        f"try:\n    app({args!r}, prog_name='mmcli')\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('torch', 'safetensors', 'numpy') if m in sys.modules)\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY=\n" in proc.stdout, proc.stdout


def test_import_mmcli_is_lazy() -> None:
    code = "import sys, mmcli; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"


def test_every_command_has_help_with_an_example() -> None:
    result = runner.invoke(app, ["--help"], catch_exceptions=False)
    for name in _command_names():
        sub = runner.invoke(app, [*name.split(), "--help"], catch_exceptions=False)
        assert sub.exit_code == 0, name
        assert f"mmcli {name}" in sub.stdout, f"{name} --help shows no example"
    assert result.exit_code == 0


def _command_names() -> list[str]:
    names: list[str] = []
    for info in app.registered_commands:
        if info.name:
            names.append(info.name)
    for group in app.registered_groups:
        sub_app = group.typer_instance
        prefix = group.name
        for info in sub_app.registered_commands:
            if info.name:
                names.append(f"{prefix} {info.name}" if prefix else info.name)
    return names


# --- the boundary: a throwaway app exercising each kind of failure -----------------------

boundary_app = typer.Typer()


@boundary_app.command()
@guarded
def explode(kind: str) -> None:
    """Fail in the way named."""
    if kind == "input":
        raise InputError("mask for item 2 has 575 True positions", hint="check the processor")
    if kind == "missing":
        open("/nonexistent/dump.safetensors")  # noqa: SIM115
    if kind == "json":
        import json

        json.loads("{oops")
    raise RuntimeError("boom")


def test_input_error_is_two_lines_and_exit_2() -> None:
    result = runner.invoke(boundary_app, ["input"], catch_exceptions=False)
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stderr == (
        "error: mask for item 2 has 575 True positions\nhint: check the processor\n"
    )


def test_os_error_is_bad_input() -> None:
    result = runner.invoke(boundary_app, ["missing"], catch_exceptions=False)
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stderr.startswith(
        "error: cannot read /nonexistent/dump.safetensors: No such file or directory\n"
    )


def test_json_error_is_bad_input() -> None:
    result = runner.invoke(boundary_app, ["json"], catch_exceptions=False)
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stderr.startswith("error: invalid JSON: Expecting property name")


def test_unexpected_exception_is_exit_3_without_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MMCLI_DEBUG", raising=False)
    result = runner.invoke(boundary_app, ["bug"], catch_exceptions=False)
    assert result.exit_code == EXIT_INTERNAL
    assert result.stderr.splitlines()[0] == (
        "error: internal error (a bug in mmcli): RuntimeError: boom"
    )
    assert "Traceback" not in result.stderr


def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMCLI_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        runner.invoke(boundary_app, ["bug"], catch_exceptions=False)


# --- option-parsing errors through the real entry point ----------------------------------


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["kv-share", "plan", "samples/kv/toy.toml", "--block-size", "abc"],
            "error: Invalid value for '--block-size'",
        ),
        (["bench", "--nope"], "error: No such option: --nope"),
        (["nosuch"], "error: No such command 'nosuch'."),
        (["check-embeddings", "x", "--expected-items", "-1"], "error: Invalid value for"),
    ],
)
def test_usage_errors_are_one_error_line_and_a_hint(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from mmcli.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith(error)
    assert lines[1].startswith("hint: see `mmcli")


def test_main_exits_with_the_command_status(capsys: pytest.CaptureFixture[str]) -> None:
    from mmcli.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"mmcli {mmcli.__version__}"
