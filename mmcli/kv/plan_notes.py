"""The plan's notes about the engine itself: a release newer than the rules mirrored, a block
size the attention backend picks, and the start-up refusal when one request does not fit."""

from __future__ import annotations

from mmcli.findings import Finding
from mmcli.kv.model import DEFAULT_BLOCK_SIZE
from mmcli.kv.options import PlanOptions
from mmcli.kv.releases import NEWEST, parse_release
from mmcli.kv.result import SidePlan
from mmcli.kv.spec import KVCacheSpec, MLAAttentionSpec
from mmcli.kv.state import MambaSpec


def release_notes(
    specs: list[KVCacheSpec | MambaSpec | None], options: PlanOptions, user_block: bool
) -> list[Finding]:
    """What the chosen rules cannot know: a newer release, a backend-chosen block size."""
    notes = []
    rules = options.rules
    if parse_release(rules.release) > parse_release(NEWEST):
        notes.append(
            Finding(
                "newer-release",
                "info",
                f"vLLM {rules.release} is newer than the newest release mirrored ({NEWEST}); "
                f"this plan uses {NEWEST}'s rules",
                hint="check its start-up log: mmcli kv-share explain LOG --config CONFIG",
            )
        )
    if not user_block and any(isinstance(s, MLAAttentionSpec) for s in specs):
        block = options.block_size or DEFAULT_BLOCK_SIZE
        picks = "others 16" if block == DEFAULT_BLOCK_SIZE else f"CUTLASS MLA 128, others {block}"
        notes.append(
            Finding(
                "backend-block-size",
                "info",
                "without --block-size, vLLM lets the MLA attention backend pick the block size "
                f"(FlashMLA needs 64 tokens, {picks}); this plan uses {block}",
                hint="pass --block-size 64 to plan a FlashMLA run"
                if block != 64
                else "pass --block-size 128 to plan a CUTLASS MLA run",
            )
        )
    return notes


def too_small(side: SidePlan, max_len: int | None, options: PlanOptions) -> Finding:
    """The engine's start-up refusal: one request at max_model_len does not fit."""
    gib = 2**30
    need, have = side.engine_request_bytes or 0, side.check_memory_bytes or 0
    fits = side.largest_fitting_max_model_len or 0
    estimate = (
        f"; the largest max_model_len that fits is {fits:,}"
        if fits
        else "; not even a 1-token request fits"
    )
    return Finding(
        "memory-too-small",
        "error",
        f"to serve one request of max_model_len {max_len:,}, {need / gib:.2f} GiB of KV cache "
        f"({need:,} B) is needed, more than the {have / gib:.2f} GiB ({have:,} B) available: "
        f"the engine would refuse to start{estimate}",
        hint="lower --max-model-len, raise --memory or --tensor-parallel-size, or use "
        "--kv-dtype fp8",
    )
