"""Which REF dump is compared with which CAND dump: two files, or two directories paired by
file name, by the prompt's token ids or ``mm_hashes`` (version-2 metadata), or in capture order.

Dumps captured in an engine's profiling run (``phase=profile``) hold dummy inputs, never a
prompt: they are left out of directory pairing, and listed as skipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mmcli.errors import InputError
from mmcli.text import printable

PairMode = Literal["auto", "name", "tokens", "order"]
PAIR_MODES: tuple[PairMode, ...] = ("auto", "name", "tokens", "order")
#: How a pair was made, as the output says it.
HOW = {
    "files": "the two files given",
    "name": "file name",
    "input_ids": "the prompt's token ids (input_ids)",
    "mm_hashes": "the items' mm_hashes",
    "order": "capture order",
}
#: ``mmcli.capture``'s file names end ``-{seq:04d}-{reason}.safetensors``.
_CAPTURE_SEQ = re.compile(r"-(\d{4,})-(?:failure|check|always)\.safetensors$")


@dataclass(frozen=True)
class Pair:
    """One REF dump and the CAND dump it is compared with."""

    ref: Path
    cand: Path
    how: str


@dataclass
class Pairing:
    """The pairs, the files left without a partner, and the profiling dumps skipped."""

    pairs: list[Pair]
    how: str
    unpaired_ref: list[Path] = field(default_factory=list)
    unpaired_cand: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class _Entry:
    path: Path
    name: str
    phase: str | None
    input_ids: tuple[int, ...] | None
    mm_hashes: str | None


def _kind(path: Path, side: str) -> str:
    if not os.fspath(path):
        raise InputError(f"{side}: empty path ''", hint="give a dump file or a directory of dumps")
    if path.is_dir():
        return "directory"
    if path.exists():
        return "file"
    raise InputError(f"{printable(str(path))}: no such file or directory", hint="check the path")


def _entries(root: Path) -> list[_Entry]:
    from mmcli.check_embeddings import find_files
    from mmcli.dump.io import load_dump, read_tensor

    entries = []
    for path in find_files([root]):
        with load_dump(path) as dump:
            info = dump.header.tensors.get("input_ids")
            ids = None
            if info is not None:
                ids = tuple(int(v) for v in read_tensor(dump.header, info).reshape(-1).tolist())
            meta = dump.metadata
        entries.append(
            _Entry(
                path=path,
                name=path.relative_to(root).as_posix(),
                phase=meta.get("phase"),
                input_ids=ids,
                mm_hashes=meta.get("mm_hashes") or None,
            )
        )
    return entries


def _capture_order(entry: _Entry) -> tuple[int, str]:
    match = _CAPTURE_SEQ.search(entry.name)
    return (int(match.group(1)) if match else -1, entry.name)


def pair_dumps(ref: Path, cand: Path, mode: PairMode = "auto") -> Pairing:
    """Pair ``ref`` with ``cand``: two files, or two directories (see the module)."""
    kinds = (_kind(ref, "REF"), _kind(cand, "CAND"))
    if kinds == ("file", "file"):
        return Pairing([Pair(ref, cand, "files")], "files")
    if "file" in kinds:
        raise InputError(
            f"{printable(str(ref))} is a {kinds[0]} but {printable(str(cand))} is a {kinds[1]}",
            hint="give two dump files, or two directories of dumps",
        )
    refs, cands = _entries(ref), _entries(cand)
    skipped = [e.path for e in (*refs, *cands) if e.phase == "profile"]
    refs = [e for e in refs if e.phase != "profile"]
    cands = [e for e in cands if e.phase != "profile"]
    pairing = _pair(refs, cands, mode, ref, cand)
    pairing.skipped = skipped
    return pairing


def _pair(
    refs: list[_Entry], cands: list[_Entry], mode: PairMode, ref: Path, cand: Path
) -> Pairing:
    if mode == "order":
        a, b = sorted(refs, key=_capture_order), sorted(cands, key=_capture_order)
        n = min(len(a), len(b))
        return Pairing(
            [Pair(x.path, y.path, "order") for x, y in zip(a[:n], b[:n], strict=True)],
            "order",
            [x.path for x in a[n:]],
            [y.path for y in b[n:]],
        )
    names_a, names_b = {e.name for e in refs}, {e.name for e in cands}
    if mode == "name" or (mode == "auto" and names_a == names_b and names_a):
        return _by_key(refs, cands, "name", lambda e: e.name)
    if mode in ("auto", "tokens"):
        keys: tuple[tuple[str, Callable[[_Entry], Hashable | None]], ...] = (
            ("input_ids", lambda e: e.input_ids),
            ("mm_hashes", lambda e: e.mm_hashes),
        )
        for how, key in keys:
            if any(key(e) is not None for e in refs) and any(key(e) is not None for e in cands):
                pairing = _by_key(refs, cands, how, key)
                if pairing.pairs:
                    return pairing
    raise InputError(
        f"cannot pair the dumps of {printable(str(ref))} ({len(refs)}) with those of "
        f"{printable(str(cand))} ({len(cands)}): the file names differ and no dumps on both "
        "sides share the prompt's token ids (input_ids) or mm_hashes",
        hint="pass --pair order to pair them in capture order, or compare two files",
    )


def _by_key(
    refs: list[_Entry], cands: list[_Entry], how: str, key: Callable[[_Entry], Hashable | None]
) -> Pairing:
    def index(entries: list[_Entry], side: str) -> dict[Hashable, _Entry]:
        found: dict[Hashable, _Entry] = {}
        for e in entries:
            k = key(e)
            if k is None:
                continue
            if k in found:
                raise InputError(
                    f"cannot pair by {HOW[how]}: {side} dumps {printable(found[k].name)} and "
                    f"{printable(e.name)} have the same {how.replace('_', ' ')}",
                    hint="pass --pair order to pair them in capture order, or compare two files",
                )
            found[k] = e
        return found

    a, b = index(refs, "REF"), index(cands, "CAND")
    pairs = [Pair(e.path, b[k].path, how) for k, e in a.items() if k in b]
    paired = {p.ref for p in pairs} | {p.cand for p in pairs}
    return Pairing(
        sorted(pairs, key=lambda p: p.ref),
        how,
        [e.path for e in refs if e.path not in paired],
        [e.path for e in cands if e.path not in paired],
    )
