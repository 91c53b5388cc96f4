"""The layer table's folding at scale: rows on small cases, written out by hand; only the
first rows made; range text from a million indices; and the table of a million-layer config
in a real process within the contract's bounds."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hf_configs import gemma
from hypothesis import given, settings
from hypothesis import strategies as st

from mmcli.cli.kv_share.fold import Row, first_index, fold_layers, fold_rows
from mmcli.cli.kv_share.render import _name_template
from mmcli.kv.spec import FullAttentionSpec, Layer, SlidingWindowSpec
from mmcli.kv.state import MambaSpec
from mmcli.text import index_ranges

FULL = FullAttentionSpec(16, 8, 128, "bfloat16")
SLIDE = SlidingWindowSpec(16, 8, 128, "bfloat16", 512)
MAMBA = MambaSpec("linear", "bfloat16", "bfloat16", num_heads=2, head_dim=8)


def name(i: int) -> str:
    return f"model.layers.{i}.self_attn.attn"


def shown(rows: list[Row]) -> list[tuple[Any, ...]]:
    """Each row as the table shows it: layers, kind, role, target, offset, groups."""
    return [
        (index_ranges(r.indices), r.kind, r.role, r.target, r.offset, sorted(r.groups))
        for r in rows
    ]


def test_five_sliding_one_full() -> None:
    layers = [Layer(name(i), FULL if i % 6 == 5 else SLIDE) for i in range(20)]
    groups = [1 if i % 6 == 5 else 2 if i >= 18 else 0 for i in range(20)]
    assert shown(fold_layers(layers, groups)) == [
        ("0–4, 6–10, 12–16", "sliding", "owns", None, None, [0]),
        ("5, 11, 17", "full", "owns", None, None, [1]),
        ("18–19", "sliding", "owns", None, None, [2]),
    ]
    rows = fold_layers(layers, groups)
    assert [(r.size, r.first, r.starts, r.run_length) for r in rows] == [
        (15, 0, [0, 6, 12], 5),
        (3, 5, [5, 11, 17], 1),
        (2, 18, [18], 2),
    ]


def test_shared_tail_with_fixed_targets_then_offsets() -> None:
    """Gemma-3n-like: sliding layers share the last sliding owner, full ones the last full
    owner (a fixed target); then Hunyuan-CLA-like pairs that share with i − 1 (an offset)."""
    layers = [Layer(name(i), FULL if i % 3 == 2 else SLIDE) for i in range(6)]
    for i in range(6, 12):
        full = i % 3 == 2
        layers.append(Layer(name(i), FULL if full else SLIDE, name(5 if full else 4)))
    for i in range(12, 16):
        layers.append(Layer(name(i), FULL, name(i - 1) if i % 2 else None))
    assert shown(fold_layers(layers, [None] * 16)) == [
        ("0–1, 3–4", "sliding", "owns", None, None, []),
        ("2, 5", "full", "owns", None, None, []),
        ("6–7, 9–10", "sliding", "shares", name(4), None, []),
        ("8, 11", "full", "shares", name(5), None, []),
        ("12, 14", "full", "owns", None, None, []),
        ("13, 15", "full", "shares", None, 1, []),
    ]


def test_mamba_and_attention_interleaved() -> None:
    layers = [Layer(name(i), FULL if i % 4 == 3 else MAMBA) for i in range(16)]
    layers += [Layer(name(16), None), Layer(name(17), None), Layer(name(18), None, kind="mlp")]
    groups = [0 if i % 4 == 3 else 1 + i % 4 for i in range(16)] + [None] * 3
    assert shown(fold_layers(layers, groups)) == [
        ("0–2, 4–6, 8–10, 12–14", "mamba", "owns", None, None, [1, 2, 3]),
        ("3, 7, 11, 15", "full", "owns", None, None, [0]),
        ("16–17", "none", "none", None, None, []),
        ("18", "mlp", "none", None, None, []),
    ]


def test_duplicate_name_and_a_target_that_is_not_a_layer() -> None:
    """A target named twice is its first index (offset 3, not 1); a target that is no
    layer keeps its name and has no offset."""
    layers = [Layer("a", FULL), Layer("b", FULL), Layer("a", FULL)]
    layers += [Layer("c", SLIDE, "a"), Layer("d", SLIDE, "zz")]
    assert first_index(["a", "b", "a"]) == {"a": 0, "b": 1}
    assert shown(fold_layers(layers, [None] * 5)) == [
        ("0–2", "full", "owns", None, None, []),
        ("3", "sliding", "shares", "a", 3, []),
        ("4", "sliding", "shares", "zz", None, []),
    ]
    expanded = fold_layers(layers, [0, 0, 0, None, None], expand=True)
    assert [(r.indices, r.target, r.offset, r.groups) for r in expanded] == [
        ([0], None, None, {0}),
        ([1], None, None, {0}),
        ([2], None, None, {0}),
        ([3], "a", 3, set()),
        ([4], "zz", None, set()),
    ]


def test_a_run_keeps_the_target_or_the_offset_it_starts_with() -> None:
    """3–4 share layer 0; 5 shares layer 1, the same distance back as 4 (4) but another
    target: a run keeps what it started with, so 5 starts a new run, which 6 continues."""
    layers = [Layer(name(i), FULL) for i in range(3)]
    layers += [Layer(name(i), FULL, name(t)) for i, t in ((3, 0), (4, 0), (5, 1), (6, 2))]
    assert shown(fold_layers(layers, [None] * 7)) == [
        ("0–2", "full", "owns", None, None, []),
        ("3–4", "full", "shares", name(0), None, []),
        ("5–6", "full", "shares", None, 4, []),
    ]


def test_only_the_first_rows_are_made() -> None:
    kinds = [FULL, SLIDE, SLIDE, FULL, FULL, SLIDE, FULL, SLIDE, SLIDE, SLIDE] * 30
    layers = [Layer(name(i), spec) for i, spec in enumerate(kinds[:-3])]
    every = fold_layers(layers, [None] * len(layers))
    folded = fold_rows(layers, [None] * len(layers), limit=3)
    assert folded.count == len(every) > 3
    assert shown(folded.rows) == shown(every[:3])
    assert sorted(folded.specs, key=str) == sorted([FULL, SLIDE], key=str)
    assert fold_rows([], []).count == 0 and fold_layers([], []) == []


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["full", "sliding", "none"]), st.integers(-1, 3)),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 6),
)
def test_first_rows_are_those_of_the_whole_fold(kinds: list[tuple[str, int]], limit: int) -> None:
    layers = []
    for i, (kind, back) in enumerate(kinds):
        spec = FULL if kind == "full" else SLIDE if kind == "sliding" else None
        target = name(i - back) if 0 < back <= i and spec is not None else None
        layers.append(Layer(name(i), spec, target, kind))
    groups = [i % 3 if kind != "none" else None for i, (kind, _) in enumerate(kinds)]
    every = fold_layers(layers, groups)
    folded = fold_rows(layers, groups, limit=limit)
    assert folded.count == len(every)
    assert shown(folded.rows) == shown(every[:limit])
    for row in every:  # a row's groups are those of its layers
        assert row.groups == {groups[i] for i in row.indices} - {None}


def test_index_ranges_of_many_indices() -> None:
    assert index_ranges([]) == ""
    assert index_ranges([5, 1, 2, 3]) == "1–3, 5"
    assert index_ranges([1, 1, 2]) == "1, 1–2"  # a repeated index starts a new range
    assert index_ranges(range(0, 30, 2)) == "0, 2, …, 28"
    assert index_ranges(range(0, 30, 2), limit=None) == ", ".join(map(str, range(0, 30, 2)))
    assert index_ranges([0, 1, 3], limit=1) == "0–1, 3, …, 3"
    sparse = [i for i in range(1_000_000) if i % 6 != 5]
    assert index_ranges(sparse) == "0–4, 6–10, …, 999996–999999"
    assert index_ranges(range(1_000_000)) == "0–999999"
    assert index_ranges(list(range(0, 7_000_000, 7)), limit=6) == "0, 7, …, 6999993"


def test_name_template() -> None:
    names = [name(i) for i in range(40)]
    assert _name_template(names) == ("model.layers.{i}.self_attn.attn", [])
    names[7] = "model.layers.7.mlp"
    names[9] = "lm_head"
    assert _name_template(names) == ("model.layers.{i}.{self_attn.attn,mlp}", [9])
    assert _name_template([f"m.{i}.x%d" for i in range(5)]) == ("m.{i}.x%d", [])
    assert _name_template([f"m.{i}.t{i % 5}" for i in range(10)]) is None  # 5 tails
    assert _name_template([name(i) if i % 4 else "x" for i in range(40)]) is None
    assert _name_template(["a", "b"]) is None


# -- a million layers, in a real process -----------------------------------------------------


@pytest.mark.slow
def test_a_million_layer_table_is_bounded(measured_within: Any, tmp_path: Path) -> None:
    """Issue-sized: the default table of a million layers (Gemma-3n-like, the second half
    sharing) in < 10 s of CPU (startup included) and < 1 GiB resident. The shared tail
    starts after a full layer with a sliding one before it (as in every published Gemma
    3n), so vLLM's hard-coded targets (first shared − 2 for sliding, − 1 for full) are the
    general rule's and no layer shares across kinds."""
    n = 1_000_000
    first = 499_998  # layer 499,997 is full ((i + 1) % 6 == 0), 499,996 sliding
    doc = gemma(n, model_type="gemma3n_text", num_kv_shared_layers=n - first)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "plan.txt"
    args = ["kv-share", "plan", str(config), "--memory", "80GiB"]
    env = {**os.environ, "COLUMNS": "200"}  # rows on one line each
    usage, _ = measured_within(
        [sys.executable, "-m", "mmcli", *args], cpu_limit=10, stdout_path=out, env=env
    )
    assert usage.code in (0, 1), usage.code
    assert usage.cpu < 10, f"{usage.cpu:.1f} s of CPU ({usage.elapsed:.1f} s wall)"
    assert usage.peak < 2**30, f"peak {usage.peak >> 20} MiB"
    text = out.read_text(encoding="utf-8")
    assert "layers (1000000): model.layers.{i}.self_attn.attn" in text
    assert "(416665 layers)" in text and "→ 499996" in text and "→ 499997" in text
