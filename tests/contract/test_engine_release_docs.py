"""The engines page names the SGLang and TensorRT-LLM releases the release tables hold, and
the default they take (docs/kv-share-engines.md against mmcli/kv/sglang/releases.py and
mmcli/kv/trtllm/releases.py): a row added, dropped or a default moved fails here until the
page says so."""

from __future__ import annotations

import re
from pathlib import Path

from mmcli.kv.sglang.releases import DEFAULT_RELEASE as SGLANG_DEFAULT
from mmcli.kv.sglang.releases import RELEASES as SGLANG
from mmcli.kv.trtllm.releases import DEFAULT_RELEASE as TRTLLM_DEFAULT
from mmcli.kv.trtllm.releases import RELEASES as TRTLLM
from mmcli.kv.trtllm.releases import UNREAD

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "kv-share-engines.md").read_text("utf-8")
_RELEASE = r"\d+\.\d+(?:\.\d+)?(?:\.post\d+)?"


def _key(release: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", release.split(".post")[0]))


def _option_row(option: str) -> str:
    rows = [line for line in PAGE.splitlines() if line.startswith(f"| `{option}` |")]
    assert len(rows) == 1, f"one options-table row for {option}"
    return rows[0]


def _named(row: str) -> tuple[set[tuple[int, ...]], list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """The releases a row names one by one, and the ranges it names (``0.5.5 – 0.5.23``)."""
    ranges = [
        (_key(a), _key(b)) for a, b in re.findall(rf"({_RELEASE})\s*[–-]\s*({_RELEASE})", row)
    ]
    return {_key(r) for r in re.findall(_RELEASE, row)}, ranges


def test_the_sglang_option_names_every_release_and_the_default() -> None:
    row = _option_row("--sglang-version")
    single, ranges = _named(row)
    for rules in SGLANG:
        key = _key(rules.release)
        covered = key in single or any(a <= key <= b for a, b in ranges)
        assert covered, f"docs/kv-share-engines.md's --sglang-version row misses {rules.release}"
    assert re.search(rf"default {re.escape(SGLANG_DEFAULT)}\b", row), row


def test_the_trtllm_page_names_every_release_read_and_refused() -> None:
    row = _option_row("--trtllm-version")
    for rules in TRTLLM:
        assert rules.release in row, f"--trtllm-version row misses {rules.release}"
    assert TRTLLM_DEFAULT in row
    for series in UNREAD:
        assert series.series in PAGE, f"the page does not say why {series.series} is refused"
