"""The hostile-CLI corpus: closed pipes, full disks, Ctrl-C, narrow encodings, huge numbers
and option look-alikes, each with the outcome the README's error contract promises.

Same table style as ``test_bad_inputs.py``. Every case checks its exit code, no traceback, a
bounded run time and, for exit 2, exactly one ``error:`` line naming the problem, one ``hint:``
line and nothing on stdout. What only a real process has (a stdout that is a closed pipe,
``/dev/full`` or a closed descriptor; a SIGINT; ``PYTHONIOENCODING``) runs ``python -m mmcli``
or the ``mmcli`` script in a subprocess; option and number cases run the same ``main`` in
process, which is quicker.

What the contract says each gives:

* stdout's reader went away (``mmcli ... | head -1``): exit 141, nothing on stderr;
* stdout cannot be written (``> /dev/full``, a closed or read-only descriptor): exit 2,
  ``error: cannot write the output to stdout: ...`` and a hint;
* Ctrl-C, from the first import on: ``error: interrupted``, exit 130;
* text the output encoding cannot hold: backslash escapes, never a crash.
"""

from __future__ import annotations

import io
import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mmcli.cli.main import main

#: Generous: a case that takes this long is hanging, not merely slow.
TIME_LIMIT_S = 10.0
REPO = Path(__file__).resolve().parents[2]
HEALTHY = "samples/dumps/healthy.safetensors"
GEMMA = "samples/kv/gemma3n-e2b-like.json"
TOY = "samples/kv/toy.toml"
SCRIPT = Path(sys.executable).with_name("mmcli")
ENTRIES = {"module": [sys.executable, "-m", "mmcli"], "script": [str(SCRIPT)]}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MMCLI_", "PYTHONIO"))}
    env.update(extra)
    return env


def _odd_dump(tmp_path: Path) -> Path:
    """A valid dump whose metadata holds a lone surrogate, an arrow and an escape sequence."""
    meta = {"format": "mm_dump", "format_version": "1", "model": "\udc80x\u2192\x1b[2J"}
    header = {
        "__metadata__": meta,
        "mm_embeddings.0": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32]},
    }
    body = json.dumps(header).encode()  # ensure_ascii: the surrogate as \udc80
    path = tmp_path / "odd.safetensors"
    path.write_bytes(struct.pack("<Q", len(body)) + body + struct.pack("<8f", *range(8)))
    return path


# -- subprocess cases: stdout and stderr states, encodings ----------------------------------


@dataclass(frozen=True)
class Proc:
    """One command line, the state of its streams, and the outcome it must have."""

    build: Callable[[Path], list[str]]
    code: int
    #: Part of the error line (exit 2), or of stdout (exit 0/1, when captured); None: no check.
    message: str | None = None
    #: pipe (captured), closed-pipe (read end closed before the child writes), full
    #: (/dev/full), read-only (a descriptor opened for reading), closed (descriptor 1 closed).
    stdout: str = "pipe"
    #: pipe (captured) or full (/dev/full: what is said is lost, the exit code is not).
    stderr: str = "pipe"
    env: dict[str, str] = field(default_factory=dict)
    entry: str = "module"


def _args(*args: str) -> Callable[[Path], list[str]]:
    return lambda tmp: list(args)


