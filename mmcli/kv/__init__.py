"""KV-cache specs, cross-layer sharing, and the planner behind ``mmcli kv-share plan``.

The public façade of the planner: the command line imports ``mmcli.kv`` alone (an
architecture test says so). The names after the first block are imported on first use, so
``import mmcli.kv`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mmcli.kv.request import Engine, PlanRequest
from mmcli.kv.run import PlanRun, plan_run, refuse_deepseek_v4_on_sglang
from mmcli.kv.sharing import initialize_kv_cache_for_kv_sharing, validate_sharing_map
from mmcli.kv.spec import (
    FullAttentionSpec,
    KVCacheGroupSpec,
    KVCacheSpec,
    Layer,
    SlidingWindowSpec,
)
from mmcli.lazy import lazy_getattr

if TYPE_CHECKING:
    from mmcli.kv.aliasing import AliasingReport
    from mmcli.kv.explain.engine_logs import SglangLog, engine_log_of
    from mmcli.kv.explain.engines import explain_sglang, explain_trtllm
    from mmcli.kv.explain.report import Explanation, explain_log
    from mmcli.kv.explain.vllm_log import vllm_log_of
    from mmcli.kv.figures import FIGURE_LABELS, EngineFigures
    from mmcli.kv.inputs.layer_config import load_config, load_document, read_document
    from mmcli.kv.inputs.map_file import write_map
    from mmcli.kv.inputs.model_source import resolve_model
    from mmcli.kv.inputs.readers import read_head
    from mmcli.kv.memory_profile import MemoryComparison, explain_vllm_log
    from mmcli.kv.releases import describe, first_release, mirrored_range, value_history
    from mmcli.kv.result import ENGINE_CODES, KVPlan, SidePlan
    from mmcli.kv.serve import ServeArgs, parse_serve_line, serve_option
    from mmcli.kv.sglang.version_help import sglang_version_help
    from mmcli.kv.side_by_side import refuse_vllm_only
    from mmcli.kv.state import MambaSpec
    from mmcli.kv.trtllm.releases import trtllm_blocks_by_path, trtllm_releases_help
    from mmcli.kv.whatif.gpus import Estimate
    from mmcli.kv.whatif.sweep import Sweep

#: The names imported on first use, with their modules.
_LAZY = {
    "AliasingReport": "mmcli.kv.aliasing",
    "SglangLog": "mmcli.kv.explain.engine_logs",
    "engine_log_of": "mmcli.kv.explain.engine_logs",
    "explain_sglang": "mmcli.kv.explain.engines",
    "explain_trtllm": "mmcli.kv.explain.engines",
    "MemoryComparison": "mmcli.kv.memory_profile",
    "explain_vllm_log": "mmcli.kv.memory_profile",
    "Explanation": "mmcli.kv.explain.report",
    "explain_log": "mmcli.kv.explain.report",
    "vllm_log_of": "mmcli.kv.explain.vllm_log",
    "FIGURE_LABELS": "mmcli.kv.figures",
    "EngineFigures": "mmcli.kv.figures",
    "load_config": "mmcli.kv.inputs.layer_config",
    "load_document": "mmcli.kv.inputs.layer_config",
    "read_document": "mmcli.kv.inputs.layer_config",
    "write_map": "mmcli.kv.inputs.map_file",
    "resolve_model": "mmcli.kv.inputs.model_source",
    "read_head": "mmcli.kv.inputs.readers",
    "describe": "mmcli.kv.releases",
    "first_release": "mmcli.kv.releases",
    "mirrored_range": "mmcli.kv.releases",
    "value_history": "mmcli.kv.releases",
    "ENGINE_CODES": "mmcli.kv.result",
    "KVPlan": "mmcli.kv.result",
    "SidePlan": "mmcli.kv.result",
    "refuse_vllm_only": "mmcli.kv.side_by_side",
    "ServeArgs": "mmcli.kv.serve",
    "parse_serve_line": "mmcli.kv.serve",
    "serve_option": "mmcli.kv.serve",
    "sglang_version_help": "mmcli.kv.sglang.version_help",
    "MambaSpec": "mmcli.kv.state",
    "trtllm_releases_help": "mmcli.kv.trtllm.releases",
    "trtllm_blocks_by_path": "mmcli.kv.trtllm.releases",
    "Estimate": "mmcli.kv.whatif.gpus",
    "Sweep": "mmcli.kv.whatif.sweep",
}


__getattr__ = lazy_getattr("mmcli.kv", _LAZY)


__all__ = [
    "Engine",
    "PlanRequest",
    "PlanRun",
    "plan_run",
    "refuse_deepseek_v4_on_sglang",
    "FullAttentionSpec",
    "KVCacheGroupSpec",
    "KVCacheSpec",
    "Layer",
    "SlidingWindowSpec",
    "initialize_kv_cache_for_kv_sharing",
    "validate_sharing_map",
    "AliasingReport",
    "SglangLog",
    "engine_log_of",
    "explain_sglang",
    "explain_trtllm",
    "MemoryComparison",
    "explain_vllm_log",
    "Explanation",
    "explain_log",
    "vllm_log_of",
    "FIGURE_LABELS",
    "EngineFigures",
    "load_config",
    "load_document",
    "read_document",
    "write_map",
    "resolve_model",
    "read_head",
    "describe",
    "ServeArgs",
    "parse_serve_line",
    "serve_option",
    "trtllm_releases_help",
    "trtllm_blocks_by_path",
    "first_release",
    "mirrored_range",
    "value_history",
    "sglang_version_help",
    "ENGINE_CODES",
    "KVPlan",
    "SidePlan",
    "refuse_vllm_only",
    "MambaSpec",
    "Estimate",
    "Sweep",
]
