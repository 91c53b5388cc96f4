"""The ``--sglang-version`` help, formatted from the release rows."""

from __future__ import annotations

from mmcli.kv.sglang.releases import DEFAULT_RELEASE, RELEASES


def sglang_version_help() -> str:
    """The ``--sglang-version`` help: the releases read, the default, and the rows' limits."""
    names = [r.release for r in RELEASES]
    unread = [r.release for r in RELEASES if r.fraction_rule == "unread"]
    sliding = [r.release for r in RELEASES if r.sliding_mirrored]
    spans: list[list[str]] = []  # runs of consecutive rows whose state pool is mirrored
    for i, r in enumerate(RELEASES):
        if r.hybrid_rule in ("fixed", "ratio"):
            if spans and RELEASES[i - 1].release == spans[-1][-1]:
                spans[-1].append(r.release)
            else:
                spans.append([r.release])
    state = ", ".join(s[0] if len(s) == 1 else f"{s[0]} – {s[-1]}" for s in spans)
    text = (
        f"With --engine sglang/all: the SGLang release (one of the {len(names)} read, "
        f"{names[0]} to {names[-1]}, and their .postN read; default {DEFAULT_RELEASE}"
    )
    if unread:
        text += f"; {unread[0]} on with --gpu needs --mem-fraction-static"
    return text + (
        f"; sliding-window models: {sliding[-1]} or older; hybrid GDN / Mamba models: {state})."
    )
