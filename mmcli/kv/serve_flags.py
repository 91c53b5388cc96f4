"""The flags ``vllm serve`` takes in each mirrored release, read from
``mmcli/kv/data/vllm_serve_flags.json`` (written by ``scripts/extract_vllm_flags.py`` from each
release's own argument definitions; the newest release whole, the others as deltas)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from mmcli.errors import InputError

DATA = Path(__file__).parent / "data" / "vllm_serve_flags.json"


@dataclass(frozen=True)
class Flag:
    """One flag: its long name, the field it sets (``dest``) and its kind: ``bool`` (``--x`` and
    ``--no-x``), ``flag`` (store_true), ``json``, ``optional`` (bare or a value), ``value``."""

    name: str
    dest: str
    kind: str
    aliases: tuple[str, ...] = ()


@lru_cache(maxsize=1)
def _document() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DATA.read_text())
    return doc


def releases() -> list[str]:
    """The releases whose flags are mirrored, oldest first."""
    return sorted(_document()["releases"], key=_key)


def _key(release: str) -> tuple[int, ...]:
    return tuple(int(p) for p in release.split("."))


@lru_cache(maxsize=64)
def flag_table(release: str) -> dict[str, Flag]:
    """``{long name: Flag}`` of one mirrored release (its delta applied to the newer ones)."""
    entry = _document()["releases"][release]
    if "flags" in entry:
        raw: dict[str, Any] = dict(entry["flags"])
    else:
        raw = {k: v for k, v in _raw(entry["base"]).items() if k not in entry["removed"]}
        raw.update(entry["added"])
    return {
        name: Flag(name, v["dest"], v["kind"], tuple(v.get("aliases", ())))
        for name, v in raw.items()
    }


def _raw(release: str) -> dict[str, Any]:
    return {
        f.name: {"dest": f.dest, "kind": f.kind, "aliases": list(f.aliases)}
        for f in flag_table(release).values()
    }


def flags_release(version: str | None) -> str:
    """The mirrored release whose flags ``--vllm-version`` names (None: the newest)."""
    from mmcli.kv.releases import parse_release

    known = releases()
    if version is None:
        return known[-1]
    wanted = parse_release(version)
    fitting = [r for r in known if (*_key(r), 0)[:3] <= wanted]
    if not fitting:
        raise InputError(
            f"--serve: the flags of vLLM {version} are not mirrored",
            hint=f"give --vllm-version {known[0]} or newer (flags mirrored: {known[0]} … "
            f"{known[-1]})",
        )
    return fitting[-1]


def index(release: str) -> dict[str, Flag]:
    """Every spelling of a release's flags (long names and aliases) → the flag."""
    table = flag_table(release)
    spelled = dict(table)
    for flag in table.values():
        for alias in flag.aliases:
            spelled.setdefault(alias, flag)
    return spelled


def where_else(name: str, release: str) -> str:
    """Which other release had ``name``: "was removed after vLLM X" / "came in vLLM Y"."""
    known = releases()
    had = [r for r in known if name in index(r) or _no_form(name, r)]
    older = [r for r in had if _key(r) < _key(release)]
    newer = [r for r in had if _key(r) > _key(release)]
    if older:
        return f"{name} was removed after vLLM {older[-1]}"
    if newer:
        return f"{name} came in vLLM {newer[0]}"
    return f"{name} is not a flag of vllm serve in any mirrored release ({known[0]} … {known[-1]})"


def _no_form(name: str, release: str) -> bool:
    flag = index(release).get("--" + name[5:]) if name.startswith("--no-") else None
    return flag is not None and flag.kind == "bool"


#: What argparse takes as an argument rather than a flag: no leading "-", or a negative number.
_NEGATIVE = re.compile(r"-\d+(\.\d*)?|-\.\d+")


def is_argument(token: str) -> bool:
    """Whether ``token`` is a value (argparse: not an option string, or a negative number)."""
    return not token.startswith("-") or bool(_NEGATIVE.fullmatch(token))


def optimization_form(
    token: str,
    name: str,
    value: str | None,
    keys: list[str],
    tokens: list[str],
    i: int,
    spelled: dict[str, Flag],
    dotted_cc: bool,
) -> tuple[str, str | None, list[str], int]:
    """``-O3``, ``-O=3``, ``-O 3`` (a level 0-3), ``-O.level=3``, as the release reads them:
    where ``-O`` is ``--compilation-config`` a level is its ``level`` key, else ``-O`` is
    ``--optimization-level``, which takes no dotted keys (``dotted_cc``: the release reads
    ``-O.KEY`` as ``-cc.KEY``)."""
    if name != "-O":  # -O3, -Odecode: the rest of the token (with a dot: the whole rest)
        value, keys = token[2:], []
    elif value is None and not keys and i < len(tokens) and tokens[i] in {"0", "1", "2", "3"}:
        value, i = tokens[i], i + 1
    elif value is None or keys:  # -O '{…}', -O.level 3, -O.level=3
        if "-O" not in spelled and keys and dotted_cc:
            return "-cc", value, keys, i
        if "-O" not in spelled and keys:
            raise InputError(
                f"--serve: {token}: -O is --optimization-level in these flags, which takes no "
                "dotted keys",
                hint="write -O3, or --compilation-config.KEY VALUE",
            )
        return "-O", value, keys, i
    if "-O" in spelled:
        return "-O", value, ["level"], i
    return "--optimization-level", value, [], i
