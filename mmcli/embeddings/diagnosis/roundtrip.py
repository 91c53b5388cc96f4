"""The round-trip judgment: does ``gather(scatter(item))`` give the item back, bit for bit, and
does a stored scattered ``placeholders`` tensor agree with the item and its mask?

Every ``roundtrip`` finding is made here, for items in memory and items streamed from a dump
alike.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from mmcli.dtypes import name_of
from mmcli.embeddings.ops import Impl, gather_mm_placeholders, scatter_mm_placeholders
from mmcli.embeddings.reference import same_bits
from mmcli.findings import Finding
from mmcli.text import shape_text

#: ``clock(stage)`` returns a context manager that times one stage of the work.
Clock = Callable[[str], AbstractContextManager[Any]]


def judge_roundtrip(
    index: int,
    emb: torch.Tensor,
    mask: torch.Tensor | None,
    *,
    impl: Impl = "reference",
    clock: Clock | None = None,
) -> list[Finding]:
    """Scatter then gather ``emb`` on its device with ``impl``; any difference is a finding.

    ``clock(stage)`` (when given) times the ``scatter``, ``gather`` and ``check``
    (comparison) stages. A scatter or gather that raises (a dtype without kernels on the
    device) is a ``roundtrip`` finding, not a crash.
    """

    def timed(stage: str) -> AbstractContextManager[Any]:
        return clock(stage) if clock is not None else nullcontext()

    if mask is None:
        return []  # without a mask both are the identity (the very same object)
    device_mask = mask.to(emb.device)
    try:
        with timed("scatter"):
            scattered = scatter_mm_placeholders(emb, device_mask, impl=impl)
        with timed("gather"):
            gathered = gather_mm_placeholders(scattered, device_mask, impl=impl)
    except RuntimeError as exc:  # torch has no kernel for this dtype on this device
        return [_failed(index, emb, exc)]
    del scattered
    with timed("check"):
        return _compare(index, emb, gathered)


def _compare(index: int, emb: torch.Tensor, gathered: torch.Tensor) -> list[Finding]:
    """``gather(scatter(emb))`` against ``emb``."""
    if gathered.shape != emb.shape or gathered.dtype != emb.dtype:
        return [
            Finding(
                "roundtrip",
                "error",
                f"gather(scatter(item {index})) gave {shape_text(gathered.shape)} "
                f"{name_of(gathered.dtype)}, expected {shape_text(emb.shape)} "
                f"{name_of(emb.dtype)}",
                "the scatter/gather implementation changes the shape or dtype",
                item=index,
            )
        ]
    if same_bits(gathered, emb):
        return []
    same = (gathered == emb) | (torch.isnan(gathered) & torch.isnan(emb))
    if bool(same.all()):
        return []
    bad_rows = ~same.all(dim=1)
    leaked = (torch.isnan(gathered) & ~torch.isnan(emb)).any(dim=1)
    leak = f"; {int(leaked.sum())} of them hold NaN the item does not" if leaked.any() else ""
    return [
        Finding(
            "roundtrip",
            "error",
            f"gather(scatter(item {index})) differs from the item in "
            f"{int(bad_rows.sum())} of {emb.shape[0]} rows (first: row "
            f"{int(bad_rows.nonzero()[0])}){leak}",
            "the scatter/gather implementation or the mask is wrong: NaN padding leaks in "
            "when True positions and rows are misaligned",
            item=index,
        )
    ]


def _failed(index: int, emb: torch.Tensor, exc: Exception) -> Finding:
    """Scatter or gather raised on this item (e.g. a dtype without kernels)."""
    reason = " ".join(str(exc).split())[:200]
    return Finding(
        "roundtrip",
        "error",
        f"scatter/gather of item {index} ({name_of(emb.dtype)} on {emb.device}) failed: {reason}",
        "the engine's merge would fail the same way: return embeddings in the model dtype "
        "(bf16, fp16 or fp32)",
        item=index,
    )


def judge_stored(
    index: int, emb: torch.Tensor, mask: torch.Tensor | None, stored: torch.Tensor
) -> list[Finding]:
    """A stored scattered ``placeholders`` tensor against the item and its mask."""
    rows = int(mask.shape[0]) if mask is not None else int(emb.shape[0])
    expected = (rows, *emb.shape[1:])
    hint = (
        "the stored placeholders were made from another item, mask or dtype: an encoder "
        "cache entry keyed on the wrong hash, or a stale cache"
    )
    if tuple(stored.shape) != expected or stored.dtype != emb.dtype:
        return [
            Finding(
                "roundtrip",
                "error",
                f"stored placeholders for item {index} are {shape_text(stored.shape)} "
                f"{name_of(stored.dtype)}, expected {shape_text(expected)} "
                f"{name_of(emb.dtype)}",
                hint,
                item=index,
            )
        ]
    stored = stored.to(emb.device)
    if mask is None:
        embedded, padding = stored, stored[:0]
    else:
        mask = mask.to(emb.device)
        embedded, padding = stored[mask], stored[~mask]
    problems: list[str] = []
    same = (embedded == emb) | (torch.isnan(embedded) & torch.isnan(emb))
    bad = int((~same.all(dim=1)).sum()) if emb.ndim == 2 and emb.numel() else 0
    if bad:
        problems.append(f"{bad} of {emb.shape[0]} embedding rows differ from the item")
    not_nan = int((~torch.isnan(padding).all(dim=1)).sum()) if padding.numel() else 0
    if not_nan:
        problems.append(f"{not_nan} of {padding.shape[0]} non-embedding positions are not NaN")
    if not problems:
        return []
    return [
        Finding(
            "roundtrip",
            "error",
            f"stored placeholders for item {index} disagree with the item and its mask: "
            + "; ".join(problems),
            hint,
            item=index,
        )
    ]
