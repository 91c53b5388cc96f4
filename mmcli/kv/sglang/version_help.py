"""The ``--sglang-version`` help, formatted from the release rows."""

from __future__ import annotations

from mmcli.kv.sglang.log_releases import release_span
from mmcli.kv.sglang.releases import DEFAULT_RELEASE, RELEASES


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
    sliding = release_span([r.release for r in RELEASES if r.sliding_mirrored], " – ") or "none"
    hybrid = [r.release for r in RELEASES if r.hybrid_rule in ("fixed", "ratio")]
    state = release_span(hybrid, " – ") or "none"
    return text + f"; sliding-window models: {sliding}; hybrid GDN / Mamba models: {state})."
