"""How an SGLang hybrid log's ``Mamba Cache is allocated`` line is worded, release by release
(memory_pool.py of each wheel), formatted from the rows of :mod:`mmcli.kv.sglang.releases`."""

from __future__ import annotations

from mmcli.kv.sglang.releases import RELEASES, newest_release

__all__ = ["STATE_LINE_WORDING", "state_line_release"]


def state_line_release(names_slots: bool) -> str:
    """The release a hybrid log's ``Mamba Cache is allocated`` line is worded as: the first
    with a state-pool share (which names max_mamba_cache_size) or the first with a fixed pool
    (which names no slot count)."""
    rule = "ratio" if names_slots else "fixed"
    return next(r.release for r in RELEASES if r.hybrid_rule == rule)


_SLOTS, _NO_SLOTS = state_line_release(True), state_line_release(False)
_NEWEST_RATIO = newest_release(lambda r: r.hybrid_rule == "ratio")
_RATIO_ROWS = [i for i, r in enumerate(RELEASES) if r.hybrid_rule == "ratio"]
#: The releases that size the state pool as the first ratio release does.
_SAME_SIZE = " – ".join(
    RELEASES[i].release
    for i in (_RATIO_ROWS[0], max(i for i in _RATIO_ROWS if not RELEASES[i].mamba2_radix_cache))
)
#: The request caps (slots per request) of the ratio releases after those.
_CAPS = sorted(
    {
        str(RELEASES[i].mamba_slots_per_request)
        for i in _RATIO_ROWS
        if RELEASES[i].mamba2_radix_cache
    }
)
#: The releases between the ratio ones whose state pool is not mirrored (first – last), if any.
_GAP = [i for i in range(_RATIO_ROWS[0], _RATIO_ROWS[-1]) if i not in _RATIO_ROWS]
_UNREAD = (
    f", the state pools of {RELEASES[_GAP[0]].release} – {RELEASES[_GAP[-1]].release} are not "
    "mirrored"
    if _GAP
    else ""
)
#: What each release's ``Mamba Cache is allocated`` line says (memory_pool.py of its wheel).
STATE_LINE_WORDING = {
    _SLOTS: (
        f"the Mamba Cache line names max_mamba_cache_size: SGLang {_SLOTS}'s wording "
        f"(memory_pool.py:222); {_NO_SLOTS}'s names no slot count (:177), older releases have "
        f"no state pool; {_SLOTS} – {_NEWEST_RATIO} word it alike ({_SAME_SIZE} size it "
        f"alike; later ones reserve the speculative states apart and cap the requests at "
        f"slots // {' or '.join(_CAPS)}, so their logs are checked against {_SLOTS}'s sizes)"
        f"{_UNREAD}"
    ),
    _NO_SLOTS: (
        f"the Mamba Cache line names no max_mamba_cache_size: SGLang {_NO_SLOTS}'s wording "
        f"(memory_pool.py:177; {_SLOTS}'s names it, :222); its sizes are checked at the planned "
        f"slots + 1 ({_NO_SLOTS}'s state pool is the request pool, model_runner.py:1442)"
    ),
}
