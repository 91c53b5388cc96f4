"""Which SGLang releases read could have printed a start-up log, and the distinct rule rows
among them, as data for ``kv-share explain``.

SGLang prints no version line at start-up (the version is only served by ``/server_info`` and
``/get_model_info``, entrypoints/http_server.py), so a log names its release only through its
wording and the fields of its ``server_args=ServerArgs(…)`` line
(``logger.info(f"{server_args=}")``, entrypoints/engine.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mmcli.kv.sglang.releases import ARGS_FIRST_IN, RELEASES, SglangRules

__all__ = ["ARGS_FIRST_IN", "log_releases", "release_span", "rule_rows"]

#: The rule fields that can change a dense / MLA explanation (the cell, the request pool, a
#: user's --max-running-requests, what is refused); releases equal in all of them are one row.
EXPLAIN_FIELDS = (
    "v_head_dim_in_cell",
    "requests_from_capacity",
    "user_requests_capped_by_capacity",
    "sliding_mirrored",
    "multimodal_kv_reserve",
    "weights_overflow_error",
)


def log_releases(*, names_dtype: bool, fields: Iterable[str]) -> tuple[SglangRules, ...]:
    """The releases read whose KV line is worded as the log's (with or without ``dtype:``) and
    whose ``server_args`` have every marker field the log's line names."""
    order = [r.release for r in RELEASES]
    low = max((order.index(ARGS_FIRST_IN[f]) for f in fields if f in ARGS_FIRST_IN), default=0)
    return tuple(
        r for i, r in enumerate(RELEASES) if i >= low and r.kv_line_names_dtype == names_dtype
    )


def rule_rows(
    releases: Sequence[SglangRules], fields: Sequence[str] = EXPLAIN_FIELDS
) -> list[tuple[SglangRules, list[str]]]:
    """The distinct rule rows among ``releases`` (equal in every one of ``fields``), oldest
    first: each row's newest release (whose rules are used) and the releases it stands for."""
    groups: dict[tuple[object, ...], list[SglangRules]] = {}
    for rules in releases:
        groups.setdefault(tuple(getattr(rules, f) for f in fields), []).append(rules)
    return [(rows[-1], [r.release for r in rows]) for rows in groups.values()]


def release_span(names: Sequence[str], dash: str = "–") -> str:
    """``names`` (releases read, in order) as runs of consecutive releases: "a–b, c"."""
    order = [r.release for r in RELEASES]
    runs: list[list[str]] = []
    for name in names:
        if runs and order.index(runs[-1][-1]) + 1 == order.index(name):
            runs[-1].append(name)
        else:
            runs.append([name])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}{dash}{run[-1]}" for run in runs)
