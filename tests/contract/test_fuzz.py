"""Fuzzing the readers: random bytes and mutated valid files give a result or an MmcliError.

Nothing else may escape (no IndexError, OverflowError, torch RuntimeError, …) and nothing may
hang. Examples per test come from the hypothesis profile (tests/conftest.py), capped here so the
default run stays a few seconds; ``HYPOTHESIS_PROFILE=thorough`` searches deeper.
"""

from __future__ import annotations

import json
import random
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmcli import dump_encoder_outputs
from mmcli.check_embeddings import check_file
from mmcli.dump import load_dump
from mmcli.dump.safetensors import read_header
from mmcli.errors import MmcliError
from mmcli.kv.aliasing import check_aliasing
from mmcli.kv.inputs.layer_config import load_config
from mmcli.kv.inputs.map_file import apply_map, load_map
from mmcli.kv.plan import PlanOptions, plan_kv_cache

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "kv"
#: A hang guard per call, not a benchmark.
CALL_LIMIT_S = 5.0


def _examples(n: int) -> Any:
    """At most ``n`` examples by default; the thorough profile's count when it is larger."""
    current = settings().max_examples
    return settings(
        max_examples=max(n, current) if current > 100 else min(n, current),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


def clean(call: Callable[[], object]) -> None:
    """Run ``call``: success and MmcliError are fine; any other exception fails the test."""
    start = time.monotonic()
    try:
        call()
    except MmcliError as exc:
        assert exc.message.strip(), "an mmcli error without a message"
    assert time.monotonic() - start < CALL_LIMIT_S


# -- mutations ---------------------------------------------------------------------------


@st.composite
def mutated(draw: st.DrawFn, original: bytes) -> bytes:
    """``original`` after 1-4 random edits: bit flips, truncation, insertions, deletions,
    a tampered header-length field, or a swapped JSON value in the header."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "length", "swap"]))
        n = len(data)
        if kind == "flip" and n:
            i = draw(st.integers(0, n - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[draw(st.integers(0, n)) :]
        elif kind == "insert":
            i = draw(st.integers(0, n))
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete" and n:
            i = draw(st.integers(0, n - 1))
            del data[i : i + draw(st.integers(1, 16))]
        elif kind == "length" and n >= 8:
            value = draw(
                st.one_of(
                    st.integers(0, 2**64 - 1),
                    st.integers(-64, 64).map(lambda d, n=n: max(0, n - 8 + d)),
                    st.sampled_from([0, 1, 2**40, 2**63, 2**64 - 1]),
                )
            )
            data[:8] = struct.pack("<Q", value)
        elif kind == "swap":
            data = bytearray(swap_header_value(bytes(data), draw))
    return bytes(data)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(["F32", "BOOL", "F99", "mm_dump", "1", "-1", "bf16", "full", "sliding"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _leaves(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``doc`` (containers included), for picking a value to replace."""
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _leaves(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _leaves(v, (*path, i))
    return out


def swap_value(doc: Any, draw: st.DrawFn) -> Any:
    """``doc`` with one value (anywhere, the root excepted) replaced by a random JSON value."""
    paths = [p for p in _leaves(doc) if p]
    if not paths:
        return doc
    path = draw(st.sampled_from(paths))
    value = draw(JSON_VALUES)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


def swap_header_value(data: bytes, draw: st.DrawFn) -> bytes:
    """A safetensors file with one header value swapped (the length field kept consistent)."""
    if len(data) < 8:
        return data
    n = int.from_bytes(data[:8], "little")
    if n > len(data) - 8:
        return data
    try:
        header = json.loads(data[8 : 8 + n])
    except ValueError:
        return data
    body = json.dumps(swap_value(header, draw)).encode()
    return struct.pack("<Q", len(body)) + body + data[8 + n :]


# -- valid originals ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Valid dumps (per-item with masks and stored placeholders; stacked) as bytes."""
    root = tmp_path_factory.mktemp("originals")
    g = torch.Generator().manual_seed(0)
    items = [torch.randn(3, 4, generator=g), torch.randn(2, 4, generator=g)]
    masks = [torch.tensor([True, False, True, True]), torch.tensor([True, True])]
    per_item = dump_encoder_outputs(
        root / "items.safetensors",
        items,
        is_embed=masks,
        expected_num_items=2,
        hidden_size=4,
        dtype="float32",
        model="toy",
    )
    stacked = dump_encoder_outputs(
        root / "stacked.safetensors", torch.randn(2, 3, 4, generator=g).to(torch.bfloat16)
    )
    return {"items": per_item.read_bytes(), "stacked": stacked.read_bytes()}


def _read_and_check(path: Path) -> None:
    clean(lambda: read_header(path))

    def load_all() -> None:
        dump = load_dump(path)
        for i in range(dump.num_items):
            dump.embedding(i)
            dump.is_embed(i)
            dump.placeholders(i)

    clean(load_all)
    # check_file turns InputError into a status-"error" report; anything else escapes.
    clean(lambda: check_file(path, device=torch.device("cpu")))


@_examples(60)
@given(data=st.binary(max_size=256))
def test_random_bytes_as_safetensors(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "random.safetensors"
    path.write_bytes(data)
    _read_and_check(path)


@_examples(40)
@given(length=st.integers(0, 2**64 - 1), body=st.binary(max_size=64))
def test_random_header_length_field(tmp_path: Path, length: int, body: bytes) -> None:
    path = tmp_path / "length.safetensors"
    path.write_bytes(struct.pack("<Q", length) + body)
    clean(lambda: read_header(path))


@_examples(120)
@given(data=st.data(), which=st.sampled_from(["items", "stacked"]))
def test_mutated_dumps(
    tmp_path: Path, originals: dict[str, bytes], data: st.DataObject, which: str
) -> None:
    path = tmp_path / "mutated.safetensors"
    path.write_bytes(data.draw(mutated(originals[which])))
    _read_and_check(path)


@_examples(100)
@given(data=st.data(), which=st.sampled_from(["items", "stacked"]))
def test_dumps_with_a_swapped_header_value(
    tmp_path: Path, originals: dict[str, bytes], data: st.DataObject, which: str
) -> None:
    path = tmp_path / "swapped.safetensors"
    path.write_bytes(swap_header_value(originals[which], data.draw))
    _read_and_check(path)


# -- configs -------------------------------------------------------------------------------

TOY = {
    "name": "toy",
    "max_model_len": 1024,
    "defaults": {"num_kv_heads": 2, "head_size": 8, "dtype": "float16", "block_size": 16},
    "layers": [
        {"name": "a"},
        {"name": "b", "attention": "sliding", "sliding_window": 64},
        {"name": "c", "kv_sharing_target": "a"},
        {"name": "d", "attention": "sliding", "sliding_window": 64, "kv_sharing_target": "b"},
    ],
}
CONFIGS: dict[str, tuple[str, bytes]] = {
    "toy-json": ("config.json", json.dumps(TOY).encode()),
    "toy-toml": ("config.toml", (SAMPLES / "toy.toml").read_bytes()),
    "gemma3n-hf": ("config.json", (SAMPLES / "gemma3n-e2b-like.json").read_bytes()),
    "cla-hf": ("config.json", (SAMPLES / "hunyuan-cla2-like.json").read_bytes()),
    "broken-map": ("config.json", (SAMPLES / "broken-map.json").read_bytes()),
}


def _plan(path: Path, map_path: Path | None = None, **options: Any) -> None:
    def run() -> None:
        model = load_config(path)
        findings = apply_map(model, load_map(map_path)) if map_path is not None else []
        plan = plan_kv_cache(model, PlanOptions(**options), extra_findings=findings)
        if not plan.has_errors:
            check_aliasing(plan, "meta")

    clean(run)


@_examples(60)
@given(data=st.binary(max_size=256), suffix=st.sampled_from([".json", ".toml"]))
def test_random_bytes_as_config(tmp_path: Path, data: bytes, suffix: str) -> None:
    path = tmp_path / f"config{suffix}"
    path.write_bytes(data)
    _plan(path)
    clean(lambda: load_map(path))


@_examples(120)
@given(data=st.data(), which=st.sampled_from(sorted(CONFIGS)))
def test_mutated_config_bytes(tmp_path: Path, data: st.DataObject, which: str) -> None:
    name, original = CONFIGS[which]
    path = tmp_path / name
    path.write_bytes(data.draw(mutated(original)))
    _plan(path)


@_examples(150)
@given(
    data=st.data(),
    which=st.sampled_from([k for k in sorted(CONFIGS) if CONFIGS[k][0].endswith(".json")]),
    memory=st.none() | st.integers(1, 2**50),
    tp=st.integers(1, 8),
    block=st.none() | st.integers(1, 64),
    max_len=st.none() | st.integers(1, 2**40),
)
def test_configs_with_a_swapped_value(
    tmp_path: Path,
    data: st.DataObject,
    which: str,
    memory: int | None,
    tp: int,
    block: int | None,
    max_len: int | None,
) -> None:
    name, original = CONFIGS[which]
    doc = swap_value(json.loads(original), data.draw)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    _plan(
        path,
        memory_bytes=memory,
        tensor_parallel_size=tp,
        block_size=block,
        max_model_len=max_len,
    )


@_examples(80)
@given(mapping=JSON_VALUES, targets=st.lists(st.sampled_from(["a", "b", "c", "d", "0", "9"])))
def test_random_maps(tmp_path: Path, mapping: Any, targets: list[str]) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TOY))
    map_path = tmp_path / "map.json"
    if isinstance(mapping, dict) and targets:
        rng = random.Random(len(targets))
        mapping = {**mapping, **{t: rng.choice(targets + [None]) for t in targets}}
    map_path.write_text(json.dumps(mapping))
    _plan(config, map_path)
