"""Findings over encoder outputs taken one item at a time, then judged across items.

:class:`Diagnosis` is the engine behind :func:`mmcli.diagnose_mm_encoder_outputs` (items in
memory) and ``mmcli check-embeddings`` (items streamed from a dump): per-item checks run as
each item arrives; counts, hidden sizes, dtypes and norm outliers are judged in
:meth:`Diagnosis.finish` from small per-item statistics, so no item needs to stay in memory.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from mmcli.dtypes import name_of, torch_model_dtype
from mmcli.embeddings.hints import count_hint, ndim_hint
from mmcli.embeddings.ops import same_bits
from mmcli.findings import Finding, Severity
from mmcli.text import items_text, shape_text

_COMMON_FLOATS = (torch.bfloat16, torch.float16, torch.float32, torch.float64)

#: A mean row norm further than this factor from the median of the other items is an outlier.
NORM_OUTLIER_FACTOR = 10.0


@dataclass
class ItemStats:
    """What the diagnosis learned about one item (the per-item row of a report)."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    num_placeholders: int | None
    num_embeds: int | None
    finite: bool | None
    mean_row_norm: float | None = None
    roundtrip_ready: bool = False

    def to_json(self) -> dict[str, Any]:
        """The SPEC's per-item JSON shape."""
        return {
            "index": self.index,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "num_placeholders": self.num_placeholders,
            "num_embeds": self.num_embeds,
            "finite": self.finite,
        }


