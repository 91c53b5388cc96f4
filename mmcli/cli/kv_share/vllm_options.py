"""``kv-share plan`` options that stand for a vLLM environment variable, not a flag."""

from __future__ import annotations

from typing import Annotated

from mmcli.cli.options import flag

ChunkedHybridOpt = Annotated[
    bool | None,
    flag(
        "--chunked-local-attn-hybrid/--no-chunked-local-attn-hybrid",
        help="VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 / 0: chunked local layers "
        "(Llama 4) keep their own groups, or the hybrid manager is off and they are planned as "
        "full attention (default: the release's, on from 0.14).",
        show_default=False,
    ),
]


def vllm_only(chunked_hybrid: bool | None) -> dict[str, bool]:
    """These options, as ``refuse_vllm_only`` reads them (given either way: refused)."""
    return {"--chunked-local-attn-hybrid": chunked_hybrid is not None}
