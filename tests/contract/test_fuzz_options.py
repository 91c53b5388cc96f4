"""Hypothesis fuzz of option strings: whatever the values, the contract holds.

Random text, numbers (huge, negative, non-ASCII digits, NaN, inf) and look-alike flags are given
to the options of every command through the real entry point. The outcome must be an exit code
of 0, 1 or 2 (never 3: a bug), no traceback, and for exit 2 exactly one ``error:`` and one
``hint:`` line.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmcli.cli.main import main

REPO = Path(__file__).resolve().parents[2]

VALUES = st.one_of(
    st.text(max_size=12),
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "²", "١٢", "５７６", "0x10", "1_0", " 8 ", ""]),
    st.sampled_from(["16GiB", "1.5GiB", "-1", "auto", "0", "bf16", "fp8_ds_mla", "H100", "--"]),
)

#: (command line before the option, the options whose values are fuzzed)
COMMANDS = [
    (
        ["kv-share", "plan", "samples/kv/toy.toml"],
        [
            "--memory",
            "--max-model-len",
            "--block-size",
            "-tp",
            "--kv-cache-dtype",
            "--max-num-batched-tokens",
            "--vllm-version",
            "--num-gpu-blocks-override",
            "--max-num-seqs",
            "--num-draft-layers",
            "--mamba-ssm-cache-dtype",
            "--gpu",
            "--sweep",
        ],
    ),
    (
        ["bench", "--quick", "--min-time", "0.001"],
        ["--placeholders", "--hidden", "--dtype", "--layout", "--impl", "--op", "--threads"],
    ),
    (["check-embeddings", "samples/dumps/healthy.safetensors"], ["--device", "--format"]),
]


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


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0][0] for c in COMMANDS])
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_option_values_keep_the_contract(
    command: tuple[list[str], list[str]], data: st.DataObject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("MMCLI_DEBUG", raising=False)
    base, options = command
    option = data.draw(st.sampled_from(options))
    value = data.draw(VALUES)
    if (
        command[0][0] == "bench"
        and option == "--placeholders"
        and value.strip().isascii()
        and value.strip().isdigit()
    ):
        value = str(min(int(value.strip()), 64))  # keep a valid run quick
    if (
        command[0][0] == "bench"
        and option == "--hidden"
        and value.strip().isascii()
        and value.strip().isdigit()
    ):
        value = str(min(int(value.strip()), 64))
    code, out, err = run([*base, option, value])
    assert code in (0, 1, 2), (option, value, err)
    assert "Traceback" not in out + err
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 2 and lines[0].startswith("error: "), (option, value, err)
        assert lines[1].startswith("hint: "), (option, value, err)