class Diagnosis:
    """Accumulates findings over items added one at a time; :meth:`finish` adds cross-item ones.

    ``fetch(i)`` returns item ``i`` again (from memory or the file): it is called only to
    confirm that two items whose row norms match are byte-for-byte identical.
    """

    def __init__(
        self,
        *,
        expected_num_items: int | None = None,
        hidden_size: int | None = None,
        model_dtype: str | torch.dtype | None = None,
        fetch: Callable[[int], torch.Tensor] | None = None,
    ) -> None:
        self.expected_num_items = expected_num_items
        self.hidden_size = hidden_size
        self.model_dtype = None if model_dtype is None else torch_model_dtype(model_dtype)
        self.fetch = fetch
        self.findings: list[Finding] = []
        self.items: list[ItemStats] = []
        self._fingerprints: dict[tuple[Any, ...], list[int]] = {}
        self._hidden: dict[int, list[int]] = {}
        self._dtypes: dict[str, list[int]] = {}

    def _add(
        self, code: str, severity: Severity, message: str, hint: str, item: int | None
    ) -> None:
        self.findings.append(Finding(code, severity, message, hint, item=item))

    # -- a stacked tensor -------------------------------------------------------------------
    def stacked(self, shape: Sequence[int]) -> bool:
        """Judge a stacked ``mm_embeddings`` tensor's shape; True when its items can be checked."""
        if len(shape) == 3:
            self._add(
                "stacked-3d",
                "warning",
                f"mm_embeddings is one stacked {shape_text(shape)} tensor: it passes the engine's "
                f"check as {shape[0]} items of {shape[1]} rows each",
                "a stacked tensor forces every item to the same token count; return a list of "
                "per-item (tokens, hidden) tensors if items can differ (other image sizes, tiling)",
                None,
            )
            return True
        self._add(
            "stacked-ndim",
            "error",
            f"mm_embeddings is one stacked {shape_text(shape)} tensor ({len(shape)}-D); a stacked "
            "tensor must be 3-D (items, tokens, hidden)",
            (
                "a 2-D tensor iterates as 1-D rows: tokens flattened into items, or a single item "
                "missing its list; wrap it in a list"
                if len(shape) == 2
                else ndim_hint(shape[1:])
                if len(shape) > 3
                else "return per-item (tokens, hidden)"
            ),
            None,
        )
        return False

    # -- one item ---------------------------------------------------------------------------
    def add(self, index: int, emb: torch.Tensor, mask: torch.Tensor | None = None) -> ItemStats:
        """Run every per-item check on item ``index`` (and its mask) and record the stats."""
        shape = tuple(int(d) for d in emb.shape)
        floating = emb.is_floating_point()
        stats = ItemStats(
            index=index,
            shape=shape,
            dtype=name_of(emb.dtype),
            num_placeholders=None,
            num_embeds=shape[0] if emb.ndim == 2 else None,
            finite=True if not floating else None,
        )
        self.items.append(stats)
        if emb.ndim >= 1:
            self._hidden.setdefault(shape[-1], []).append(index)
        if floating:
            self._dtypes.setdefault(stats.dtype, []).append(index)
        mask_count = self._mask(index, stats, mask)
        if emb.ndim != 2:
            self._ndim(index, shape, mask_count)
        elif not floating:
            self._add(
                "integer-dtype",
                "error",
                f"item {index} has dtype {stats.dtype}, which cannot hold the NaN fill of "
                "non-embedding placeholder positions",
                "encoder outputs must be floating point: token ids or a quantised tensor were "
                "returned instead of embeddings, or a .to(dtype) picked the wrong type",
                index,
            )
        key = self._values(index, emb, stats) if floating else None
        if emb.ndim == 2 and shape[0] == 0:
            self._add(
                "empty-item",
                "warning",
                f"item {index} has 0 rows {shape_text(shape)}",
                "an empty item takes no placeholder positions: a zero-size image, a crop that "
                "removed everything, or a filtered batch",
                index,
            )
        if emb.ndim == 2 and mask_count is not None and mask is not None and mask.ndim == 1:
            rows = shape[0]
            if mask_count != rows:
                extra = (
                    "; the engine would silently broadcast this 1-row item to every position"
                    if rows == 1
                    else ""
                )
                self._add(
                    "mask-count",
                    "error",
                    f"mask for item {index} has {mask_count} True positions but the item has "
                    f"{rows} embedding rows{extra}",
                    "placeholders truncated by a max length, processor and model disagreeing on "
                    "tokens per item (version skew, tiling), or the placeholder token emitted by "
                    "the prompt itself (off by one)",
                    index,
                )
            elif floating and mask.dtype == torch.bool:
                stats.roundtrip_ready = True
        elif emb.ndim == 2 and floating and mask is None:
            stats.roundtrip_ready = True
        if key is not None:
            self._duplicate(index, emb, stats, key)
        return stats

    def _mask(self, index: int, stats: ItemStats, mask: torch.Tensor | None) -> int | None:
        if mask is None:
            stats.num_placeholders = stats.num_embeds
            return None
        mshape = tuple(int(d) for d in mask.shape)
        if mask.ndim != 1:
            self._add(
                "mask-shape",
                "error",
                f"mask for item {index} has shape {shape_text(mshape)} ({mask.ndim}-D); it must "
                "be 1-D over the item's placeholder positions",
                "is_embed is one bool per placeholder position of one item, shape "
                "(num_placeholders,); a 2-D mask raises IndexError in the engine",
                index,
            )
            return None
        stats.num_placeholders = mshape[0]
        if mask.dtype != torch.bool:
            self._add(
                "mask-dtype",
                "error",
                f"mask for item {index} has dtype {name_of(mask.dtype)}; it must be bool",
                "torch reads an integer 0/1 mask as row indices, which is silently wrong; "
                "convert with mask.bool()",
                index,
            )
        count = int(torch.count_nonzero(mask))
        stats.num_embeds = count
        if count == 0 and mshape[0] > 0:
            self._add(
                "empty-item",
                "warning",
                f"mask for item {index} has no True position among {mshape[0]} placeholders",
                "no embedding lands in this item's placeholders: a mask built from the wrong "
                "token id, or a prompt whose image slot holds only special tokens",
                index,
            )
        return count

    def _ndim(self, index: int, shape: tuple[int, ...], mask_count: int | None) -> None:
        fits = ""
        if mask_count is not None and len(shape) >= 2:
            rows = 1
            for d in shape[:-1]:
                rows *= d
            if rows == mask_count:
                fits = f"; its {rows} rows after flattening match the mask's {mask_count} True"
        self._add(
            "item-ndim",
            "error",
            f"item {index} has shape {shape_text(shape)} ({len(shape)}-D); every item must be "
            f"2-D (num_embeds, hidden){fits}",
            ndim_hint(shape),
            index,
        )

    def _values(self, index: int, emb: torch.Tensor, stats: ItemStats) -> tuple[Any, ...] | None:
        """Finiteness, zero rows and row norms; returns the item's duplicate fingerprint."""
        if emb.numel() == 0:
            stats.finite = True
            return None
        if emb.dtype not in _COMMON_FLOATS:
            emb = emb.float()  # float8 and the like have few kernels; fp32 holds them exactly
        norms = _row_norms(emb) if emb.ndim == 2 else None
        # A NaN or inf anywhere makes its row norm non-finite, so finite norms prove the item
        # finite without a second pass; non-finite norms may be overflow, so then look closer.
        finite = (norms is not None and bool(torch.isfinite(norms).all())) or bool(
            torch.isfinite(emb).all()
        )
        stats.finite = finite
        if not finite:
            self._non_finite(index, emb)
        if norms is None or not finite:
            return None
        stats.mean_row_norm = float(norms.double().mean())
        zero = norms == 0
        if bool(zero.any()):
            # Tiny values can underflow to a norm of 0: confirm on the rows themselves.
            candidates = zero.nonzero().flatten()
            truly = candidates[(emb[candidates] == 0).all(dim=1)]
            if truly.numel():
                first = int(truly[0])
                self._add(
                    "zero-rows",
                    "warning",
                    f"item {index} has {truly.numel()} all-zero rows of {emb.shape[0]} "
                    f"(first: row {first})",
                    "zero rows usually mean padding or masked-out patches were returned as "
                    "embeddings, or a buffer allocated with zeros was never filled",
                    index,
                )
        return (stats.shape, stats.dtype, hash(tuple(norms.tolist())))

    def _non_finite(self, index: int, emb: torch.Tensor) -> None:
        nan = torch.isnan(emb)
        num_nan = int(nan.sum())
        num_inf = int(torch.isinf(emb).sum())
        bad = ~torch.isfinite(emb)
        flat = int(bad.flatten().nonzero()[0])
        where = []
        for dim in reversed(emb.shape):
            where.append(flat % dim)
            flat //= dim
        where.reverse()
        position = (
            f"row {where[0]}, column {where[1]}" if emb.ndim == 2 else f"index {tuple(where)}"
        )
        rows = ""
        hint = (
            "fp16 overflow in the encoder (run it in bf16 or fp32), uninitialised memory "
            "(torch.empty never filled), or a division by zero in a normalisation"
        )
        if emb.ndim == 2:
            bad_rows = bad.any(dim=1)
            nan_rows = int(nan.all(dim=1).sum())
            rows = f" in {int(bad_rows.sum())} of {emb.shape[0]} rows"
            if nan_rows:
                hint = (
                    f"{nan_rows} {'row is' if nan_rows == 1 else 'rows are'} entirely NaN: the "
                    "scattered placeholder form (NaN at non-embedding positions) was passed as "
                    "embeddings; otherwise " + hint
                )
        self._add(
            "non-finite",
            "error",
            f"item {index} has {num_nan} NaN and {num_inf} inf values{rows}; first at "
            f"(item {index}, {position})",
            hint,
            index,
        )

    def _duplicate(
        self, index: int, emb: torch.Tensor, stats: ItemStats, key: tuple[Any, ...]
    ) -> None:
        for other in self._fingerprints.get(key, []):
            if self.fetch is None:
                continue
            earlier = self.fetch(other)
            if earlier.shape == emb.shape and torch.equal(earlier.to(emb.device), emb):
                self._add(
                    "duplicate-items",
                    "warning",
                    f"item {index} is identical to item {other} {shape_text(stats.shape)}",
                    "the same image passed twice, or one encoder output reused for several "
                    "items (a cache keyed on the wrong hash, or a loop that kept the first "
                    "result)",
                    index,
                )
                break
        self._fingerprints.setdefault(key, []).append(index)

    # -- roundtrip --------------------------------------------------------------------------
    def roundtrip(
        self,
        index: int,
        emb: torch.Tensor,
        gathered: torch.Tensor,
    ) -> None:
        """Compare ``gather(scatter(emb))`` with ``emb``."""
        if gathered.shape == emb.shape and gathered.dtype == emb.dtype:
            if same_bits(gathered, emb):
                return
            same = (gathered == emb) | (torch.isnan(gathered) & torch.isnan(emb))
            if bool(same.all()):
                return
            bad_rows = ~same.all(dim=1)
            leaked = (torch.isnan(gathered) & ~torch.isnan(emb)).any(dim=1)
            leak = (
                f"; {int(leaked.sum())} of them hold NaN the item does not" if leaked.any() else ""
            )
            self._add(
                "roundtrip",
                "error",
                f"gather(scatter(item {index})) differs from the item in "
                f"{int(bad_rows.sum())} of {emb.shape[0]} rows (first: row "
                f"{int(bad_rows.nonzero()[0])}){leak}",
                "the scatter/gather implementation or the mask is wrong: NaN padding leaks in "
                "when True positions and rows are misaligned",
                index,
            )
            return
        self._add(
            "roundtrip",
            "error",
            f"gather(scatter(item {index})) gave {shape_text(gathered.shape)} "
            f"{name_of(gathered.dtype)}, expected {shape_text(emb.shape)} "
            f"{name_of(emb.dtype)}",
            "the scatter/gather implementation changes the shape or dtype",
            index,
        )

    def roundtrip_failed(self, index: int, emb: torch.Tensor, exc: Exception) -> None:
        """Record that scatter or gather raised on this item (e.g. a dtype without kernels)."""
        reason = " ".join(str(exc).split())[:200]
        self._add(
            "roundtrip",
            "error",
            f"scatter/gather of item {index} ({name_of(emb.dtype)} on {emb.device}) "
            f"failed: {reason}",
            "the engine's merge would fail the same way: return embeddings in the model dtype "
            "(bf16, fp16 or fp32)",
            index,
        )

    def stored_placeholders(
        self, index: int, emb: torch.Tensor, mask: torch.Tensor | None, stored: torch.Tensor
    ) -> None:
        """Check a stored scattered ``placeholders`` tensor against the item and its mask."""
        rows = int(mask.shape[0]) if mask is not None else int(emb.shape[0])
        expected = (rows, *emb.shape[1:])
        hint = (
            "the stored placeholders were made from another item, mask or dtype: an encoder "
            "cache entry keyed on the wrong hash, or a stale cache"
        )
        if tuple(stored.shape) != expected or stored.dtype != emb.dtype:
            self._add(
                "roundtrip",
                "error",
                f"stored placeholders for item {index} are {shape_text(stored.shape)} "
                f"{name_of(stored.dtype)}, expected {shape_text(expected)} "
                f"{name_of(emb.dtype)}",
                hint,
                index,
            )
            return
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
        if problems:
            self._add(
                "roundtrip",
                "error",
                f"stored placeholders for item {index} disagree with the item and its mask: "
                + "; ".join(problems),
                hint,
                index,
            )

    # -- across items -----------------------------------------------------------------------
    def finish(self, num_items: int | None = None, *, num_masks: int = 0) -> list[Finding]:
        """Add the cross-item findings and return every finding, file-level ones first."""
        found = len(self.items) if num_items is None else num_items
        expected = self.expected_num_items
        source = "expected"
        if expected is None and num_masks > found:
            expected, source = num_masks, "placeholder masks for"
        if expected is not None and found != expected:
            self._add(
                "item-count",
                "error",
                f"{found} item(s) but {expected} {source} (one per multimodal item in the prompt)",
                count_hint(found, expected),
                None,
            )
        self._hidden_sizes()
        self._dtype_mix()
        self._norm_outliers()
        return sorted(self.findings, key=lambda f: -1 if f.item is None else f.item)

    def _hidden_sizes(self) -> None:
        hint = (
            "the multimodal projector is missing or maps to the wrong size (the vision tower's "
            "own width was returned), or --hidden-size / hidden_size names another model"
        )
        if self.hidden_size is not None:
            for size, indices in sorted(self._hidden.items()):
                if size != self.hidden_size:
                    self._add(
                        "hidden-size",
                        "error",
                        f"{items_text(indices)} {'has' if len(indices) == 1 else 'have'} hidden "
                        f"size {size} but the model's hidden size is {self.hidden_size}",
                        hint,
                        indices[0] if len(indices) == 1 else None,
                    )
        elif len(self._hidden) > 1:
            groups = sorted(self._hidden.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            parts = ", ".join(f"{size} ({items_text(ix)})" for size, ix in groups)
            minority = groups[-1][1]
            self._add(
                "hidden-size",
                "error",
                f"hidden sizes differ between items: {parts}",
                hint,
                minority[0] if len(minority) == 1 else None,
            )

    def _dtype_mix(self) -> None:
        hint = (
            "dtype skew under autocast (an fp32 encoder output next to a bf16 model), or a "
            "missing .to(model dtype) after the projector"
        )
        if self.model_dtype is not None:
            want = name_of(self.model_dtype)
            for name, indices in sorted(self._dtypes.items()):
                if name != want:
                    self._add(
                        "dtype-mix",
                        "warning",
                        f"{items_text(indices)} {'is' if len(indices) == 1 else 'are'} {name} "
                        f"but the model dtype is {want}",
                        hint,
                        indices[0] if len(indices) == 1 else None,
                    )
        elif len(self._dtypes) > 1:
            groups = sorted(self._dtypes.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            parts = ", ".join(f"{name} ({items_text(ix)})" for name, ix in groups)
            minority = groups[-1][1]
            self._add(
                "dtype-mix",
                "warning",
                f"items have different dtypes: {parts}",
                hint,
                minority[0] if len(minority) == 1 else None,
            )

    def _norm_outliers(self) -> None:
        norms = [(s.index, s.mean_row_norm) for s in self.items if s.mean_row_norm is not None]
        if len(norms) < 3:
            return  # with two items there is no telling which one is off
        for index, value in norms:
            others = sorted(v for i, v in norms if i != index)
            # With an even count, compare with the nearer middle value, so that one outlier
            # among three items does not make a normal item look like one.
            low, high = statistics.median_low(others), statistics.median_high(others)
            if high > 0 and value > NORM_OUTLIER_FACTOR * high:
                ratio, side, ref = value / high, "over", high
            elif value < low / NORM_OUTLIER_FACTOR:
                ratio, side, ref = (value / low if low else 0.0), "under", low
            else:
                continue
            self._add(
                "norm-outlier",
                "warning",
                f"item {index} has mean row norm {value:.3g}, {ratio:.3g}× the median "
                f"{ref:.3g} of the other items ({side} the {NORM_OUTLIER_FACTOR:g}× bound)",
                "a missing or doubled normalisation/scaling step on this item's path, a "
                "different projector, or an item from another model",
                index,
            )


def _row_norms(emb: torch.Tensor) -> torch.Tensor:
    """Each row's L2 norm as fp32 (for bf16: from a batched dot product, to 0.5%)."""
    norms: torch.Tensor
    if emb.dtype in (torch.float32, torch.float64):
        norms = torch.linalg.vector_norm(emb, dim=1).float()
    elif emb.dtype == torch.bfloat16 and emb.is_contiguous():
        # Upcasting bf16 costs more than the reduction on CPU; a bf16 batched dot product
        # accumulates in fp32 and bf16 has fp32's range, so only precision is rounded off.
        squares = torch.bmm(emb.unsqueeze(1), emb.unsqueeze(2)).flatten()
        norms = squares.float().sqrt()
    else:  # fp16 squares overflow at 65504: accumulate in fp32
        norms = torch.linalg.vector_norm(emb, dim=1, dtype=torch.float32)
    return norms
