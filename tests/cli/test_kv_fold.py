"""Folding the layer table's rows: runs of like layers, and repeating patterns of runs."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mmcli.cli.kv_share.fold import fold_layers
from mmcli.kv.inputs.layer_config import load_config
from mmcli.kv.spec import FullAttentionSpec, Layer, SlidingWindowSpec
from mmcli.text import index_ranges

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "kv"


def name(i: int) -> str:
    return f"model.layers.{i}.self_attn.attn"


def test_fold_rows() -> None:
    spec = FullAttentionSpec(16, 8, 128, "bfloat16")
    uniform94 = [Layer(name(i), spec) for i in range(94)]
    rows = fold_layers(uniform94, [0] * 94)
    assert len(rows) == 1 and len(rows[0].indices) == 94
    assert len(fold_layers(uniform94, [0] * 94, expand=True)) == 94
    cla94 = [Layer(name(i), spec, name(i - 1) if i % 2 else None) for i in range(94)]
    rows = fold_layers(cla94, [0] * 94)
    assert [(r.role, len(r.indices), r.offset) for r in rows] == [
        ("owns", 47, None),
        ("shares", 47, 1),
    ]
    assert index_ranges(rows[1].indices) == "1, 3, …, 93"
    gemma = load_config(SAMPLES / "gemma3n-e2b-like.json")
    rows = fold_layers(gemma.layers, [None] * 30)
    assert [index_ranges(r.indices) for r in rows] == [
        "0–3, 5–8, 10–13, 15–18",
        "4, 9, 14, 19",
        "20–23, 25–28",
        "24, 29",
    ]
    assert [r.target for r in rows[2:]] == [name(18), name(19)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["full", "sliding", "none"]), st.integers(-1, 3)),
        min_size=1,
        max_size=40,
    )
)
def test_fold_rows_partition_the_layers(kinds: list[tuple[str, int]]) -> None:
    """Folded rows cover every layer once, and each row's layers really are alike."""
    full = FullAttentionSpec(16, 8, 128, "bfloat16")
    slide = SlidingWindowSpec(16, 8, 128, "bfloat16", 512)
    layers = []
    for i, (kind, back) in enumerate(kinds):
        spec = full if kind == "full" else slide if kind == "sliding" else None
        target = name(i - back) if 0 < back <= i and spec is not None else None
        layers.append(Layer(name(i), spec, target, kind))
    rows = fold_layers(layers, [None] * len(layers))
    assert sorted(i for r in rows for i in r.indices) == list(range(len(layers)))
    for row in rows:
        members = [layers[i] for i in row.indices]
        assert len({(m.spec, m.kind, m.kv_sharing_target is None) for m in members}) == 1
        if row.role == "shares":
            same_target = len({m.kv_sharing_target for m in members}) == 1
            same_offset = (
                len(
                    {
                        i - int(layers[i].kv_sharing_target.split(".")[2])  # type: ignore[union-attr]
                        for i in row.indices
                    }
                )
                == 1
            )
            assert same_target or same_offset
            assert row.target is not None or row.offset is not None
