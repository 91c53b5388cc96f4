"""Chunked local attention (Llama 4) and the hybrid KV cache manager, release by release.

``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` (``vllm/envs.py``): absent in 0.10.0,
where chunked local layers always keep their own ``ChunkedLocalAttentionSpec`` groups; default
"0" in 0.10.1–0.13, default "1" from 0.14.0. With it off, ``VllmConfig.__post_init__``
(``vllm/config/__init__.py`` in 0.10.1, ``vllm/config/vllm.py`` later) disables the hybrid KV
cache manager, and ``unify_hybrid_kv_cache_specs`` turns the chunked layers into full
attention. An EAGLE / MTP drafter disables it in every release.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv.options import PlanOptions

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "samples" / "kv" / "chunked-local.toml")  # 3 chunked (8192) + 1 full
PAGE = 16 * 2 * 8 * 128 * 2  # one 16-token block of one layer: 65,536 B


def run(*args: str, code: int = 0) -> dict[str, Any]:
    result = CliRunner().invoke(
        app,
        ["kv-share", "plan", SAMPLE, "--memory", "1GiB", *args, "--format", "json"],
        catch_exceptions=False,
    )
    assert result.exit_code == code, result.stdout + result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def shape(doc: dict[str, Any]) -> tuple[list[str], int, int]:
    side = doc["engine_side"]
    groups = [g["attention"] for g in doc["groups"]]
    return groups, doc["memory"]["num_blocks"][side], doc["memory"]["blocks_per_request"][side]


#: Own groups: 4 groups of 1 layer; chunked cdiv(min(8192 + in flight, 32768), block) each
#: (the block: 16, 64 from 0.34, vLLM's CacheConfig.DEFAULT_BLOCK_SIZE).
def own_groups(in_flight: int, block: int = 16) -> tuple[list[str], int, int]:
    blocks = 2**30 // (PAGE * block // 16)
    return ["chunked"] * 3 + ["full"], blocks, 3 * (8192 + in_flight) // block + 32768 // block


#: As full attention: one group of 4 layers, 32768 / block blocks per request.
def as_full(block: int = 16) -> tuple[list[str], int, int]:
    return ["full"], 2**30 // (4 * PAGE * block // 16), 32768 // block


AS_FULL = as_full()


@pytest.mark.parametrize(
    ("release", "want"),
    [
        ("0.10.0", own_groups(8192)),  # one batch of 8192 in flight before 0.26
        ("0.10", AS_FULL),  # 0.10.2: the variable, default 0
        ("0.10.1", AS_FULL),
        ("0.13", AS_FULL),
        ("0.14", own_groups(8192)),
        ("0.26", own_groups(2 * 8192)),  # from 0.26: 2 batches in flight (async scheduling)
        ("0.33", own_groups(2 * 8192)),
        ("0.34", own_groups(2 * 8192, block=64)),
    ],
)
def test_the_release_default(release: str, want: tuple[list[str], int, int]) -> None:
    doc = run("--vllm-version", release)
    assert shape(doc) == want
    notes = [f for f in doc["findings"] if f["code"] == "chunked-as-full"]
    assert bool(notes) == (want[0] == ["full"])
    if notes:
        assert f"=0, the default of vLLM {release}" in notes[0]["message"]


def test_the_option_overrides_the_default() -> None:
    assert shape(run("--vllm-version", "0.12", "--chunked-local-attn-hybrid")) == own_groups(8192)
    off = run("--no-chunked-local-attn-hybrid")
    assert shape(off) == as_full(64)  # the newest rules: 0.34's block of 64
    notes = [f for f in off["findings"] if f["code"] == "chunked-as-full"]
    assert "HYBRID_KV_CACHE=0, vLLM turns its hybrid" in notes[0]["message"]
    assert notes[0]["hint"] == (
        "pass --chunked-local-attn-hybrid to plan them in their own KV-cache groups"
    )
    # --disable-hybrid-kv-cache-manager wins, without the note (it was asked for).
    both = run("--chunked-local-attn-hybrid", "--disable-hybrid-kv-cache-manager")
    assert shape(both) == as_full(64) and not both["findings"]


def test_a_drafter_turns_the_manager_off() -> None:
    doc = run("--chunked-local-attn-hybrid", "--num-draft-layers", "1")
    assert [g["attention"] for g in doc["groups"]] == ["full"]
    notes = [f for f in doc["findings"] if f["code"] == "chunked-as-full"]
    assert notes and "EAGLE or MTP drafter" in notes[0]["message"]


def test_the_variable_off_before_it_existed_is_refused() -> None:
    with pytest.raises(InputError) as info:
        PlanOptions(vllm_version="0.10.0", chunked_local_attn_hybrid=False)
    assert "vLLM 0.10.0 has no VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE" in str(
        info.value
    )
    assert PlanOptions(vllm_version="0.10.0", chunked_local_attn_hybrid=True).chunked_local_hybrid
    result = CliRunner().invoke(
        app,
        ["kv-share", "plan", SAMPLE, "--vllm-version", "0.10.0", "--no-chunked-local-attn-hybrid"],
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --no-chunked-local-attn-hybrid: vLLM 0.10.0 has no")
