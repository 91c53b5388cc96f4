"""``--format json`` prints exactly one JSON document on stdout whatever the exit code.

Every command, through the real entry point: an option value the parser refuses (exit 2,
before the command body runs), an internal error (exit 3) and a Ctrl-C (exit 130) each give
the ``error:`` line on stderr and one error document (``error``, ``hint``, ``input``,
``exit_code``) on stdout; a refused option without ``--format json`` leaves stdout empty.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from mmcli.cli.main import main

REPO = Path(__file__).resolve().parents[2]
DUMP = "samples/dumps/healthy.safetensors"

#: command line, an option whose value the parser refuses, what a failure can be made of
#: (the module attribute that raises), the input named in the error document
COMMANDS: dict[str, tuple[list[str], list[str], str, str | None]] = {
    "check-embeddings": (
        ["check-embeddings", DUMP, "--device", "cpu"],
        ["--expected-items", "x"],
        "mmcli.cli.check_embeddings.emit_json",
        DUMP,
    ),
    "inspect": (["inspect", DUMP], ["--bogus"], "mmcli.dump.summary.summarize", DUMP),
    "compare": (
        ["compare", DUMP, DUMP, "--device", "cpu"],
        ["--rtol", "x"],
        "mmcli.cli.compare.emit_json",
        None,  # two inputs: no one name
    ),
    "kv-share plan": (
        ["kv-share", "plan", "samples/kv/toy.toml"],
        ["-tp", "x"],
        "mmcli.cli.kv_share.emit_json",
        "samples/kv/toy.toml",
    ),
    "bench": (
        ["bench", "--quick", "--min-time", "0.001", "--hidden", "8", "--placeholders", "4"],
        ["--hidden", "x"],
        "mmcli.cli.bench.emit_json",
        None,
    ),
}


def run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(args)
        except SystemExit as done:
            code = done.code
    assert isinstance(code, int)
    return code, out.getvalue(), err.getvalue()


def one_error_document(out: str, code: int, err: str) -> dict[str, Any]:
    lines = [line for line in err.splitlines() if line]
    assert lines and lines[0].startswith("error: "), err
    doc = json.loads(out)  # exactly one document: json.loads refuses anything after it
    assert list(doc) == ["mmcli_version", "error", "hint", "input", "exit_code"], doc
    assert doc["exit_code"] == code
    assert lines[0] == f"error: {doc['error']}"
    hints = [line for line in lines if line.startswith("hint: ")]
    assert hints == ([f"hint: {doc['hint']}"] if doc["hint"] else []), (hints, doc)
    return doc


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("MMCLI_DEBUG", raising=False)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_refused_option_value_is_one_error_document(name: str) -> None:
    base, bad, _, _ = COMMANDS[name]
    code, out, err = run([*base, *bad, "--format", "json"])
    assert code == 2, err
    doc = one_error_document(out, 2, err)
    assert doc["hint"] and doc["input"] is None  # no command body ran: nothing parsed
    code, out, err = run([*base, *bad])
    assert (code, out) == (2, ""), err
    assert len(err.splitlines()) == 2, err


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize(
    ("raised", "code"),
    [(RuntimeError("boom"), 3), (KeyboardInterrupt(), 130)],
    ids=["bug", "ctrl-c"],
)
def test_a_bug_or_an_interrupt_is_one_error_document(
    name: str, raised: BaseException, code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, _, target, input_name = COMMANDS[name]

    def fails(*args: object, **kwargs: object) -> Any:
        raise raised

    monkeypatch.setattr(target, fails)
    status, out, err = run([*base, "--format", "json"])
    assert status == code, err
    doc = one_error_document(out, code, err)
    assert doc["input"] == input_name
    if code == 3:
        assert doc["error"].startswith("internal error (a bug in mmcli): RuntimeError: boom")
    else:
        assert (doc["error"], doc["hint"]) == ("interrupted", None)


def test_the_last_format_given_decides_and_nothing_after_double_dash_counts() -> None:
    base, bad, _, _ = COMMANDS["bench"]
    assert run([*base, *bad, "--format", "json", "--format", "table"])[1] == ""
    assert json.loads(run([*base, *bad, "--format=table", "--format=json"])[1])["exit_code"] == 2
    assert run([*base, *bad, "--", "--format", "json"])[1] == ""
