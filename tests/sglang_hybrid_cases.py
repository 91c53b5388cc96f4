"""What the SGLang hybrid GDN / Mamba-2 tests share: the published configs
(tests/kv/configs/PROVENANCE.md), Qwen3-Next's state and cell at tp 1 as SGLang's config classes
give them (configs/qwen3_next.py, configs/mamba_utils.py: conv ``(conv_dim, kernel − 1)`` in
bfloat16, SSM ``(heads, head_dim, state)`` in float32), and a plan under one release (also the
SGLang sliding-window tests' plan of a config whose document a test replaces)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmcli.kv.figures import EngineFigures
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang

CONFIGS = Path(__file__).parent / "kv" / "configs"
QWEN3_NEXT = CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Thinking.json"
NEMOTRON_H = CONFIGS / "nvidia--Nemotron-H-8B-Base-8K.json"
GiB = 2**30
#: EAGLE with three steps and top-k 1: four draft tokens (steps + 1).
SPEC = {"speculative_num_steps": 3, "speculative_eagle_topk": 1}
#: Qwen3-Next at tp 1: 36 GDN layers, conv (8192, 3) bf16, SSM (32, 128, 128) fp32.
CONV = 36 * 8192 * 3 * 2
SSM = 36 * 32 * 128 * 128 * 4
PER_REQ = CONV + SSM
#: 12 full-attention layers × 2 KV heads × 256 × (K + V) × bf16.
CELL = 12 * 2 * 256 * 2 * 2


def plan_with(default: str | None, path: Path, /, **options: Any) -> EngineFigures:
    """``path`` planned with ``options``, by SGLang ``default`` where they name no release."""
    if default is not None:
        options.setdefault("release", default)
    return plan_doc(path, None, **options)


def plan_doc(path: Path, doc: dict[str, Any] | None = None, /, **options: Any) -> EngineFigures:
    """``path`` planned with ``options``, its document replaced by ``doc`` where one is given."""
    document = read_document(path) if doc is None else doc
    return plan_sglang(load_config(path), document, SglangOptions(**options))
