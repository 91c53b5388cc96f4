"""mmcli: diagnostics for multimodal embedding merges and cross-layer KV-cache sharing.

The names below are imported on first use, so ``import mmcli`` (and ``mmcli --help``) stays
fast and does not load torch until a tensor function is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mmcli._version import __version__
from mmcli.errors import EncoderOutputError, InputError, KVSharingError, MmcliError
from mmcli.lazy import lazy_getattr

if TYPE_CHECKING:
    from mmcli import capture
    from mmcli.compare import compare_dumps
    from mmcli.dump.io import dump_encoder_outputs, load_dump
    from mmcli.embeddings.ops import gather_mm_placeholders, scatter_mm_placeholders
    from mmcli.embeddings.ranges import (
        PlaceholderRange,
        embeds_cumsum,
        embeds_index_range,
        gather_window,
        num_embeds,
    )
    from mmcli.embeddings.sanity import diagnose_mm_encoder_outputs, sanity_check_mm_encoder_outputs
    from mmcli.kv import (
        FullAttentionSpec,
        KVCacheGroupSpec,
        PlanRequest,
        SlidingWindowSpec,
        initialize_kv_cache_for_kv_sharing,
        plan_run,
    )

_LAZY = {
    "capture": "",  # the subpackage itself (torch-free until a capture is used)
    "scatter_mm_placeholders": "mmcli.embeddings.ops",
    "gather_mm_placeholders": "mmcli.embeddings.ops",
    "PlaceholderRange": "mmcli.embeddings.ranges",
    "embeds_cumsum": "mmcli.embeddings.ranges",
    "num_embeds": "mmcli.embeddings.ranges",
    "embeds_index_range": "mmcli.embeddings.ranges",
    "gather_window": "mmcli.embeddings.ranges",
    "sanity_check_mm_encoder_outputs": "mmcli.embeddings.sanity",
    "diagnose_mm_encoder_outputs": "mmcli.embeddings.sanity",
    "dump_encoder_outputs": "mmcli.dump.io",
    "compare_dumps": "mmcli.compare",
    "load_dump": "mmcli.dump.io",
    "KVCacheGroupSpec": "mmcli.kv",
    "FullAttentionSpec": "mmcli.kv",
    "SlidingWindowSpec": "mmcli.kv",
    "initialize_kv_cache_for_kv_sharing": "mmcli.kv",
    "PlanRequest": "mmcli.kv",
    "plan_run": "mmcli.kv",
}

__all__ = [
    "__version__",
    "MmcliError",
    "InputError",
    "EncoderOutputError",
    "KVSharingError",
    "scatter_mm_placeholders",
    "gather_mm_placeholders",
    "PlaceholderRange",
    "embeds_cumsum",
    "num_embeds",
    "embeds_index_range",
    "gather_window",
    "sanity_check_mm_encoder_outputs",
    "diagnose_mm_encoder_outputs",
    "dump_encoder_outputs",
    "load_dump",
    "compare_dumps",
    "capture",
    "KVCacheGroupSpec",
    "FullAttentionSpec",
    "SlidingWindowSpec",
    "initialize_kv_cache_for_kv_sharing",
    "PlanRequest",
    "plan_run",
]


__getattr__ = lazy_getattr("mmcli", _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