PROCS: dict[str, Proc] = {
    # A closed pipe: the reader (head, less, grep -m1) went away. Quiet, 141 like SIGPIPE.
    "closed-pipe/kv-share-all-layers": Proc(
        _args("kv-share", "plan", GEMMA, "--all-layers"), 141, stdout="closed-pipe"
    ),
    "closed-pipe/kv-share-json": Proc(
        _args("kv-share", "plan", GEMMA, "--format", "json"), 141, stdout="closed-pipe"
    ),
    "closed-pipe/check-embeddings-healthy": Proc(
        _args("check-embeddings", HEALTHY, "--device", "cpu"), 141, stdout="closed-pipe"
    ),
    "closed-pipe/inspect": Proc(_args("inspect", HEALTHY), 141, stdout="closed-pipe"),
    "closed-pipe/help": Proc(_args("--help"), 141, stdout="closed-pipe"),
    "closed-pipe/version": Proc(_args("--version"), 141, stdout="closed-pipe"),
    "closed-pipe/script-entry": Proc(
        _args("kv-share", "plan", TOY), 141, stdout="closed-pipe", entry="script"
    ),
    "closed-pipe/and-stderr-full": Proc(
        _args("kv-share", "plan", TOY), 141, stdout="closed-pipe", stderr="full"
    ),
    # A bad input still says so when the reader of stdout is gone.
    "closed-pipe/bad-input-still-exit-2": Proc(
        _args("kv-share", "plan", "nope.json"), 2, "nope.json", stdout="closed-pipe"
    ),
    # A full disk (or any write error) on stdout: one error line, exit 2.
    "full/kv-share": Proc(
        _args("kv-share", "plan", TOY),
        2,
        "cannot write the output to stdout: No space left on device",
        stdout="full",
    ),
    "full/kv-share-json": Proc(
        _args("kv-share", "plan", TOY, "--format", "json"),
        2,
        "cannot write the output to stdout: No space left on device",
        stdout="full",
    ),
    "full/inspect": Proc(
        _args("inspect", HEALTHY), 2, "cannot write the output to stdout", stdout="full"
    ),
    "full/version": Proc(_args("--version"), 2, "No space left on device", stdout="full"),
    "full/help": Proc(_args("--help"), 2, "No space left on device", stdout="full"),
    "full/script-entry": Proc(
        _args("kv-share", "plan", TOY), 2, "No space left on device", stdout="full", entry="script"
    ),
    "read-only/kv-share": Proc(
        _args("kv-share", "plan", TOY),
        2,
        "cannot write the output to stdout: Bad file descriptor",
        stdout="read-only",
    ),
    "closed/kv-share": Proc(
        _args("kv-share", "plan", TOY),
        2,
        "cannot write the output: stdout is closed",
        stdout="closed",
    ),
    "closed/version": Proc(_args("--version"), 2, "stdout is closed", stdout="closed"),
    # stderr lost: the exit code still tells (not 120 from Python's flush at exit, not 3).
    "stderr-full/bad-input": Proc(_args("kv-share", "plan", "nope.json"), 2, stderr="full"),
    "stderr-full/healthy": Proc(_args("kv-share", "plan", TOY), 0, stderr="full"),
    # Encodings: what the stream cannot hold comes out escaped.
    "encoding/ascii-surrogate-metadata": Proc(
        lambda tmp: ["inspect", str(_odd_dump(tmp))],
        0,
        "\\udc80x\\u2192",
        env={"PYTHONIOENCODING": "ascii"},
    ),
    "encoding/ascii-strict-surrogate-metadata": Proc(
        lambda tmp: ["inspect", str(_odd_dump(tmp))],
        0,
        "\\udc80x",
        env={"PYTHONIOENCODING": "ascii:strict"},
    ),
    "encoding/latin-1-surrogate-metadata": Proc(
        lambda tmp: ["inspect", str(_odd_dump(tmp))],
        0,
        "\\udc80x",
        env={"PYTHONIOENCODING": "latin-1"},
    ),
    "encoding/utf-8-surrogate-metadata": Proc(
        lambda tmp: ["inspect", str(_odd_dump(tmp))], 0, "\\udc80x\u2192"
    ),
    "encoding/ascii-check-embeddings-json": Proc(
        lambda tmp: [
            "check-embeddings",
            str(_odd_dump(tmp)),
            "--device",
            "cpu",
            "--format",
            "json",
        ],
        0,
        '"ok"',
        env={"PYTHONIOENCODING": "ascii:strict"},
    ),
    "encoding/ascii-kv-share": Proc(
        _args("kv-share", "plan", GEMMA), 0, "30 layers", env={"PYTHONIOENCODING": "ascii"}
    ),
    "encoding/latin-1-kv-share-all-layers": Proc(
        _args("kv-share", "plan", GEMMA, "--all-layers"),
        0,
        "30 layers",
        env={"PYTHONIOENCODING": "latin-1:strict"},
    ),
    "encoding/ascii-help": Proc(_args("--help"), 0, "Usage", env={"PYTHONIOENCODING": "ascii"}),
    "encoding/ascii-strict-undecodable-file-name": Proc(
        _args("inspect", "nope\udcff.safetensors"),
        2,
        "nope\\udcff.safetensors",
        env={"PYTHONIOENCODING": "ascii:strict"},
    ),
    "encoding/c-locale-bench": Proc(
        _args(
            "bench",
            "--device",
            "cpu",
            "--placeholders",
            "8",
            "--hidden",
            "8",
            "--min-time",
            "0.001",
        ),  # fmt: skip
        0,
        "\\u2192",
        env={"PYTHONIOENCODING": "ascii", "LC_ALL": "C"},
    ),
}


