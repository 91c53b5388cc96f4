"""SGLang's KV pool, release by release: budget, cell size, pool tokens, what it prints."""

from __future__ import annotations

from mmcli.kv.sglang.pool import SglangOptions, plan_sglang
from mmcli.kv.sglang.releases import DEFAULT_RELEASE, RELEASES, sglang_rules

__all__ = ["DEFAULT_RELEASE", "RELEASES", "SglangOptions", "plan_sglang", "sglang_rules"]
