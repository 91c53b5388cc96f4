"""``compare_dumps``: pair the dumps, then stream each pair item by item, measure, diagnose."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from mmcli.compare import findings as codes
from mmcli.compare.metrics import measure
from mmcli.compare.pairing import PAIR_MODES, Pair, PairMode, pair_dumps
from mmcli.compare.result import CompareReport, ItemReport, PairReport
from mmcli.compare.tolerance import PROFILES, Overrides, Profile, is_float, tolerance
from mmcli.dtypes import name_of
from mmcli.dump.io import Dump, load_dump
from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.text import printable

#: Candidates (by first-row likeness) checked in full for each item that may be swapped.
_SWAP_CANDIDATES = 2


@dataclass(frozen=True)
class _Print:
    """What identifies an item cheaply, kept while the next items stream: its shape, norm and
    first row."""

    shape: tuple[int, ...]
    norm: float
    first: torch.Tensor | None


def compare_dumps(
    ref: str | os.PathLike[str],
    cand: str | os.PathLike[str],
    *,
    profile: Profile = "port",
    rtol: float | None = None,
    atol: float | None = None,
    min_cosine: float | None = None,
    pair: PairMode = "auto",
    device: str | torch.device = "cpu",
) -> CompareReport:
    """Compare CAND dumps against REF dumps (files or directories); the report of every pair.

    ``profile`` sets the tolerance (``same-kernel``, ``kernel``, ``port``); ``rtol``, ``atol``
    and ``min_cosine`` override its figures. Raises :class:`~mmcli.errors.InputError` for
    input that cannot be compared (a missing file, a file that is not a dump, directories
    that cannot be paired).
    """
    from mmcli.devices import resolve_device

    if profile not in PROFILES:
        raise InputError(f"unknown profile {profile!r}", hint=f"one of {', '.join(PROFILES)}")
    if pair not in PAIR_MODES:
        raise InputError(f"unknown pairing {pair!r}", hint=f"one of {', '.join(PAIR_MODES)}")
    over = Overrides(rtol, atol, min_cosine)
    over.check()
    target = device if isinstance(device, torch.device) else resolve_device(device)
    pairing = pair_dumps(Path(ref), Path(cand), pair)
    report = CompareReport(
        ref=str(ref),
        cand=str(cand),
        profile=profile,
        device=str(target),
        how=pairing.how,
        skipped=[str(p) for p in pairing.skipped],
    )
    for side, paths in (("REF", pairing.unpaired_ref), ("CAND", pairing.unpaired_cand)):
        for path in paths:
            report.findings.append(
                codes.finding(
                    "compare-unpaired",
                    f"{side} dump {printable(str(path))} has no partner (paired by {pairing.how})",
                    "a prompt captured on one side only; compare the two files directly, or "
                    "pass --pair order",
                )
            )
    for p in pairing.pairs:
        report.pairs.append(_compare_pair(p, profile, over, target))
    return report


def _dtype(dump: Dump, index: int) -> str:
    tensors = dump.header.tensors
    whole = dump.layout.stacked or dump.layout.merged
    key = "mm_embeddings" if whole else f"mm_embeddings.{index}"
    return tensors[key].dtype_name


def _compare_pair(p: Pair, profile: Profile, over: Overrides, device: torch.device) -> PairReport:
    with load_dump(p.ref, device=device) as ref, load_dump(p.cand, device=device) as cand:
        report = PairReport(str(p.ref), str(p.cand), p.how, ref.num_items, cand.num_items)
        if ref.num_items != cand.num_items:
            report.findings.append(codes.item_count(ref.num_items, cand.num_items))
        prints_ref: list[_Print] = []
        prints_cand: list[_Print] = []
        by_item: dict[int, list[Finding]] = {}
        for i in range(min(ref.num_items, cand.num_items)):
            item, found, pr, pc = _compare_item(i, ref, cand, profile, over)
            report.items.append(item)
            by_item[i] = found
            prints_ref.append(pr)
            prints_cand.append(pc)
        _find_swaps(ref, cand, report, by_item, prints_ref, prints_cand, profile, over)
        for i in sorted(by_item):
            report.findings.extend(by_item[i])
            report.items[i].failed = any(f.severity == "error" for f in by_item[i])
    return report


def _fingerprint(t: torch.Tensor, norms: torch.Tensor | None = None) -> _Print:
    """``norms``: the item's row norms when measured (else computed a block of rows at a time:
    a float64 copy of the whole item would be 4× its size)."""
    rows = t.reshape(-1, t.shape[-1]) if t.ndim >= 2 else t.reshape(1, -1)
    first = rows[0].double().cpu() if rows.shape[0] and rows.shape[1] else None
    if norms is not None:
        return _Print(tuple(t.shape), float(norms.pow(2).sum()) ** 0.5, first)
    total = 0.0
    for i in range(0, rows.shape[0], 1024):
        total += float(rows[i : i + 1024].double().pow(2).sum())
    return _Print(tuple(t.shape), total**0.5, first)


def _compare_item(
    i: int, ref: Dump, cand: Dump, profile: Profile, over: Overrides
) -> tuple[ItemReport, list[Finding], _Print, _Print]:
    rd, cd = _dtype(ref, i), _dtype(cand, i)
    for side, dump, dt in (("REF", ref, rd), ("CAND", cand, cd)):
        if not is_float(dt):
            raise InputError(
                f"{printable(str(dump.path))}: item {i} has dtype {dt}, not a floating dtype",
                hint="encoder outputs are bf16, fp16 or fp32; `mmcli check-embeddings` on "
                f"the {side} dump says more",
            )
    a, b = ref.embedding(i), cand.embedding(i)
    item = ItemReport(i, tuple(a.shape), tuple(b.shape), name_of(a.dtype), name_of(b.dtype))
    found: list[Finding] = []
    if a.shape != b.shape:  # the masks then differ too; the shape says more
        found.append(codes.shape(i, tuple(a.shape), tuple(b.shape)))
        return item, found, _fingerprint(a), _fingerprint(b)
    ma, mb = ref.is_embed(i), cand.is_embed(i)
    rows = a.shape[0] if a.ndim else 1
    if not _same_mask(ma, mb, rows, rows):
        found.append(codes.mask(i, ma, mb, rows))
    tol = tolerance(profile, rd, cd, over)
    item.metrics = measure(a, b, tol)
    found.extend(codes.diagnose(i, a, b, item.metrics))
    stats = item.metrics.rows
    return item, found, _fingerprint(a, stats.ref_norm), _fingerprint(b, stats.cand_norm)


def _same_mask(a: torch.Tensor | None, b: torch.Tensor | None, rows_a: int, rows_b: int) -> bool:
    """Masks equal exactly, an absent one standing for every position an embedding."""
    if a is None and b is None:
        return True
    x = torch.ones(rows_a, dtype=torch.bool) if a is None else a.reshape(-1).to("cpu", torch.bool)
    y = torch.ones(rows_b, dtype=torch.bool) if b is None else b.reshape(-1).to("cpu", torch.bool)
    return x.shape == y.shape and torch.equal(x, y)


def _likeness(r: _Print, c: _Print) -> float:
    if r.shape != c.shape or r.first is None or c.first is None:
        return -2.0
    if not (0.95 <= (c.norm / r.norm if r.norm else 0.0) <= 1.05):
        return -2.0
    return float(torch.nn.functional.cosine_similarity(r.first, c.first, dim=0))


def _find_swaps(
    ref: Dump,
    cand: Dump,
    report: PairReport,
    by_item: dict[int, list[Finding]],
    prints_ref: list[_Print],
    prints_cand: list[_Print],
    profile: Profile,
    over: Overrides,
) -> None:
    """Replace the diagnosis of a failing CAND item that matches another REF item (checked
    in full) by ``compare-items-swapped``."""
    failing = [
        i
        for i, found in by_item.items()
        if any(f.severity == "error" and f.code != "compare-nonfinite" for f in found)
    ]
    for i in failing:
        scored = sorted(
            ((_likeness(prints_ref[j], prints_cand[i]), j) for j in range(len(prints_ref))),
            reverse=True,
        )
        for score, j in scored[:_SWAP_CANDIDATES]:
            if j == i or score < 0.99:
                continue
            a, b = ref.embedding(j), cand.embedding(i)
            tol = tolerance(profile, name_of(a.dtype), name_of(b.dtype), over)
            if measure(a, b, tol).passed:
                keep = [f for f in by_item[i] if f.code == "compare-mask"]
                by_item[i] = [*keep, codes.swapped(i, j)]
                break