def _launch(case: Proc, tmp_path: Path) -> tuple[int, str, str, float]:
    """Run the case's command; (exit code, stdout or "", stderr or "", seconds)."""
    command = [*ENTRIES[case.entry], *case.build(tmp_path)]
    opened: list[Any] = []

    def stream(kind: str) -> Any:
        if kind == "full":
            opened.append(open("/dev/full", "w"))  # noqa: SIM115
            return opened[-1]
        if kind == "read-only":
            opened.append(open(os.devnull))  # noqa: SIM115
            return opened[-1]
        if kind == "closed":
            return subprocess.DEVNULL
        return subprocess.PIPE

    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            command,
            stdout=stream(case.stdout),
            stderr=stream(case.stderr),
            env=_env(**case.env),
            cwd=REPO,
            preexec_fn=(lambda: os.close(1)) if case.stdout == "closed" else None,  # noqa: PLW1509
        )
        if case.stdout == "closed-pipe":
            assert proc.stdout is not None
            proc.stdout.close()  # before the child has written anything: it is still importing
            proc.stdout = None
        out, err = proc.communicate(timeout=TIME_LIMIT_S * 3)
    finally:
        for f in opened:
            f.close()
    elapsed = time.monotonic() - start
    decode = lambda b: (b or b"").decode("utf-8", "surrogateescape")  # noqa: E731
    return proc.returncode, decode(out), decode(err), elapsed


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PROCS))
def test_hostile_process(tmp_path: Path, name: str) -> None:
    case = PROCS[name]
    if case.entry == "script" and not SCRIPT.exists():
        pytest.skip("the mmcli script is not installed next to this Python")
    code, out, err, elapsed = _launch(case, tmp_path)
    assert "Traceback" not in out + err, err
    assert elapsed < TIME_LIMIT_S, f"{name} took {elapsed:.1f} s"
    assert code == case.code, (code, out[-500:], err[-2000:])
    if case.stderr == "pipe":
        lines = err.splitlines()
        if code == 2:
            assert len(lines) == 2, err
            assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
            assert len(lines[1]) > len("hint: ")
            assert case.message is None or case.message in lines[0], err
        elif code == 141:
            assert err == "", err
        else:
            assert "error:" not in err, err
    if case.stdout == "pipe":
        if code == 2:
            assert out == "", out
        elif case.message is not None:
            assert case.message in out, out[-2000:]


@pytest.mark.slow
def test_head_in_a_real_pipeline_exits_141_quietly(tmp_path: Path) -> None:
    """`mmcli ... | head -c 10` in a shell, with far more output than a pipe buffers."""
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "num_hidden_layers": 3000,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "hidden_size": 64,
                "max_position_embeddings": 512,
                "torch_dtype": "bfloat16",
            }
        )
    )
    err = tmp_path / "err.txt"
    script = (
        f'"$@" kv-share plan {config} --all-layers --format json 2>{err} | head -c 10 >/dev/null;'
        ' echo "${PIPESTATUS[0]}"'
    )
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", "-c", script, "bash", *ENTRIES["module"]],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        timeout=TIME_LIMIT_S * 3,
        check=False,
    )
    assert time.monotonic() - start < TIME_LIMIT_S
    assert proc.stdout.strip() == "141", (proc.stdout, err.read_text())
    assert err.read_text() == ""


