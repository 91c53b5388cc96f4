"""The CLI shell: entry points, start-up cost, and the error boundary."""

from __future__ import annotations

import errno
import subprocess
import sys
import tempfile

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


@pytest.mark.parametrize(
    "args", [["--help"], ["--version"], ["kv-share", "plan", "--help"], ["kv-share", "explain"]]
)
def test_help_and_version_do_not_import_torch_or_safetensors(args: list[str]) -> None:
    code = (
        "import sys\n"
        "from mmcli.cli.main import app\n"
        f"try:\n    app({args!r}, prog_name='mmcli')\nexcept SystemExit:\n    pass\n"
        "heavy = ('torch', 'safetensors', 'numpy', 'huggingface_hub', 'transformers')\n"
        "heavy = sorted(m for m in heavy if m in sys.modules)\n"
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


def test_flags_show_no_value_type() -> None:
    """Typer prints ``<bool>`` beside a flag, and users then write ``--strict true`` (where
    ``true`` becomes a file argument): no flag of mmcli's shows a type (Typer's own --help
    row still does)."""
    for name in ["", *_command_names()]:
        sub = runner.invoke(
            app, [*name.split(), "--help"], catch_exceptions=False, terminal_width=200
        )
        assert sub.exit_code == 0, name
        rows = [line for line in sub.stdout.splitlines() if "<bool>" in line]
        assert all("--help" in row for row in rows), (name, rows)


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
    if kind == "disk-full":
        raise OSError(errno.ENOSPC, "No space left on device")
    if kind in ("write-denied", "write-full"):
        from pathlib import Path

        from mmcli.atomic import atomic_write

        # The test makes os.fsync fail (a full disk) or mkstemp (a directory not writable).
        with atomic_write(Path(tempfile.gettempdir()) / "mmcli-test-target.json") as f:
            f.write(b"{}")
    if kind == "overflow":
        float(10**400)
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


@pytest.mark.parametrize(
    ("kind", "error", "hint"),
    [
        (
            "disk-full",
            "error: cannot write a file: No space left on device",
            "hint: free some space on that disk",
        ),
        (
            "write-full",
            f"error: cannot write {tempfile.gettempdir()}/mmcli-test-target.json: "
            "No space left on device",
            "hint: free some space on that disk",
        ),
        (
            "write-denied",
            f"error: cannot write {tempfile.gettempdir()}/mmcli-test-target.json: "
            "Permission denied",
            "hint: check that you may write in that directory",
        ),
        ("overflow", "error: a number in the input is too large to work with", "hint: "),
    ],
)
def test_write_failures_and_overflows_are_bad_input_not_bugs(
    kind: str, error: str, hint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "/somewhere/.x.tmp")

    if kind == "write-full":
        monkeypatch.setattr(os, "fsync", disk_full)
    if kind == "write-denied":
        monkeypatch.setattr(tempfile, "mkstemp", denied)
    result = runner.invoke(boundary_app, [kind], catch_exceptions=False)
    assert result.exit_code == EXIT_BAD_INPUT
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith(error) and lines[1].startswith(hint)
    assert "cannot read" not in result.stderr


def test_report_survives_a_broken_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    from mmcli.cli._boundary import report

    class Broken:
        encoding = "ascii"

        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sys, "stderr", Broken())
    report("lost", "also lost")  # no exception: the exit code still tells
    monkeypatch.setattr(sys, "stderr", None)
    report("lost")


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


@pytest.mark.parametrize(
    ("argv", "error", "hint"),
    [
        (
            ["kv-share", "plan", "samples/kv/toy.toml", "--tp", "3"],
            "error: No such option: --tp",
            "hint: did you mean --tensor-parallel-size (-tp) or --tokens-per-block?",
        ),
        (
            ["kv-share", "plan", "samples/kv/toy.toml", "--tensor", "3"],
            "error: No such option: --tensor",
            "hint: did you mean --tensor-parallel-size (-tp)?",
        ),
        (
            ["bench", "--thread", "2"],
            "error: No such option: --thread",
            "hint: did you mean --threads?",
        ),
        (
            ["check-embeddings", "x", "--hiden", "3"],
            "error: No such option: --hiden",
            "hint: did you mean --hidden-size?",
        ),
        (
            ["bench", "--zzz"],
            "error: No such option: --zzz",
            "hint: see `mmcli bench --help` for the options and examples",
        ),
        (
            ["inspect", "-x.safetensors"],
            "error: No such option: -x (from '-x.safetensors')",
            "hint: to pass a file whose name starts with '-', put `--` before it "
            "(`mmcli inspect -- -x.safetensors`) or write it as ./-x.safetensors",
        ),
        (
            ["kv-share", "plan", "-my/config.json"],
            "error: No such option: -m (from '-my/config.json')",
            "hint: to pass a file whose name starts with '-', put `--` before it",
        ),
    ],
)
def test_unknown_options_hint_at_what_was_meant(
    argv: list[str], error: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from mmcli.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0] == error
    assert lines[1].startswith(hint), lines[1]


def test_close_options_ranks_strong_matches_first() -> None:
    from mmcli.cli.main import _close_options

    class Opt:
        param_type_name = "option"
        hidden = False

        def __init__(self, *opts: str) -> None:
            self.opts, self.secondary_opts = list(opts), []

    params = [Opt("--tensor-parallel-size", "-tp"), Opt("--mtp"), Opt("--memory")]
    assert _close_options("--tp", params) == ["--tensor-parallel-size (-tp)"]
    assert _close_options("--tps", params) == ["--tensor-parallel-size (-tp)"]
    assert _close_options("--memroy", params) == ["--memory"]
    assert _close_options("--", params) == []
    assert _close_options("--unrelated", params) == []


# --- stdout and stderr while a command runs ------------------------------------------------


class _Failing:
    """A text stream whose writes fail with ``code``."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, code: int) -> None:
        self.code = code

    def write(self, text: str) -> int:
        raise OSError(self.code, errno.errorcode.get(self.code, "error"))

    def flush(self) -> None:
        pass


@pytest.mark.parametrize(
    ("code", "status", "stderr"),
    [
        (errno.EPIPE, 141, ""),
        (errno.ENOSPC, 2, "error: cannot write the output to stdout: ENOSPC\nhint: free some"),
        (errno.EIO, 2, "error: cannot write the output to stdout: EIO\nhint: redirect stdout"),
    ],
)
def test_main_turns_stdout_failures_into_a_status(
    code: int, status: int, stderr: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from mmcli.cli.main import main

    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", _Failing(code))
    monkeypatch.setattr(sys, "stderr", err)
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == status
    assert err.getvalue().startswith(stderr)
    assert "Traceback" not in err.getvalue()


def test_main_refuses_a_closed_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from mmcli.cli.main import main

    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", None)
    monkeypatch.setattr(sys, "stderr", err)
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == EXIT_BAD_INPUT
    assert err.getvalue().startswith("error: cannot write the output: stdout is closed\nhint: ")


def test_main_reports_an_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    import mmcli.cli.main as cli_main

    def interrupted(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(cli_main, "_run", interrupted)
    with pytest.raises(SystemExit) as info:
        cli_main.main(["bench"])
    assert info.value.code == 130
    assert err.getvalue() == "error: interrupted\n"


def test_main_exits_with_the_command_status(capsys: pytest.CaptureFixture[str]) -> None:
    from mmcli.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"mmcli {mmcli.__version__}"
