"""The vLLM releases the planner mirrors: from the oldest row of the release table on. An older
release (the V0 engine, default before 0.8, or V1 before the oldest row) sized its KV cache
from other code, and is refused by name rather than planned with the oldest rules."""

from __future__ import annotations

from mmcli.errors import InputError
from mmcli.kv.releases import CHANGES, parse_release


def refuse_unmirrored_release(release: str | None) -> None:
    """Refuse ``--vllm-version`` older than the oldest mirrored release, naming both."""
    oldest = CHANGES[0][0]
    if release is None or parse_release(release)[:2] >= parse_release(oldest)[:2]:
        return
    raise InputError(
        f"--vllm-version {release}: mmcli mirrors vLLM's V1 engine from {oldest} on; "
        f"{release} (the V0 engine, or V1 before {oldest}) sized its KV cache with other code, "
        "which is not modelled",
        hint=f"name a release from {oldest} on, e.g. --vllm-version {oldest}",
    )
