"""Capture settings: the modes, and the ``MMCLI_DUMP_*`` environment that chooses them.

The one place that names and parses ``MMCLI_DUMP_DIR``, ``MMCLI_DUMP_MODE``, ``MMCLI_DUMP_MAX``
and ``MMCLI_DUMP_RANKS``: :class:`~mmcli.capture._common.Capturer` (every capture path) and
:class:`~mmcli.capture._common.Settings` (the vLLM and SGLang plugins, which check the
environment once at registration and keep one capturer per rank) both read it through here.
"""

from __future__ import annotations

from typing import Literal

from mmcli.errors import InputError

Mode = Literal["failure", "check", "always"]
MODES: tuple[Mode, ...] = ("failure", "check", "always")
ENV_DIR = "MMCLI_DUMP_DIR"
ENV_MODE = "MMCLI_DUMP_MODE"
ENV_MAX = "MMCLI_DUMP_MAX"
ENV_RANKS = "MMCLI_DUMP_RANKS"
#: Files per capturer (per process) unless ``MMCLI_DUMP_MAX`` says otherwise; 0 writes none.
DEFAULT_MAX_DUMPS = 32
#: A rank list longer than this is refused unread (ranks are small numbers).
_MAX_RANKS_TEXT = 1000


def parse_mode(value: str | None, *, default: Mode = "failure") -> Mode:
    """``failure``, ``check`` or ``always`` (case-insensitive; empty → ``default``)."""
    if value is None or not value.strip():
        return default
    mode = value.strip().lower()
    if mode not in MODES:
        raise InputError(
            f"capture mode {value!r} is not one of {', '.join(MODES)}",
            hint=f"set {ENV_MODE} (or when=) to failure, check or always",
        )
    return mode


def parse_max(value: str | None) -> int:
    """``MMCLI_DUMP_MAX``: a count ≥ 0 of files per process (empty → the default; 0: none)."""
    if value is None or not value.strip():
        return DEFAULT_MAX_DUMPS
    text = value.strip()
    number = int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else -1
    if number < 0:
        raise InputError(f"{ENV_MAX}={value!r} is not an integer >= 0", hint="e.g. 32")
    return number


def parse_ranks(spec: str | None) -> list[tuple[int, int]] | None:
    """``MMCLI_DUMP_RANKS`` as inclusive ``(low, high)`` spans; None for every rank (unset,
    empty or ``all``). The whole value is checked: one bad part refuses all of it."""
    if spec is None or not spec.strip() or spec.strip().lower() == "all":
        return None
    spans: list[tuple[int, int]] = []
    for part in spec.split(",") if len(spec) <= _MAX_RANKS_TEXT else [spec]:
        low, dash, high = part.strip().partition("-")
        bounds = (low.strip(), high.strip() if dash else low.strip())
        if not all(b.isascii() and b.isdigit() and len(b) <= 9 for b in bounds):
            raise InputError(
                f"{ENV_RANKS}={spec[:80]!r} is not a list of ranks ({part.strip()[:40]!r})",
                hint="e.g. 0 or 0,1 or 0-3 or all",
            )
        first, last = int(bounds[0]), int(bounds[1])
        if first > last:
            raise InputError(
                f"{ENV_RANKS}={spec[:80]!r}: the range {first}-{last} is empty",
                hint="write ranges low-high, e.g. 0-3",
            )
        spans.append((first, last))
    return spans


def rank_selected(rank: int | None, spec: str | None) -> bool:
    """Whether ``rank`` is in ``MMCLI_DUMP_RANKS`` (``0,2``, ``0-3``, ``all``; empty: all).

    An unknown rank (None) is always selected; a malformed list raises InputError.
    """
    spans = parse_ranks(spec)
    if spans is None or rank is None:
        return True
    return any(low <= rank <= high for low, high in spans)
