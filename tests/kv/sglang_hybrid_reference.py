"""Recompute tests/kv/test_sglang_hybrid.py's figures with SGLang's own released functions.

Not a test (it needs the wheels; ``--configurator SRC_0.5.14 …`` runs 0.5.14 on, see
main_configurator): ``pip download sglang==0.5.3 sglang==0.5.4 --no-deps``,
unzip each, then ``python tests/kv/sglang_hybrid_reference.py SRC_0.5.3 SRC_0.5.4`` with torch
and numpy installed (add ``SRC_0.5.5 SRC_0.5.6 SRC_0.5.7``, sglang 0.5.5 – 0.5.7 unzipped, for
their figures, with and without speculative_num_draft_tokens; ``… newer 0.5.10=SRC …`` for
0.5.9 – 0.5.13 without it). It takes from each wheel's
source, unchanged, the config classes' state-shape properties (``configs/qwen3_next.py``,
``configs/nemotron_h.py``, ``configs/mamba_utils.py``) and ``handle_max_mamba_cache`` (0.5.4 –
0.5.6 ``ModelRunner``'s; 0.5.7 ``ModelRunnerKVCacheMixin``'s, model_runner_kv_cache_mixin.py
:145) / the 0.5.3 subtraction in ``profile_max_num_token``, runs them on the repo's config.json
files with tp stubbed, and prints the per-request state, the slots and the token pool for each
budget.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch

CONFIGS = Path(__file__).parent / "configs"
os.environ["SGLANG_MAMBA_SSM_DTYPE"] = "float32"


def _methods(path: Path, cls: str, names: set[str], env: dict[str, Any]) -> dict[str, Any]:
    tree = ast.parse(path.read_text())
    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in names:
                    item.decorator_list = []
                    code = compile(ast.Module([item], []), str(path), "exec")
                    exec(code, env)
                    out[item.name] = env[item.name]
    return out


def _config(src: Path, file: str, cls: str, doc: dict[str, Any], tp: int, extra: dict[str, Any]):
    divide = lambda a, b: (a // b) if a % b == 0 else (_ for _ in ()).throw(AssertionError)  # noqa: E731
    env: dict[str, Any] = {
        "np": np,
        "torch": torch,
        "os": os,
        "divide": divide,
        "get_attention_tp_size": lambda: tp,
        "get_tensor_model_parallel_world_size": lambda: tp,
        "MAMBA": "M",
        "ATTENTION": "*",
        "_is_cpu": False,  # 0.5.9 on: qwen3_next.py's CPU-only head adjustment
    }
    # 0.5.5 on import the attention tp size inside the config's properties.
    attention = types.ModuleType("sglang.srt.layers.dp_attention")
    attention.get_attention_tp_size = lambda: tp  # type: ignore[attr-defined]
    sys.modules["sglang.srt.layers.dp_attention"] = attention
    utils = src / "sglang/srt/configs/mamba_utils.py"
    if utils.exists():
        fake = types.ModuleType("sglang.srt.distributed.utils")
        fake.divide = divide  # type: ignore[attr-defined]
        sys.modules["sglang.srt.distributed.utils"] = fake
        # 0.5.9 on read SGLANG_MAMBA_CONV_DTYPE / SGLANG_MAMBA_SSM_DTYPE through environ.envs.
        environ = types.ModuleType("sglang.srt.environ")
        var = lambda name: types.SimpleNamespace(get=lambda: os.environ.get(name))  # noqa: E731
        environ.envs = types.SimpleNamespace(  # type: ignore[attr-defined]
            SGLANG_MAMBA_CONV_DTYPE=var("SGLANG_MAMBA_CONV_DTYPE"),
            SGLANG_MAMBA_SSM_DTYPE=var("SGLANG_MAMBA_SSM_DTYPE"),
        )
        sys.modules["sglang.srt.environ"] = environ
        module = types.ModuleType("mamba_utils")
        sys.modules["mamba_utils"] = module
        exec(compile(utils.read_text(), str(utils), "exec"), module.__dict__)
        env.update(module.__dict__)
    import enum

    class HybridLayerType(enum.Enum):
        full_attention = "attention"
        linear_attention = "linear_attention"

    env["HybridLayerType"] = HybridLayerType
    names = {
        "layers_block_type",
        "linear_layer_ids",
        "full_attention_layer_ids",
        "mamba_layer_ids",
        "mamba2_cache_params",
        "hybrid_gdn_params",
        "mamba_cache_per_req",
    }
    found = _methods(src / "sglang/srt/configs" / file, cls, names, env)
    klass = type(cls, (), {k: property(v) for k, v in found.items()})
    obj = klass()
    for key, value in {**extra, **doc}.items():
        object.__setattr__(obj, key, value) if not isinstance(
            getattr(klass, key, None), property
        ) else None
    return obj


def _per_req(cfg: Any) -> int:
    params = (
        getattr(cfg, "mamba2_cache_params", None)
        if hasattr(type(cfg), "mamba2_cache_params")
        else None
    )
    return int(params.mamba_cache_per_req if params is not None else cfg.mamba_cache_per_req)


def run(
    src: Path,
    release: str,
    file: str,
    cls: str,
    doc: dict[str, Any],
    extra: dict[str, Any],
    tp: int,
    cell: int,
    budgets: list[int],
    radix: bool,
    draft: int | None = None,
) -> None:
    cfg = _config(src, file, cls, doc, tp, extra)
    per = _per_req(cfg)
    spec = "" if draft is None else f", speculative_num_draft_tokens {draft}"
    print(f"{release} {doc['architectures'][0]} tp {tp}{spec}: mamba_cache_per_req {per}")
    for rest_bytes in budgets:
        rest = rest_bytes / (1 << 30)
        if release != "0.5.3":
            env: dict[str, Any] = {}
            mixin = src / "sglang/srt/model_executor/model_runner_kv_cache_mixin.py"
            handle = _methods(
                mixin if mixin.exists() else src / "sglang/srt/model_executor/model_runner.py",
                "ModelRunnerKVCacheMixin" if mixin.exists() else "ModelRunner",
                {"handle_max_mamba_cache"},
                env,
            )["handle_max_mamba_cache"]
            args = types.SimpleNamespace(
                speculative_num_draft_tokens=draft,
                disable_radix_cache=not radix,
                max_mamba_cache_size=None,
                # 0.5.7 reserves the draft states by max_running_requests (48 with speculative
                # decoding, server_args.py:1994).
                max_running_requests=None if draft is None or not mixin.exists() else 48,
                mamba_full_memory_ratio=0.9,
                dp_size=1,
                enable_dp_attention=False,
            )
            runner = types.SimpleNamespace(
                mambaish_config=cfg,
                server_args=args,
                hybrid_gdn_config=cfg if radix else None,
                spec_algorithm=types.SimpleNamespace(is_none=lambda: draft is None),
            )
            left = handle(runner, rest)
            slots = args.max_mamba_cache_size
        else:
            slots = 512
            left = rest - slots * cfg.mamba_cache_per_req / (1 << 30)
        tokens = int(left * (1 << 30) // cell)
        print(f"  rest {rest_bytes} B: max_mamba_cache_size {slots}, max_total_num_tokens {tokens}")


def main_newer(pairs: list[str]) -> None:
    """``newer RELEASE=SRC …`` (0.5.9 – 0.5.13): the figures without speculative decoding,
    radix cache on (Qwen3-Next at 40 / 60 GiB, Nemotron-H at 60 / 70 GiB, tp 1)."""
    qwen = json.loads((CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Thinking.json").read_text())
    nemo = json.loads((CONFIGS / "nvidia--Nemotron-H-8B-Base-8K.json").read_text())
    gib = 1 << 30
    for pair in pairs:
        rel, src = pair.split("=", 1)
        budgets = [40 * gib, 60 * gib]
        run(Path(src), rel, "qwen3_next.py", "Qwen3NextConfig", qwen, {}, 1, 24_576, budgets, True)
        budgets = [60 * gib, 70 * gib]
        cell = 8 * 128 * 4 * 2 * 2
        extra = {"conv_kernel": 4}
        run(Path(src), rel, "nemotron_h.py", "NemotronHConfig", nemo, extra, 1, cell, budgets, True)


class _Args(types.SimpleNamespace):
    """server_args and the 0.5.17-on settings bags (get_schedule(), get_spec(), …) in one: a
    launch at tp 1 with the radix cache on, extra_buffer (overlap on), no ReplaySSM."""

    def override(self, _why: str, **values: Any) -> None:
        self.__dict__.update(values)

    def enable_mamba_extra_buffer(self) -> bool:  # 0.5.16
        return True

    def enable_mamba_extra_buffer_lazy(self) -> bool:  # 0.5.16
        return False


def configurator(src: Path, per_req: int, rest_bytes: int, draft: int | None, reqs: int | None):
    """0.5.16 on: KVCacheConfigurator._handle_max_mamba_cache and _calculate_mamba_ratio
    (mem_cache/kv_cache_configurator.py), unchanged from the wheel, on a stubbed self; 0.5.14 /
    0.5.15 (no configurator): ModelRunnerKVCacheMixin's handle_max_mamba_cache and
    _calculate_mamba_ratio (model_executor/model_runner_kv_cache_mixin.py)."""
    path = src / "sglang/srt/mem_cache/kv_cache_configurator.py"
    mixin = not path.exists()
    if mixin:
        path = src / "sglang/srt/model_executor/model_runner_kv_cache_mixin.py"
    tree = ast.parse(path.read_text())
    consts = [
        n
        for n in tree.body
        if isinstance(n, ast.Assign)
        and isinstance(n.targets[0], ast.Name)
        and n.targets[0].id.startswith("MAMBA_CACHE")
    ]
    fields = {
        "max_mamba_cache_size": None,
        "disable_radix_cache": False,
        "disable_overlap_schedule": False,
        "max_running_requests": reqs,
        "mamba_full_memory_ratio": 0.9,
        "speculative_num_draft_tokens": draft,
        "enable_dp_attention": False,  # 0.5.14 / 0.5.15
    }
    args, bags = _Args(**fields), _Args(**fields)  # 0.5.16's server_args; the later bags
    bags.mamba = types.SimpleNamespace(
        enable_mamba_extra_buffer=True,
        enable_mamba_extra_buffer_lazy=False,
        enable_linear_replayssm_spec=False,
    )
    env: dict[str, Any] = {
        "get_schedule": lambda: bags,
        "get_spec": lambda: bags,
        "get_context": lambda: bags,
        "get_memory": lambda: bags,
        "get_exec": lambda: bags,
        "get_pp_indices": None,
        "get_mamba_tracking_slots": lambda *, extra_buffer, overlap, lazy=False: (
            0 if not extra_buffer else 1 if lazy or not overlap else 2
        ),
        "envs": types.SimpleNamespace(
            SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=types.SimpleNamespace(get=lambda: False)
        ),
        "_pd_prefill_skips_mamba_spec_state": lambda: False,
        "mamba_extra_buffer_enabled": lambda: True,  # 0.5.18 – 0.5.21
        "mamba_extra_buffer_lazy_enabled": lambda: False,
    }
    exec(compile(ast.Module(consts, []), str(path), "exec"), env)
    handle = "handle_max_mamba_cache" if mixin else "_handle_max_mamba_cache"
    found = _methods(
        path,
        "ModelRunnerKVCacheMixin" if mixin else "KVCacheConfigurator",
        {handle, "_calculate_mamba_ratio"},
        env,
    )
    # 0.5.16 reads self.server_args / self.ps; later releases the bags above and self.pp_size.
    params = types.SimpleNamespace(mamba_cache_per_req=per_req, layers=list(range(36)))
    runner = types.SimpleNamespace(
        mambaish_config=types.SimpleNamespace(mamba2_cache_params=params),
        server_args=args,
        ps=types.SimpleNamespace(attn_dp_size=1, pp_size=1),
        pp_size=1,
        attn_dp_size=1,
        dp_size=1,  # 0.5.14 / 0.5.15
        extra_mamba_cache_bytes_per_req=0,
        fused_entry_bytes=lambda _name: None,
        hybrid_gdn_config=object(),
        hybrid_kda_config=None,
        spec_algorithm=types.SimpleNamespace(is_none=lambda: draft is None),
    )
    runner._calculate_mamba_ratio = lambda: found["_calculate_mamba_ratio"](runner)
    left = found[handle](runner, rest_bytes / (1 << 30))
    return args.max_mamba_cache_size or bags.max_mamba_cache_size, left


def main_configurator(sources: list[str]) -> None:
    """``python tests/kv/sglang_hybrid_reference.py --configurator SRC_0.5.14 …``: Qwen3-Next
    at tp 1 (mamba_cache_per_req 77,266,944 B, 24,576 B per token), 40 GiB, without and with
    four draft tokens (48 requests)."""
    per, cell, rest = 36 * 8192 * 3 * 2 + 36 * 32 * 128 * 128 * 4, 24576, 40 << 30
    for src in map(Path, sources):
        for draft, reqs in ((None, None), (4, 48), (4, 8)):
            slots, left = configurator(src, per, rest, draft, reqs)
            tokens = int(left * (1 << 30)) // cell
            print(f"{src}: D {draft} requests {reqs}: slots {slots}, tokens {tokens}")


def main() -> None:
    if sys.argv[1] == "newer":
        main_newer(sys.argv[2:])
        return
    if sys.argv[1] == "--configurator":
        return main_configurator(sys.argv[2:])
    src053, src054 = Path(sys.argv[1]), Path(sys.argv[2])
    names = ("0.5.5", "0.5.6", "0.5.7")
    later = [(Path(a), r) for a, r in zip(sys.argv[3:], names, strict=False)]
    qwen = json.loads((CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Thinking.json").read_text())
    nemo = json.loads((CONFIGS / "nvidia--Nemotron-H-8B-Base-8K.json").read_text())
    gib = 1 << 30
    for tp in (1, 4):
        cell = 2 // min(tp, 2) * 256 * 12 * 2 * 2
        for src, rel in ((src053, "0.5.3"), (src054, "0.5.4")):
            run(
                src,
                rel,
                "qwen3_next.py",
                "Qwen3NextConfig",
                qwen,
                {},
                tp,
                cell,
                [40 * gib, 60 * gib, 17_682_419_712],
                radix=rel == "0.5.4",
            )
    # 0.5.5, 0.5.6 (sources given as the third and fourth arguments): without and with
    # speculative_num_draft_tokens 4 (EAGLE / NEXTN, 3 steps, top-k 1: steps + 1).
    for src, rel in later:
        for tp in (1, 4):
            cell = 2 // min(tp, 2) * 256 * 12 * 2 * 2
            for draft in (None, 4):
                run(
                    src,
                    rel,
                    "qwen3_next.py",
                    "Qwen3NextConfig",
                    qwen,
                    {},
                    tp,
                    cell,
                    [40 * gib, 60 * gib],
                    radix=True,
                    draft=draft,
                )
    nemo_extra = {"conv_kernel": 4}
    for (src, rel), tp in [(pair, tp) for pair in [(src054, "0.5.4"), *later] for tp in (1, 2)]:
        cell = 8 // tp * 128 * 4 * 2 * 2
        # 0.5.7 keeps the radix cache on for Nemotron-H: its slots take the ratio, with and
        # without speculative_num_draft_tokens 4.
        for draft in (None, 4) if rel == "0.5.7" else (None,):
            run(
                src,
                rel,
                "nemotron_h.py",
                "NemotronHConfig",
                nemo,
                nemo_extra,
                tp,
                cell,
                [60 * gib, 70 * gib],
                radix=rel == "0.5.7",
                draft=draft,
            )


if __name__ == "__main__":
    main()
