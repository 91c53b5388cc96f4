"""Judgments across items, made once every item has been seen: the item count, whether the
items agree on hidden size and dtype, and row-norm outliers.

They read only small per-item figures (group indices, mean row norms), never the items.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from mmcli.embeddings.hints import count_hint
from mmcli.findings import Finding, Severity
from mmcli.text import items_text

#: A mean row norm further than this factor from the median of the other items is an outlier.
NORM_OUTLIER_FACTOR = 10.0

Value = TypeVar("Value", int, str)


def judge_count(found: int, expected: int | None, num_masks: int) -> list[Finding]:
    """``found`` items against the expected count (or, with none given, against the masks
    when there are more masks than items)."""
    source = "expected"
    if expected is None and num_masks > found:
        expected, source = num_masks, "placeholder masks for"
    if expected is None or found == expected:
        return []
    return [
        Finding(
            "item-count",
            "error",
            f"{found} item(s) but {expected} {source} (one per multimodal item in the prompt)",
            count_hint(found, expected),
        )
    ]


@dataclass(frozen=True)
class Attribute:
    """How to word disagreement on one attribute every item should share with the model."""

    code: str
    severity: Severity
    hint: str
    #: ``(one item, several items)``: the verb before the value, e.g. ``("is", "are")``.
    verbs: tuple[str, str]
    #: The model's value is named after this, e.g. ``"the model dtype is"``.
    model: str
    #: Opens the message when no model value was given and the items differ.
    differ: str


HIDDEN_SIZE = Attribute(
    code="hidden-size",
    severity="error",
    hint=(
        "the multimodal projector is missing or maps to the wrong size (the vision tower's "
        "own width was returned), or --hidden-size / hidden_size names another model"
    ),
    verbs=("has hidden size", "have hidden size"),
    model="the model's hidden size is",
    differ="hidden sizes differ between items",
)

DTYPE = Attribute(
    code="dtype-mix",
    severity="warning",
    hint=(
        "dtype skew under autocast (an fp32 encoder output next to a bf16 model), or a "
        "missing .to(model dtype) after the projector"
    ),
    verbs=("is", "are"),
    model="the model dtype is",
    differ="items have different dtypes",
)


def judge_agreement(
    groups: Mapping[Value, Sequence[int]], want: Value | None, attribute: Attribute
) -> list[Finding]:
    """Items grouped by one attribute's value (``groups``: value → item indices).

    With the model's value ``want``, every group with another value is a finding; without it,
    one finding lists the groups when there is more than one, and names the item of the
    smallest group when that group is a single item.
    """
    if want is not None:
        return [
            Finding(
                attribute.code,
                attribute.severity,
                f"{items_text(indices)} {attribute.verbs[len(indices) != 1]} {value} but "
                f"{attribute.model} {want}",
                attribute.hint,
                item=indices[0] if len(indices) == 1 else None,
            )
            for value, indices in sorted(groups.items())
            if value != want
        ]
    if len(groups) <= 1:
        return []
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    parts = ", ".join(f"{value} ({items_text(indices)})" for value, indices in ordered)
    minority = ordered[-1][1]
    return [
        Finding(
            attribute.code,
            attribute.severity,
            f"{attribute.differ}: {parts}",
            attribute.hint,
            item=minority[0] if len(minority) == 1 else None,
        )
    ]


def judge_norms(norms: Sequence[tuple[int, float]]) -> list[Finding]:
    """Items whose mean row norm (``(index, norm)`` pairs) is far from the others' median."""
    if len(norms) < 3:
        return []  # with two items there is no telling which one is off
    findings: list[Finding] = []
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
        findings.append(
            Finding(
                "norm-outlier",
                "warning",
                f"item {index} has mean row norm {value:.3g}, {ratio:.3g}× the median "
                f"{ref:.3g} of the other items ({side} the {NORM_OUTLIER_FACTOR:g}× bound)",
                "a missing or doubled normalisation/scaling step on this item's path, a "
                "different projector, or an item from another model",
                item=index,
            )
        )
    return findings