# -- Ctrl-C ---------------------------------------------------------------------------------


def _sigint_as_a_terminal_gives_it() -> None:
    """In the child, before exec: SIGINT at its default action and not blocked, as a shell
    gives a foreground command. A child inherits an ignored SIGINT (and a blocked one) from
    pytest, which has one when started in the background, under ``nohup`` or by any parent
    that ignores Ctrl-C; mmcli's Python would then never see the signal these tests send.
    (``subprocess``'s ``restore_signals`` resets only SIGPIPE, SIGXFZ and SIGXFSZ.)"""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _interrupt_after(
    command: list[str], marker: str, delay: float = 0.0
) -> tuple[int, list[str], str, float]:
    """Start ``command`` with import timing on stderr; once the import of ``marker`` has
    finished, wait ``delay`` and send SIGINT. (exit code, other stderr lines, stdout, s)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(PYTHONPROFILEIMPORTTIME="1"),
        cwd=REPO,
        start_new_session=True,  # the SIGINT goes to mmcli only, not to pytest
        preexec_fn=_sigint_as_a_terminal_gives_it,
    )
    assert proc.stderr is not None
    seen = []
    for raw in proc.stderr:
        line = raw.decode("utf-8", "replace").rstrip()
        seen.append(line)
        if line.startswith("import time:") and line.split("|")[-1].strip() == marker:
            break
    else:
        pytest.fail(f"{marker} was never imported: {seen[-5:]}")
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, rest = proc.communicate(timeout=TIME_LIMIT_S * 3)
    elapsed = time.monotonic() - start
    lines = [
        line
        for line in rest.decode("utf-8", "replace").splitlines()
        if not line.startswith("import time:")
    ]
    return proc.returncode, lines, out.decode("utf-8", "replace"), elapsed


@pytest.mark.slow
@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_ctrl_c_while_importing_is_one_line_and_130(entry: str) -> None:
    """SIGINT as soon as the entry point starts importing the CLI (typer, rich, ...)."""
    if entry == "script" and not SCRIPT.exists():
        pytest.skip("the mmcli script is not installed next to this Python")
    code, lines, out, elapsed = _interrupt_after(
        [*ENTRIES[entry], "kv-share", "plan", TOY], "mmcli.cli"
    )
    assert (code, lines, out) == (130, ["error: interrupted"], "")
    assert elapsed < TIME_LIMIT_S


@pytest.mark.slow
def test_ctrl_c_while_running_is_one_line_and_130() -> None:
    command = [
        *ENTRIES["module"],
        "bench",
        "--device",
        "cpu",
        "--placeholders",
        "64",
        "--hidden",
        "64",
        "--min-time",
        "30",
        "--format",
        "json",
    ]
    code, lines, out, elapsed = _interrupt_after(command, "mmcli.bench.run", delay=0.3)
    assert (code, lines) == (130, ["error: interrupted"])
    # --format json: stdout is the one error document (docs/README.md, "Errors and output").
    doc = json.loads(out)
    assert (doc["error"], doc["hint"], doc["exit_code"]) == ("interrupted", None, 130)
    assert elapsed < TIME_LIMIT_S


#: The tests above that send a signal to a child, by node id.
SIGNAL_TESTS = [
    f"{Path(__file__).relative_to(REPO).as_posix()}::{name}"
    for name in (
        "test_ctrl_c_while_importing_is_one_line_and_130",
        "test_ctrl_c_while_running_is_one_line_and_130",
    )
]


def _sigint_ignored_and_blocked() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


@pytest.mark.slow
def test_the_signal_tests_pass_however_pytest_is_started() -> None:
    """The Ctrl-C tests in a pytest that inherited an ignored SIGINT, as ``make test &`` in a
    script, ``nohup make test`` or ``(trap '' INT; make test)`` give it (here blocked too):
    each sets its child's SIGINT itself, so they pass as they do from a terminal."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SIGNAL_TESTS],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        preexec_fn=_sigint_ignored_and_blocked,
        timeout=TIME_LIMIT_S * 12,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout, proc.stdout[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("module", ["typer", "rich.console", "mmcli.cli.main"])
def test_an_interrupt_in_any_import_of_the_cli_is_caught(module: str) -> None:
    """Deterministic: the import of ``module`` raises KeyboardInterrupt, as a Ctrl-C would."""
    code = (
        "import builtins, sys\n"
        "real = builtins.__import__\n"
        "def fake(name, *args, **kwargs):\n"
        f"    if name == {module!r}:\n"
        "        raise KeyboardInterrupt\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = fake\n"
        "sys.argv = ['mmcli', '--version']\n"
        "from mmcli.__main__ import main\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        timeout=TIME_LIMIT_S * 3,
        check=False,
    )
    assert (proc.returncode, proc.stderr, proc.stdout) == (130, "error: interrupted\n", "")


# -- in-process cases: numbers and option look-alikes through the real `main` ---------------


@dataclass(frozen=True)
class Case:
    """One command line and the outcome it must have (exit 2: the error line holds message)."""

    build: Callable[[Path], list[str]]
    code: int
    message: str | None
    hint: str | None = None


BIG = str(10**400)
HUGE = "9" * 5000

CASES: dict[str, Case] = {
    # Digits that str.isdigit() accepts but int() does not (or reads as another number).
    "bench/placeholders-superscript": Case(
        _args("bench", "--placeholders", "²"), 2, "--placeholders: '²' is not a positive integer"
    ),
    "bench/placeholders-arabic-indic": Case(
        _args("bench", "--placeholders", "١٢"), 2, "'١٢' is not a positive integer"
    ),
    "bench/placeholders-fullwidth": Case(
        _args("bench", "--placeholders", "５７６"), 2, "is not a positive integer"
    ),
    "bench/placeholders-10^400": Case(
        _args("bench", "--placeholders", BIG), 2, "a 401-character value is too large"
    ),
    "bench/placeholders-5000-digits": Case(
        _args("bench", "--placeholders", HUGE), 2, "a 5000-character value is too large"
    ),
    "bench/placeholders-too-many": Case(
        _args("bench", "--placeholders", ",".join(map(str, range(1, 1001)))),
        2,
        "--placeholders: 1000 sizes; at most 64",
    ),
    "bench/hidden-10^400": Case(
        _args("bench", "--hidden", BIG), 2, "--hidden must be at most 2,147,483,647"
    ),
    "bench/hidden-superscript": Case(_args("bench", "--hidden", "²"), 2, "--hidden"),
    "bench/threads-2^40": Case(
        _args("bench", "--threads", str(2**40)), 2, "--threads must be at most"
    ),
    "bench/threads-100000": Case(
        _args("bench", "--threads", "100000"), 2, "--threads must be at most"
    ),
    "bench/threads-10^400": Case(_args("bench", "--threads", BIG), 2, "got a 401-digit number"),
    "bench/min-time-inf": Case(
        _args("bench", "--min-time", "inf"), 2, "--min-time must be at most 60 seconds, got inf"
    ),
    "bench/min-time-1e400": Case(
        _args("bench", "--min-time", "1e400"), 2, "--min-time must be at most 60 seconds"
    ),
    "bench/min-time-a-day": Case(
        _args("bench", "--min-time", "86400"), 2, "--min-time must be at most 60 seconds"
    ),
    "bench/min-time-negative-inf": Case(
        _args("bench", "--min-time", "-inf"), 2, "--min-time must be a positive number"
    ),
    "bench/layout-empty": Case(_args("bench", "--layout", ""), 2, "--layout is empty"),
    "bench/layout-commas": Case(_args("bench", "--layout", ",,"), 2, "--layout is empty"),
    "bench/layout-huge-value": Case(
        _args("bench", "--layout", "x" * 100_000), 2, "(100000 characters)"
    ),
    "bench/from-with-placeholders": Case(
        _args("bench", "--from", HEALTHY, "--placeholders", "8"),
        2,
        "--placeholders cannot be combined with --from",
        hint="--from takes the shapes and masks from the dump",
    ),
    # Numbers for the other commands: refused (exit 2), never a crash.
    "kv-share/max-model-len-10^400": Case(
        _args("kv-share", "plan", TOY, "--max-model-len", BIG),
        2,
        "--max-model-len must be a positive integer or auto",
    ),
    "kv-share/block-size-10^43": Case(
        _args("kv-share", "plan", TOY, "--block-size", "1" + "0" * 43),
        2,
        "--block-size is a 44-digit number",
    ),
    "kv-share/tp-10^32": Case(
        _args("kv-share", "plan", TOY, "-tp", "1" + "0" * 32),
        2,
        "--tensor-parallel-size is a 33-digit number",
    ),
    "kv-share/memory-10^400-GiB": Case(
        _args("kv-share", "plan", TOY, "--memory", BIG + "GiB"), 2, None
    ),
    "kv-share/tp-superscript": Case(_args("kv-share", "plan", TOY, "-tp", "²"), 2, "-tp"),
    "kv-share/block-size-5000-digits": Case(
        _args("kv-share", "plan", TOY, "--block-size", HUGE), 2, "--block-size"
    ),
    "check-embeddings/hidden-size-superscript": Case(
        _args("check-embeddings", HEALTHY, "--hidden-size", "²"), 2, "--hidden-size"
    ),
    # Option look-alikes.
    "usage/file-named-like-a-short-option": Case(
        _args("inspect", "-x.safetensors"),
        2,
        "No such option: -x (from '-x.safetensors')",
        hint="put `--` before it (`mmcli inspect -- -x.safetensors`)",
    ),
    "usage/config-named-like-an-option": Case(
        _args("kv-share", "plan", "-c.json"),
        2,
        "No such option: -c (from '-c.json')",
        hint="put `--` before it",
    ),
    "usage/dump-named-like-an-option": Case(
        _args("check-embeddings", "-dump/x.safetensors"),
        2,
        "from '-dump/x.safetensors'",
        hint="put `--` before it",
    ),
    "usage/after-double-dash-is-a-path": Case(
        _args("inspect", "--", "-x.safetensors"), 2, "-x.safetensors"
    ),
    "usage/tp-for-tensor-parallel": Case(
        _args("kv-share", "plan", TOY, "--tp", "3"),
        2,
        "No such option: --tp",
        # --tokens-per-block (TensorRT-LLM's) is the other option "tp" abbreviates.
        hint="did you mean --tensor-parallel-size (-tp) or --tokens-per-block?",
    ),
    "usage/prefix-of-an-option": Case(
        _args("kv-share", "plan", TOY, "--tensor-parallel", "2"),
        2,
        "No such option: --tensor-parallel",
        hint="did you mean --tensor-parallel-size (-tp)?",
    ),
    "usage/typo": Case(
        _args("bench", "--min-tme", "1"), 2, "No such option: --min-tme", hint="--min-time"
    ),
    "usage/option-with-escape-sequence": Case(_args("bench", "--\x1b[2J"), 2, "No such option"),
}


def _in_process(args: list[str]) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(args)
        except SystemExit as done:
            code = done.code
    assert isinstance(code, int)
    return code, out.getvalue(), err.getvalue(), time.monotonic() - start


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_option(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("MMCLI_DEBUG", raising=False)
    case = CASES[name]
    code, out, err, elapsed = _in_process(case.build(tmp_path))
    assert "Traceback" not in out + err
    assert elapsed < TIME_LIMIT_S, f"{name} took {elapsed:.1f} s"
    assert code == case.code, (out, err)
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    assert len(lines[1]) > len("hint: ")
    assert case.message is None or case.message in lines[0], err
    assert case.hint is None or case.hint in lines[1], err
    assert "\x1b" not in err
    assert len(err) < 2000, "an error line must not echo a huge argument"
    assert out == "", out


def test_the_corpus_covers_each_cause() -> None:
    kinds = {name.split("/")[0] for name in PROCS}
    assert {"closed-pipe", "full", "read-only", "closed", "stderr-full", "encoding"} <= kinds
    assert len(PROCS) + len(CASES) >= 60
