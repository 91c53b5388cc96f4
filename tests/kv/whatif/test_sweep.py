"""``--sweep``: parsing the range, and the series a swept plan gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import plan_kv_cache
from mmcli.kv.whatif.sweep import parse_length, parse_sweep, run_sweep

ROOT = Path(__file__).resolve().parents[3]
GEMMA3N = ROOT / "samples" / "kv" / "gemma3n-e2b-like.json"
GIB = 2**30


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("max-model-len=4K..128K", (4096, 8192, 16384, 32768, 65536, 131072)),
        ("max-model-len=4k..16k", (4000, 8000, 16000)),
        ("max_model_len=1024..4096:4", (1024, 2048, 3072, 4096)),
        ("max-model-len=1K..100K:x4", (1024, 4096, 16384, 65536, 102400)),
        ("max-model-len=2048..2048", (2048,)),
        ("memory=8GiB..80GiB:x2", (8 * GIB, 16 * GIB, 32 * GIB, 64 * GIB, 80 * GIB)),
        ("memory=1GiB..8GiB:8", tuple(i * GIB for i in range(1, 9))),
    ],
)
def test_parse_sweep(text: str, values: tuple[int, ...]) -> None:
    spec = parse_sweep(text)
    assert spec.values == values
    assert spec.parameter == text.split("=")[0].replace("_", "-")


def test_default_memory_steps_are_eight() -> None:
    assert len(parse_sweep("memory=8GiB..80GiB").values) == 8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("block-size=1..2", "cannot read"),
        ("max-model-len=4K", "no START..STOP"),
        ("max-model-len=8K..4K", "ends below its start"),
        ("max-model-len=1..2:x1", "must be above 1"),
        ("max-model-len=1..2:xq", "cannot read the factor"),
        ("max-model-len=1..2:0", "cannot read the step count"),
        ("max-model-len=1..1000000:500", "more than 64"),
        ("max-model-len=abc..4K", "cannot read 'abc' as a length"),
        ("memory=8..80Qb", "cannot read"),
    ],
)
def test_bad_sweeps(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_sweep(text)


def test_parse_length_follows_vllm() -> None:
    assert (parse_length("128K"), parse_length("128k"), parse_length("1M")) == (
        131072,
        128000,
        2**20,
    )


def test_sweep_max_model_len_equals_single_plans() -> None:
    config = load_config(GEMMA3N)
    options = PlanOptions(memory_bytes=2 * GIB)
    sweep = run_sweep(config, options, parse_sweep("max-model-len=4K..32K"))
    assert [p.value for p in sweep.points] == [4096, 8192, 16384, 32768]
    assert sweep.shares and sweep.fixed == 2 * GIB
    for point in sweep.points:
        plan = plan_kv_cache(config, PlanOptions(memory_bytes=2 * GIB, max_model_len=point.value))
        for side in ("with_sharing", "without_sharing"):
            got, want = getattr(point, side), getattr(plan, side)
            assert got.max_concurrency == want.max_concurrency
            assert got.kv_tokens == want.max_tokens
            assert got.fits == (want.largest_fitting_max_model_len is None)
    doc = json.loads(json.dumps(sweep.to_json()))
    assert doc["values"] == [4096, 8192, 16384, 32768]
    assert doc["memory_bytes"] == 2 * GIB
    with_conc = doc["series"]["with_sharing"]["max_concurrency"]
    without_conc = doc["series"]["without_sharing"]["max_concurrency"]
    assert all(w > wo for w, wo in zip(with_conc, without_conc, strict=True))


def test_sweep_memory_is_linear_in_blocks() -> None:
    config = load_config(GEMMA3N)
    sweep = run_sweep(config, PlanOptions(max_model_len=8192), parse_sweep("memory=1GiB..4GiB:4"))
    blocks = sweep.series("with_sharing", "num_blocks")
    assert sweep.fixed == 8192 and sweep.unit == "bytes"
    assert blocks == sorted(blocks) and blocks[3] is not None and blocks[0] is not None
    assert abs(blocks[3] - 4 * blocks[0]) <= 4  # 4× the memory, 4× the blocks (floors aside)


def test_sweep_needs_the_other_figure() -> None:
    config = load_config(GEMMA3N)
    with pytest.raises(InputError, match="needs the KV memory"):
        run_sweep(config, PlanOptions(), parse_sweep("max-model-len=4K..8K"))
    config.max_model_len, config.context = None, None  # an mmcli layer config without one
    with pytest.raises(InputError, match="needs a max_model_len"):
        run_sweep(config, PlanOptions(), parse_sweep("memory=1GiB..2GiB"))
