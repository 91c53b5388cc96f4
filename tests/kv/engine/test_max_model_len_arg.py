"""``--max-model-len`` read as vLLM reads it: ``human_readable_int_or_auto``.

``vllm/utils/argparse_utils.py`` (0.20+; ``vllm/engine/arg_utils.py`` in 0.10–0.19): the
stripped text fully matching ``(\\d+(?:\\.\\d+)?)([kKmMgGtT])`` is ``int(float(number) ×
10^3/10^6/10^9/10^12)`` for k m g t and ``int(number) × 2^10/2^20/2^30/2^40`` for K M G T
(a decimal number with a binary suffix raises "Decimals are not allowed with binary
suffixes"); anything else goes to ``int()``. The ``t`` / ``T`` entries of the multiplier tables
come in 0.13.0 (0.12.0 has k m g only, so ``1t`` fails ``int()``); ``auto`` / ``-1``
(``human_readable_int_or_auto``) in 0.14.0.
"""

from __future__ import annotations

import pytest

from mmcli.errors import InputError
from mmcli.kv.engine.max_len import parse_max_model_len


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("32768", 32768),
        (" 4096 ", 4096),
        ("128k", 128_000),
        ("128K", 131_072),
        ("1.5k", 1500),
        ("25.6k", 25_600),  # vLLM's own docstring example
        ("1m", 10**6),
        ("1M", 2**20),
        ("2g", 2 * 10**9),
        ("1G", 2**30),
        ("1t", 10**12),
        ("1T", 2**40),
        ("1_000", 1000),  # int() reads it, and so does vLLM
        ("+64", 64),
        ("0.5k", 500),
        ("auto", "auto"),
        ("AUTO", "auto"),
        ("-1", "auto"),
        (" -1 ", "auto"),
    ],
)
def test_every_form_vllm_reads(text: str, want: int | str) -> None:
    assert parse_max_model_len(text) == want


def test_decimal_suffixes_go_through_float_as_in_vllm() -> None:
    # int(float("1.005") * 1000) is 1004 (1004.999…): vLLM truncates the float product.
    assert parse_max_model_len("1.005k") == int(float("1.005") * 1000) == 1004


def test_none_is_the_default() -> None:
    assert parse_max_model_len(None) is None


@pytest.mark.parametrize(
    "text",
    ["big", "0", "0k", "0.0001k", "-5", "-1k", "12kb", "1e3", "k", "1.5", "0x10", "1 k", "²"],
)
def test_what_vllm_cannot_read_or_is_not_positive_is_refused(text: str) -> None:
    with pytest.raises(InputError) as info:
        parse_max_model_len(text)
    assert str(info.value).startswith("--max-model-len must be a positive integer or auto, got")
    assert info.value.hint is not None and "32k (32,000), 32K (32,768)" in info.value.hint


def test_a_decimal_with_a_binary_suffix_is_refused_as_vllm_refuses_it() -> None:
    with pytest.raises(InputError) as info:
        parse_max_model_len("1.5K")
    assert str(info.value) == (
        "--max-model-len '1.5K': vLLM allows no decimals with the binary suffix K"
    )
    assert info.value.hint == "did you mean 1.5k (powers of 1000)?"


def test_a_long_value_is_refused_before_it_is_read() -> None:
    with pytest.raises(InputError) as info:
        parse_max_model_len("9" * 400)
    assert "a 400-character value" in str(info.value)


@pytest.mark.parametrize(("release", "ok"), [("0.12", False), ("0.13", True), ("0.34", True)])
def test_the_tera_suffixes_from_0_13(release: str, ok: bool) -> None:
    for text in ("1t", "1T"):
        if ok:
            assert parse_max_model_len(text, release) in (10**12, 2**40)
            continue
        with pytest.raises(InputError) as info:
            parse_max_model_len(text, release)
        assert f"vLLM {release} reads no t / T suffix (it came in 0.13)" in str(info.value)
    assert parse_max_model_len("128k", release) == 128_000  # k m g: every release mirrored


@pytest.mark.parametrize(("release", "ok"), [("0.10", False), ("0.13", False), ("0.14", True)])
def test_auto_from_0_14(release: str, ok: bool) -> None:
    for text in ("auto", "-1"):
        if ok:
            assert parse_max_model_len(text, release) == "auto"
            continue
        with pytest.raises(InputError) as info:
            parse_max_model_len(text, release)
        assert f"vLLM {release} has no auto-fit of max_model_len (it came in 0.14)" in str(
            info.value
        )
