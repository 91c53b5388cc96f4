"""`benchmarks/compare.py`: how two devices' compare documents are held equal."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_compare", REPO / "benchmarks" / "compare.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DOC = {
    "device": "cpu",
    "ref": "a/ref.safetensors",
    "exit_code": 0,
    "pairs": [{"status": "passed", "findings": [], "metrics": {"rmse": 0.25, "cosine": 1.0}}],
}


def test_the_run_fields_are_not_compared_and_float64_order_noise_is_equal() -> None:
    bench = load()
    other = {
        **DOC,
        "device": "cuda:0",
        "ref": "b/ref.safetensors",
        "pairs": [
            {
                "status": "passed",
                "findings": [],
                "metrics": {"rmse": 0.25 * (1 + 4e-16), "cosine": 1.0},
            }
        ],
    }
    diffs, worst = bench.differences(DOC, other)
    assert diffs == []
    assert 0 < worst < 1e-15


def test_a_status_a_finding_or_a_metric_beyond_1e_9_is_a_difference() -> None:
    bench = load()
    status = {**DOC, "pairs": [{**DOC["pairs"][0], "status": "failed"}]}
    assert bench.differences(DOC, status)[0] == [".pairs[0].status: 'passed' vs 'failed'"]
    finding = {**DOC, "pairs": [{**DOC["pairs"][0], "findings": [{"code": "compare-scale"}]}]}
    assert bench.differences(DOC, finding)[0] == [".pairs[0].findings: 0 vs 1 entries"]
    metric = {**DOC, "pairs": [{**DOC["pairs"][0], "metrics": {"rmse": 0.2500001, "cosine": 1.0}}]}
    diffs, worst = bench.differences(DOC, metric)
    assert diffs == [".pairs[0].metrics.rmse: 0.25 vs 0.2500001"] and worst > 1e-9
    assert bench.differences(DOC, {**DOC, "exit_code": True})[0] == [".exit_code: 0 vs True"]
