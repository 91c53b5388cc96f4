"""End-to-end check of mmcli's vLLM plugin on a real (CPU) vLLM and a tiny random LLaVA.

``python e2e/run_vllm.py --model DIR --out DIR`` first captures the reference side: the same
prompts and images through transformers (``e2e/transformers_side.py``, mode ``always``).
Then it runs each scenario in its own process (a fresh engine, its own environment), and
checks the dumps with ``mmcli check-embeddings`` and, against the reference, ``mmcli compare``:

* ``healthy`` — ``MMCLI_DUMP_MODE=always``: generation succeeds; every dump checks clean, the
  execute-phase dumps carry one ``is_embed`` mask per image, and ``mmcli compare`` of the
  transformers dumps with vLLM's pairs them by the prompt's token ids and exits 0 (``port``).
* ``batch-dim`` / ``one-short`` / ``zero-items`` — a registered LLaVA subclass
  (``e2e/faulty_llava.py``) whose encoder keeps the batch dim, returns one item too few, or
  none, default mode (``failure``): ``llm.generate`` raises the engine's own
  ``AssertionError`` (recorded verbatim as ``engine_error``), and the dump gets the finding
  ``item-ndim`` / ``item-count`` / ``item-count``.
* ``narrow`` / ``wide`` — a projector one column short, or each row twice over (2 × hidden,
  which a model without deepstack cannot take): the engine's check passes and its embedding
  merge raises ``ValueError``; a dump is still written, with the model's hidden size and
  ``deepstack_levels`` 0 from its config, and ``check-embeddings`` says ``hidden-size``.
* ``scale`` / ``reverse`` — ``always``: rows times 0.5, or each item's rows reversed; every
  dump checks clean (they are structurally fine) and ``mmcli compare`` reports
  ``compare-scale`` / ``compare-permuted``. ``reverse`` runs the engine in bfloat16 against
  the float32 reference, as in real use: the permutation is found through the engine's noise.

A comparison step is skipped (and said to be) when the installed mmcli has no ``compare``
command. Exit 0 when every scenario passes. The engine runs in one process
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Scenario:
    mode: str | None  # MMCLI_DUMP_MODE (None: the default, failure)
    fault: str | None  # MMCLI_E2E_FAULT for e2e/faulty_llava.py
    finding: str | None  # the check-embeddings error expected (None: clean)
    raises: str | None  # the engine's exception type expected from generate (None: succeeds)
    compare: str | None  # "ok" (exit 0) or the compare finding expected; None: no compare
    one_by_one: bool  # one prompt per generate call (one dump per prompt: pairable)
    dtype: str = "float32"  # the engine's dtype (the transformers reference runs in float32)


SCENARIOS = {
    "healthy": Scenario("always", None, None, None, "ok", True),
    "batch-dim": Scenario(None, "batch-dim", "item-ndim", "AssertionError", None, False),
    "one-short": Scenario(None, "one-short", "item-count", "AssertionError", None, False),
    "zero-items": Scenario(None, "zero", "item-count", "AssertionError", None, True),
    "narrow": Scenario(None, "narrow", "hidden-size", "ValueError", None, True),
    "wide": Scenario(None, "wide", "hidden-size", "ValueError", None, True),
    "scale": Scenario("always", "scale", None, None, "compare-scale", True),
    "reverse": Scenario("always", "reverse", None, None, "compare-permuted", True, "bfloat16"),
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


def child(model: str, result_file: Path, fault: str | None, one_by_one: bool, dtype: str) -> None:
    from vllm import LLM, SamplingParams

    sys.path.insert(0, str(HERE))
    from prompts import PROMPTS, image

    if fault:
        import faulty_llava

        faulty_llava.register()
    result: dict[str, Any] = {}
    start = time.time()
    try:
        llm = LLM(
            model=model,
            max_model_len=256,
            enforce_eager=True,
            dtype=dtype,
            max_num_seqs=2,
            max_num_batched_tokens=256,
            limit_mm_per_prompt={"image": 1},
        )
        result["startup_s"] = round(time.time() - start, 1)
        prompts = [
            {"prompt": text, "multi_modal_data": {"image": image(i)}}
            for i, text in enumerate(PROMPTS)
        ]
        params = SamplingParams(max_tokens=4, temperature=0.0)
        batches = [[p] for p in prompts] if one_by_one else [prompts]
        result["generated"] = [
            list(o.outputs[0].token_ids) for batch in batches for o in llm.generate(batch, params)
        ]
    except Exception as exc:  # the engine's own error, as generate raised it
        result["error_type"] = type(exc).__name__
        result["error_message"] = str(exc)
    result_file.write_text(json.dumps(result))


# --------------------------------------------------------------------------- parent: checks


def codes_of(document: Any, severities: tuple[str, ...] = ("error",)) -> set[str]:
    found: set[str] = set()
    if isinstance(document, dict):
        if isinstance(document.get("code"), str) and document.get("severity") in severities:
            found.add(document["code"])
        for value in document.values():
            found |= codes_of(value, severities)
    elif isinstance(document, list):
        for value in document:
            found |= codes_of(value, severities)
    return found


def has_compare(mmcli: str) -> bool:
    """Whether the installed mmcli has the ``compare`` command."""
    probe = subprocess.run([mmcli, "compare", "--help"], capture_output=True, text=True)
    return probe.returncode == 0


def reference(model: Path, out: Path) -> tuple[Path | None, list[str]]:
    """The transformers side's dumps (mode always), or None with the problem."""
    dumps = out / "transformers"
    shutil.rmtree(dumps, ignore_errors=True)
    print("\n=== transformers reference: MMCLI capture when=always", flush=True)
    proc = subprocess.run(
        [sys.executable, str(HERE / "transformers_side.py"), str(model), str(dumps)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        timeout=600,
    )
    print(proc.stdout.rstrip())
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-20:])
        return None, [f"transformers: exit {proc.returncode}:\n{tail}"]
    return dumps, []


