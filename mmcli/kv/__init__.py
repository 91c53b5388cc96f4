"""KV-cache specs, cross-layer sharing, and the planner behind ``mmcli kv-share plan``."""

from __future__ import annotations

from mmcli.kv.request import Engine, PlanRequest
from mmcli.kv.run import PlanRun, plan_run
from mmcli.kv.sharing import initialize_kv_cache_for_kv_sharing, validate_sharing_map
from mmcli.kv.spec import (
    FullAttentionSpec,
    KVCacheGroupSpec,
    KVCacheSpec,
    Layer,
    SlidingWindowSpec,
)

__all__ = [
    "Engine",
    "PlanRequest",
    "PlanRun",
    "plan_run",
    "FullAttentionSpec",
    "KVCacheGroupSpec",
    "KVCacheSpec",
    "Layer",
    "SlidingWindowSpec",
    "initialize_kv_cache_for_kv_sharing",
    "validate_sharing_map",
]
