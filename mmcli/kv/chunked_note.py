"""Why a plan's chunked local layers are full attention: the engine turned its manager off."""

from __future__ import annotations

from mmcli.findings import Finding
from mmcli.kv.options import PlanOptions
from mmcli.kv.spec import KVCacheSpec
from mmcli.kv.state import MambaSpec

_VARIABLE = "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"


def chunked_as_full(
    specs: list[KVCacheSpec | MambaSpec | None], options: PlanOptions
) -> list[Finding]:
    """A ``chunked-as-full`` note where chunked local layers are planned as full attention
    because vLLM turns its hybrid KV cache manager off for them (not asked for with
    ``--disable-hybrid-kv-cache-manager``)."""
    chunked = any(s is not None and s.attention == "chunked" for s in specs)
    if not chunked or options.disable_hybrid_kv_cache_manager or options.chunked_local_hybrid:
        return []
    if options.num_draft_layers or options.mtp:
        why = "with an EAGLE or MTP drafter, vLLM turns its hybrid KV cache manager off"
        hint = f"that is the engine's rule whatever {_VARIABLE} says"
    else:
        rules = options.rules
        given = options.chunked_local_attn_hybrid is not None
        default = "" if given else f", the default of vLLM {rules.release}"
        why = f"with {_VARIABLE}=0{default}, vLLM turns its hybrid KV cache manager off"
        hint = "pass --chunked-local-attn-hybrid to plan them in their own KV-cache groups"
    return [
        Finding(
            "chunked-as-full",
            "info",
            f"{why} for chunked local attention: the chunked layers are planned as full "
            "attention, keeping every token",
            hint=hint,
        )
    ]