def compare_step(
    name: str, expect: str, ref: Path | None, dumps: Path, mmcli: str, available: bool
) -> tuple[list[str], bool]:
    """``mmcli compare REF CAND``; (problems, skipped)."""
    if not available:
        print(f"SKIPPED compare step of {name}: the installed mmcli has no compare command")
        return [], True
    if ref is None:
        return [f"{name}: no transformers reference to compare with"], False
    table = subprocess.run(
        [mmcli, "compare", str(ref), str(dumps), "--profile", "port"],
        capture_output=True,
        text=True,
    )
    print(f"$ mmcli compare {ref} {dumps} --profile port   (exit {table.returncode})")
    print(table.stdout.rstrip() or table.stderr.rstrip())
    doc = subprocess.run(
        [mmcli, "compare", str(ref), str(dumps), "--format", "json"],
        capture_output=True,
        text=True,
    )
    codes = codes_of(json.loads(doc.stdout), ("error", "warning")) if doc.stdout.strip() else set()
    if expect == "ok":
        if table.returncode != 0:
            return [f"{name}: mmcli compare exit {table.returncode}, expected 0 ({codes})"], False
        return [], False
    problems = []
    if table.returncode != 1:
        problems.append(f"{name}: mmcli compare exit {table.returncode}, expected 1")
    if expect not in codes:
        problems.append(f"{name}: compare finding {expect} not reported (got {codes})")
    return problems, False


def run_scenario(
    name: str, model: Path, out: Path, mmcli: str, ref: Path | None, compare: bool
) -> tuple[list[str], bool]:
    """Run one scenario; (problems, whether a step was skipped)."""
    scenario = SCENARIOS[name]
    mode, fault, code = scenario.mode, scenario.fault, scenario.finding
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
    print(
        f"\n=== {name}: MMCLI_DUMP_MODE={mode or '(default: failure)'} fault={fault} "
        f"dtype={scenario.dtype}",
        flush=True,
    )
    start = time.time()
    log = out / f"{name}.log"
    with log.open("w") as f:
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                str(model_dir),
                str(result_file),
                fault or "",
                "1" if scenario.one_by_one else "",
                scenario.dtype,
            ],
            env=engine_env(dumps, mode, fault),
            stdout=f,
            stderr=subprocess.STDOUT,
            timeout=900,
        )
    print(f"engine process exit {proc.returncode} after {time.time() - start:.0f} s (log {log})")
    if not result_file.exists():
        tail = log.read_text().splitlines()[-30:]
        return [f"{name}: the engine process wrote no result:\n" + "\n".join(tail)], False
    result = json.loads(result_file.read_text())
    print("engine result:", json.dumps(result)[:600])
    files = sorted(dumps.glob("*.safetensors")) if dumps.is_dir() else []
    print(f"dumps: {[f.name for f in files]}")
    if dumps.is_dir():
        print(f"dump dir mode: {oct(dumps.stat().st_mode & 0o777)}")
        if dumps.stat().st_mode & 0o077:
            problems.append(f"{name}: dump dir {dumps} is not 0700")
    if not files:
        return problems + [f"{name}: no dump written"], False
    table = subprocess.run(
        [mmcli, "check-embeddings", str(dumps), "--device", "cpu"], capture_output=True, text=True
    )
    print(f"$ mmcli check-embeddings {dumps} --device cpu   (exit {table.returncode})")
    print(table.stdout.rstrip() or table.stderr.rstrip())
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
    if scenario.raises is None:
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
        if result.get("error_type") != scenario.raises:
            problems.append(f"{name}: expected the engine's {scenario.raises}, got {result}")
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
    skipped = False
    if scenario.compare is not None:
        found, skipped = compare_step(name, scenario.compare, ref, dumps, mmcli, compare)
        problems += found
    verdict = "PASS" if not problems else "FAIL\n  " + "\n  ".join(problems)
    print(verdict + (" (compare step skipped)" if skipped and not problems else ""), flush=True)
    return problems, skipped


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]), sys.argv[4] or None, bool(sys.argv[5]), sys.argv[6])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    mmcli = str(Path(sys.executable).with_name("mmcli"))
    names = args.scenario or list(SCENARIOS)
    compare = has_compare(mmcli)
    ref, problems = None, []
    if any(SCENARIOS[n].compare for n in names):
        ref, problems = reference(args.model, args.out)
    failed = {p.split(":")[0] for p in problems}
    summary = []
    for name in names:
        found, skipped = run_scenario(name, args.model, args.out, mmcli, ref, compare)
        problems += found
        state = "FAIL" if found else ("PASS (compare skipped)" if skipped else "PASS")
        summary.append(f"  {name:<12} {state}")
        if found:
            failed.add(name)
    print("\nsummary:")
    print("\n".join(summary))
    if not compare:
        print("  (mmcli compare is not installed: the compare steps were skipped)")
    print(f"{len(names) - len(failed & set(names))} passed, {len(failed)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
