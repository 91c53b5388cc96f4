"""The ``--sglang-version`` help, formatted from the release rows."""

from __future__ import annotations

from collections.abc import Callable

from mmcli.kv.sglang.releases import DEFAULT_RELEASE, RELEASES, SglangRules


def release_spans(test: Callable[[SglangRules], bool]) -> str:
    """The releases read whose rules pass ``test``, as runs of neighbours (``a – b, c``)."""
    runs: list[list[str]] = []
    previous = False
    for rules in RELEASES:
        passed = test(rules)
        if passed and previous:
            runs[-1].append(rules.release)
        elif passed:
            runs.append([rules.release])
        previous = passed
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]} – {r[-1]}" for r in runs) or "none"


def sglang_version_help() -> str:
    """The ``--sglang-version`` help: the releases read, the default, and the rows' limits."""
    names = [r.release for r in RELEASES]
    unread = [r.release for r in RELEASES if r.fraction_rule == "unread"]
    text = (
        f"With --engine sglang/all: the SGLang release (one of the {len(names)} read, "
        f"{names[0]} to {names[-1]}, and their .postN read; default {DEFAULT_RELEASE}"
    )
    if unread:
        text += f"; {unread[0]} on with --gpu needs --mem-fraction-static"
    sliding = release_spans(lambda r: r.sliding_mirrored)
    state = release_spans(lambda r: r.hybrid_rule in ("fixed", "ratio"))
    return text + f"; sliding-window models: {sliding}; hybrid GDN / Mamba models: {state})."
