"""TensorRT-LLM's paged KV pool, release by release: budget, bytes per token, blocks."""

from __future__ import annotations

from mmcli.kv.trtllm.pool import TrtllmOptions, plan_trtllm
from mmcli.kv.trtllm.releases import DEFAULT_RELEASE, RELEASES, trtllm_rules

__all__ = ["DEFAULT_RELEASE", "RELEASES", "TrtllmOptions", "plan_trtllm", "trtllm_rules"]
