"""SGLang: the scheduler's totals line of a plan whose context length is unknown, and the default
``mem_fraction_static`` of a multimodal model from 0.5.18 on.

The request pool's size needs ``context_len`` (0.5.17 mem_cache/kv_cache_configurator.py:1723
``int(token_capacity / context_len * 512)``), and ``max_running_requests`` is
``min(tokens // 2, max_num_reqs)``: a config with no context length leaves both unknown.
"""

from __future__ import annotations

from pathlib import Path

from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang

REALWORLD = Path(__file__).parent / "realworld" / "configs"
QWEN3_VL = REALWORLD / "Qwen--Qwen3-VL-30B-A3B.nested-subset.json"
MiB = 2**20
H100 = 81_559 * MiB


def test_unknown_context_leaves_max_running_requests_unknown() -> None:
    # Qwen3-VL-30B-A3B's subset names no max_position_embeddings: the figure is unknown, and
    # the log line says so rather than printing 0 (SGLang stops at start-up on a zero).
    options = SglangOptions(
        release="0.5.17", gpu_bytes=H100, gpu_name="H100", weights_bytes=60 * 2**30
    )
    result = plan_sglang(load_config(QWEN3_VL), read_document(QWEN3_VL), options)
    assert result.figures["max_running_requests"].value is None
    assert result.log_lines[-1].endswith("max_running_requests=?, context_len=?")
