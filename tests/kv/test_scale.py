"""The planner at scale: per-distinct-spec tables, rows made on demand, C-level map checks,
and a million-layer config planned as JSON in a real process within the contract's bounds."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hf_configs import gemma

from mmcli.cli._output import emit_json
from mmcli.kv import sharing
from mmcli.kv.aliasing import check_aliasing
from mmcli.kv.engine.layout import LayerSpecs, disable_hybrid, group_layers
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import plan_kv_cache
from mmcli.kv.releases import rules_for
from mmcli.kv.result import LayerRows
from mmcli.kv.spec import FullAttentionSpec, SlidingWindowSpec

FULL = FullAttentionSpec(16, 8, 64, "float16")
SLIDE = SlidingWindowSpec(16, 8, 64, "float16", 1024)


# -- LayerSpecs -----------------------------------------------------------------------------


def test_equal_specs_share_a_slot_even_as_distinct_objects() -> None:
    twin = replace(FULL)  # equal, not the same object
    assert twin is not FULL
    specs = LayerSpecs.of(["a", "b", "c", "d"], [FULL, SLIDE, twin, SLIDE])
    assert specs.table == [FULL, SLIDE]
    assert specs.index == [0, 1, 0, 1]
    assert specs.counts() == {FULL: 2, SLIDE: 2}
    assert list(specs.items()) == [("a", FULL), ("b", SLIDE), ("c", FULL), ("d", SLIDE)]


def test_map_changes_each_spec_once_with_its_first_layer_and_merges_equal_results() -> None:
    specs = LayerSpecs.of(["s0", "f1", "s2"], [SLIDE, FULL, SLIDE])
    seen: list[str] = []

    def record(name: str, spec: Any) -> Any:
        seen.append(name)
        return spec

    assert specs.map(record) is not specs
    assert seen == ["s0", "f1"]
    # Sliding becomes full: two slots become one, and every layer points at it.
    merged = disable_hybrid(specs)
    assert merged.table == [FULL]
    assert merged.index == [0, 0, 0]
    assert merged.counts() == {FULL: 3}


def test_groups_from_the_table_match_the_layer_order() -> None:
    names = [f"l{i}" for i in range(12)]
    per_layer = [FULL if (i + 1) % 6 == 0 else SLIDE for i in range(12)]
    layout = group_layers(LayerSpecs.of(names, per_layer), rules_for("0.34"))
    # 10 sliding, 2 full: group size 2, sliding split into 5 strided groups.
    assert [g.layer_names for g in layout.groups] == [
        ["l0", "l6"],
        ["l1", "l7"],
        ["l2", "l8"],
        ["l3", "l9"],
        ["l4", "l10"],
        ["l5", "l11"],
    ]
    assert layout.counts == {SLIDE: 10, FULL: 2}


# -- LayerRows and the JSON they write -------------------------------------------------------


def _plan(n: int, **extra: Any) -> Any:
    model = parse_hf_config(gemma(n, **extra), default_name="g", where="config.json")
    return plan_kv_cache(model, PlanOptions(memory_bytes=2**30))


def test_layer_rows_behave_as_a_list_of_dicts() -> None:
    plan = _plan(12)
    rows = plan.to_json(aliasing_verified=True, exit_code=0, lazy_layers=True)["layers"]
    assert isinstance(rows, LayerRows)
    assert len(rows) == 12
    assert rows[0]["name"] == "model.layers.0.self_attn.attn"
    assert rows[-1] == rows[11]
    assert rows[5]["attention"] == "full" and rows[0]["sliding_window"] == 1024
    assert rows[10:] == [rows[10], rows[11]]
    assert rows == list(rows)
    with pytest.raises(IndexError):
        rows[12]


def test_json_rows_are_the_rows_encoded() -> None:
    plan = _plan(12)
    rows = plan.to_json(aliasing_verified=True, exit_code=0, lazy_layers=True)["layers"]
    texts = list(rows.json_rows())
    assert [json.loads(t) for t in texts] == list(rows)
    compact = json.JSONEncoder(separators=(", ", ": "))
    assert texts == [compact.encode(row) for row in rows]


def _printed(doc: dict[str, Any]) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        emit_json(doc)
    return out.getvalue()


def test_a_short_layer_list_prints_indented_as_before() -> None:
    doc = _plan(12).to_json(aliasing_verified=True, exit_code=0)
    plain = {**doc, "layers": list(doc["layers"])}
    assert _printed(doc) == json.dumps(plain, indent=2) + "\n"


def test_a_long_layer_list_prints_one_row_per_line() -> None:
    n = 12_000
    doc = _plan(n, num_kv_shared_layers=0).to_json(
        aliasing_verified=True, exit_code=0, lazy_layers=True
    )
    text = _printed(doc)
    assert json.loads(text)["layers"] == list(doc["layers"])
    lines = text.splitlines()
    first = lines.index('  "layers": [')
    assert lines[first + 1].startswith('    {"index": 0, "name": ')
    assert lines[first + n].startswith(f'    {{"index": {n - 1}, ')
    assert lines[first + n + 1] == "  ],"


# -- the map checked in C, explained entry by entry -----------------------------------------


def test_aliasing_names_the_layer_when_an_alias_goes_wrong(monkeypatch: Any) -> None:
    model = parse_hf_config(
        {
            "model_type": "gemma3n_text",
            "num_hidden_layers": 4,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "hidden_size": 2048,
            "sliding_window": 512,
            "num_kv_shared_layers": 2,
            "layer_types": ["sliding_attention", "full_attention"] * 2,
        },
        default_name="g",
        where="config.json",
    )
    plan = plan_kv_cache(model, PlanOptions())
    assert check_aliasing(plan, "meta").verified
    real = sharing.initialize_kv_cache_for_kv_sharing

    def swapped(shared: Any, groups: Any, caches: Any) -> None:
        real(shared, groups, caches)
        first = next(iter(shared))
        caches[first] = object()  # no longer its target's cache

    monkeypatch.setattr("mmcli.kv.aliasing.initialize_kv_cache_for_kv_sharing", swapped)
    report = check_aliasing(plan, "meta")
    assert not report.verified
    layer = next(iter(plan.sharing_map()))
    assert report.problems == [
        f"{layer} does not read the tensor of its target {plan.sharing_map()[layer]}"
    ]


# -- a million layers, in a real process -----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("shared", [0, 500_000])
def test_a_million_layer_plan_as_json_is_bounded(
    measured_within: Any, tmp_path: Path, shared: int
) -> None:
    """Issue-sized: < 10 s of CPU (startup included) and < 1 GiB resident, exit 1 (the
    default memory cannot hold a request), valid JSON with every layer."""
    config = tmp_path / "config.json"
    doc = gemma(1_000_000)
    if shared:
        doc["model_type"] = "gemma3n_text"
        doc["num_kv_shared_layers"] = shared
    config.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "plan.json"
    args = ["kv-share", "plan", str(config), "--memory", "1GiB", "--format", "json"]
    usage, _ = measured_within(
        [sys.executable, "-m", "mmcli", *args], cpu_limit=10, stdout_path=out
    )
    assert usage.code in (0, 1), usage.code
    assert usage.cpu < 10, f"{usage.cpu:.1f} s of CPU ({usage.elapsed:.1f} s wall)"
    assert usage.peak < 2**30, f"peak {usage.peak >> 20} MiB"
    # Read back in a child too: a parent holding the parsed plan would inflate the next
    # child's peak (a forked child starts with its parent's resident pages).
    count = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys; p = json.load(open(sys.argv[1], encoding='utf-8'));"
            "print(len(p['layers']), sum(r['kv_sharing_target'] is None for r in p['layers']))",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert count == ["1000000", str(1_000_000 - shared)]


# -- a sweep's points share the layer work; stage ranges are summed once --------------------


def _counted(monkeypatch: Any, module: Any, names: tuple[str, ...]) -> Counter[str]:
    calls: Counter[str] = Counter()
    for name in names:
        real = getattr(module, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    return calls


_LAYER_WORK = ("rank_layers", "validate_sharing_map", "group_layers")


@pytest.mark.parametrize("text", ["max-model-len=1K..8K", "memory=1GiB..8GiB:4"])
def test_a_sweep_builds_the_layer_table_once_for_all_its_points(
    monkeypatch: Any, text: str
) -> None:
    """Four points of a sharing model: the layers are ranked, the map checked and each side
    (with and without sharing) grouped once, not once per point; every point is the plan a
    plain run at that value makes."""
    from mmcli.kv import plan as plan_module
    from mmcli.kv.whatif.sweep import SidePoint, parse_sweep, run_sweep

    model = parse_hf_config(
        gemma(24, num_kv_shared_layers=12, max_position_embeddings=8192),
        default_name="g",
        where="config.json",
    )
    options = PlanOptions(memory_bytes=2**30, max_model_len=4096)
    spec = parse_sweep(text)
    calls = _counted(monkeypatch, plan_module, _LAYER_WORK)
    sweep = run_sweep(model, options, spec)
    assert len(sweep.points) == 4
    assert calls == {"rank_layers": 1, "validate_sharing_map": 1, "group_layers": 2}
    field = "max_model_len" if spec.parameter == "max-model-len" else "memory_bytes"
    for point in sweep.points:
        alone = plan_kv_cache(model, replace(options, **{field: point.value}))
        assert point.with_sharing == SidePoint.of(alone.with_sharing)
        assert point.without_sharing == SidePoint.of(alone.without_sharing)


def test_plans_outside_a_sweep_keep_nothing(monkeypatch: Any) -> None:
    from mmcli.kv import plan as plan_module

    model = parse_hf_config(gemma(12), default_name="g", where="config.json")
    calls = _counted(monkeypatch, plan_module, _LAYER_WORK)
    for _ in range(2):
        plan_kv_cache(model, PlanOptions(memory_bytes=2**30))
    assert calls == {"rank_layers": 2, "validate_sharing_map": 2, "group_layers": 2}


class _CountingSizes(tuple[int, ...]):
    """A tuple that counts the elements its indexing and slicing hand out."""

    touched = 0

    def __getitem__(self, key: Any) -> Any:
        got = tuple.__getitem__(self, key)
        _CountingSizes.touched += len(got) if isinstance(key, slice) else 1
        return got


def test_the_stage_ranges_of_p_stages_take_order_p_work() -> None:
    """-pp N: every stage's layer range (the plan reads each) in O(stages), not O(stages²)
    (a million stages were a half-trillion additions)."""
    from mmcli.kv.engine.pipeline import Stages, stage_sizes

    p = 2_000
    sizes = _CountingSizes(stage_sizes(3 * p + 7, p, None))
    stages = Stages(sizes, {})
    _CountingSizes.touched = 0
    ranges = [stages.layer_range(s) for s in range(p)]
    assert _CountingSizes.touched <= 3 * p
    assert ranges[0][0] == 0 and ranges[-1][1] == 3 * p + 6
    assert all(ranges[i][1] + 1 == ranges[i + 1][0] for i in range(p - 1))
    assert [last - first + 1 for first, last in ranges] == list(sizes)
