"""End-to-end check of mmcli's vLLM plugin on a real (CPU) vLLM and a tiny random LLaVA.

``python e2e/run_vllm.py --model DIR --out DIR`` runs each scenario in its own process (a
fresh engine, its own environment), then checks the dumps with ``mmcli check-embeddings``:

* ``healthy`` — ``MMCLI_DUMP_MODE=always``: generation succeeds; every dump checks clean and
  the execute-phase dumps carry one ``is_embed`` mask per image.
* ``batch-dim`` / ``one-short`` — a registered LLaVA subclass whose encoder keeps the batch
  dim or returns one item too few, default mode (``failure``): ``llm.generate`` raises the
  engine's own ``AssertionError`` (same type, same message as without the plugin: the dump
  records it as ``engine_error``), and the dump gets the finding ``item-ndim`` /
  ``item-count``.

Exit 0 when every scenario passes. The engine runs in one process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``), where its exception reaches ``generate`` unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCENARIOS = {
    # name: (mode, fault, expected finding code or None)
    "healthy": ("always", None, None),
    "batch-dim": (None, "batch-dim", "item-ndim"),
    "one-short": (None, "one-short", "item-count"),
}


def engine_env(out: Path, mode: str | None, fault: str | None) -> dict[str, str]:
    env = dict(os.environ)
    cache = Path(tempfile.mkdtemp(prefix="vllm-cache-"))
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_NO_USAGE_STATS="1",
        VLLM_ENABLE_V1_MULTIPROCESSING="0",
        VLLM_CACHE_ROOT=str(cache),
        MMCLI_DUMP_DIR=str(out),
    )
    env.pop("MMCLI_DUMP_MODE", None)
    if mode:
        env["MMCLI_DUMP_MODE"] = mode
    if fault:
        env["MMCLI_E2E_FAULT"] = fault
    return env


# --------------------------------------------------------------------------- child: one engine


def child(model: str, result_file: Path, fault: str | None) -> None:
    import numpy as np
    from PIL import Image
    from vllm import LLM, SamplingParams

    if fault:
        sys.path.insert(0, str(HERE))
        import faulty_llava

        faulty_llava.register()
    result: dict[str, Any] = {}
    start = time.time()
    try:
        llm = LLM(
            model=model,
            max_model_len=256,
            enforce_eager=True,
            dtype="float32",
            max_num_seqs=2,
            max_num_batched_tokens=256,
            limit_mm_per_prompt={"image": 1},
        )
        result["startup_s"] = round(time.time() - start, 1)
        rng = np.random.default_rng(0)
        prompts = [
            {
                "prompt": f"user <image> describe the image {word} assistant",
                "multi_modal_data": {
                    "image": Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8))
                },
            }
            for word in ("cat", "dog")  # distinct images: identical ones hit the encoder cache
        ]
        outputs = llm.generate(prompts, SamplingParams(max_tokens=4, temperature=0.0))
        result["generated"] = [list(o.outputs[0].token_ids) for o in outputs]
    except Exception as exc:  # the engine's own error, as generate raised it
        result["error_type"] = type(exc).__name__
        result["error_message"] = str(exc)
    result_file.write_text(json.dumps(result))


# --------------------------------------------------------------------------- parent: checks


def codes_of(document: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(document, dict):
        if isinstance(document.get("code"), str) and document.get("severity") == "error":
            found.add(document["code"])
        for value in document.values():
            found |= codes_of(value)
    elif isinstance(document, list):
        for value in document:
            found |= codes_of(value)
    return found


def run_scenario(name: str, model: Path, out: Path, mmcli: str) -> list[str]:
    mode, fault, code = SCENARIOS[name]
    problems: list[str] = []
    dumps = out / name
    shutil.rmtree(dumps, ignore_errors=True)
    result_file = out / f"{name}.json"
    model_dir = model
    if fault:
        model_dir = out / "tiny-llava-faulty"
        if not model_dir.exists():
            shutil.copytree(model, model_dir)
            config = json.loads((model_dir / "config.json").read_text())
            config["architectures"] = ["MmcliFaultyLlavaForConditionalGeneration"]
            (model_dir / "config.json").write_text(json.dumps(config, indent=2))
    print(f"\n=== {name}: MMCLI_DUMP_MODE={mode or '(default: failure)'} fault={fault}", flush=True)
    start = time.time()
    log = out / f"{name}.log"
    with log.open("w") as f:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(model_dir), str(result_file), fault or ""],
            env=engine_env(dumps, mode, fault),
            stdout=f,
            stderr=subprocess.STDOUT,
            timeout=900,
        )
    print(f"engine process exit {proc.returncode} after {time.time() - start:.0f} s (log {log})")
    if not result_file.exists():
        tail = log.read_text().splitlines()[-30:]
        return [f"{name}: the engine process wrote no result:\n" + "\n".join(tail)]
    result = json.loads(result_file.read_text())
    print("engine result:", json.dumps(result)[:600])
    files = sorted(dumps.glob("*.safetensors")) if dumps.is_dir() else []
    print(f"dumps: {[f.name for f in files]}")
    if dumps.is_dir():
        print(f"dump dir mode: {oct(dumps.stat().st_mode & 0o777)}")
        if dumps.stat().st_mode & 0o077:
            problems.append(f"{name}: dump dir {dumps} is not 0700")
    if not files:
        return problems + [f"{name}: no dump written"]
    table = subprocess.run(
        [mmcli, "check-embeddings", str(dumps), "--device", "cpu"], capture_output=True, text=True
    )
    print(f"$ mmcli check-embeddings {dumps} --device cpu   (exit {table.returncode})")
    print(table.stdout.rstrip())
    doc = subprocess.run(
        [mmcli, "check-embeddings", str(dumps), "--device", "cpu", "--format", "json"],
        capture_output=True,
        text=True,
    )
    codes = codes_of(json.loads(doc.stdout)) if doc.stdout.strip() else set()
    from safetensors import safe_open

    metas = []
    for path in files:
        with safe_open(str(path), "pt") as f:
            metas.append((path, f.metadata() or {}, set(f.keys())))
    if code is None:
        if "error_type" in result:
            problems.append(
                f"{name}: generation failed: {result['error_type']}: "
                f"{result['error_message'][:300]}"
            )
        if table.returncode != 0 or codes:
            problems.append(f"{name}: check-embeddings exit {table.returncode}, codes {codes}")
        execute = [m for m in metas if m[1].get("phase") == "execute"]
        if not execute:
            problems.append(f"{name}: no execute-phase dump")
        for path, _meta, keys in execute:
            if "is_embed.0" not in keys:
                problems.append(f"{name}: {path.name} has no is_embed masks")
    else:
        if result.get("error_type") != "AssertionError":
            problems.append(f"{name}: expected the engine's AssertionError, got {result}")
        text = f"{result.get('error_type')}: {result.get('error_message')}"
        failures = [m for m in metas if m[0].name.endswith("-failure.safetensors")]
        if not failures:
            problems.append(f"{name}: no failure dump")
        for path, meta, _keys in failures:
            if meta.get("engine_error") != text[: len(meta.get("engine_error", ""))] or not (
                meta.get("engine_error")
            ):
                problems.append(f"{name}: {path.name} engine_error differs from the raised error")
        if code not in codes:
            problems.append(f"{name}: finding {code} not reported (got {codes})")
        if table.returncode != 1:
            problems.append(f"{name}: check-embeddings exit {table.returncode}, expected 1")
    print("PASS" if not problems else "FAIL\n  " + "\n  ".join(problems), flush=True)
    return problems


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]), sys.argv[4] or None)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    mmcli = str(Path(sys.executable).with_name("mmcli"))
    problems: list[str] = []
    for name in args.scenario or list(SCENARIOS):
        problems += run_scenario(name, args.model, args.out, mmcli)
    print(
        f"\n{len(args.scenario or SCENARIOS) - len({p.split(':')[0] for p in problems})} passed,"
        f" {len({p.split(':')[0] for p in problems})} failed"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
