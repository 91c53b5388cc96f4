"""Figures a vLLM start-up log cannot hold: a malformed number, or one no engine prints.

The KV lines are found by their wording with the figure taken loosely (whatever is not a
space), so a figure the strict patterns of :mod:`mmcli.kv.explain.vllm_log` would pass over
(``1..3x``, five thousand digits, ``infx``) is refused, naming its line, instead of leaving
the line out and explaining the log without it.
"""

from __future__ import annotations

import re
from typing import Final

from mmcli.errors import InputError
from mmcli.text import quoted

#: Token and block counts: integers an engine holds exactly (2^53, float's exact range).
MAX_COUNT: Final = 2**53
#: Requests of max_model_len that fit at once: no engine's cache holds a billion.
MAX_CONCURRENCY: Final = 10**9
#: A GiB figure, seconds or a concurrency as vLLM prints them: digits, at most one point
#: (bounded, one group: the log readers build their patterns from it).
FLOAT: Final = r"(\d{1,15}(?:\.\d{1,12})?)"
#: How much of a hostile figure an error message shows.
_SHOWN = 40

_COUNT = re.compile(r"\d{1,3}(?:,\d{3})+|\d+")
_DECIMAL = re.compile(r"\d+(?:\.\d{1,12})?")
#: Each KV line vLLM prints, its figures taken loosely, and what each figure is.
_LINES: Final = (
    (re.compile(r"GPU KV cache size: (\S+)"), ("GPU KV cache size (tokens)",)),
    (
        re.compile(r"Maximum concurrency for (\S+) tokens per request: (\S+)"),
        ("max_model_len of the concurrency line", "maximum concurrency"),
    ),
    (re.compile(r"# GPU blocks: (\S+)"), ("number of GPU blocks",)),
    (re.compile(r"num_gpu_blocks is: (\S+)"), ("number of GPU blocks",)),
)
_WORDS: Final = ("GPU KV cache size: ", "Maximum concurrency for ", "GPU blocks")


def check_figures(line: str, number: int, name: str) -> None:
    """Raise :class:`InputError` if ``line`` (line ``number`` of the log ``name``) is a KV line
    whose figure is not a well-formed number or is larger than any engine prints."""
    if not any(word in line for word in _WORDS):
        return
    for pattern, figures in _LINES:
        if m := pattern.search(line):
            for text, figure in zip(m.groups(), figures, strict=True):
                _check(text, figure, number, name)
            return


def _check(text: str, figure: str, number: int, name: str) -> None:
    concurrency = figure == "maximum concurrency"
    digits = text.removesuffix("x") if concurrency else text
    well_formed = (
        _DECIMAL.fullmatch(digits) is not None and digits != text
        if concurrency
        else _COUNT.fullmatch(digits) is not None
    )
    where = f"{name}: line {number:,}: the {figure} {quoted(text, _SHOWN)}"
    if not well_formed:
        raise InputError(
            f"{where} is not a well-formed number",
            hint="vLLM prints digits here (42,656 tokens; 1.30x); give the engine's own "
            "log, unedited",
        )
    whole = digits.split(".")[0].replace(",", "")
    limit = MAX_CONCURRENCY if concurrency else MAX_COUNT
    # Compared by length first: int() refuses numbers of more than 4,300 digits.
    too_long = len(whole) > len(str(limit))
    if too_long or (float(digits) if concurrency else int(whole)) > limit:
        raise InputError(
            f"{where} is larger than any engine prints (at most {limit:,})",
            hint="no real start-up prints this figure; give the engine's own log, unedited",
        )
