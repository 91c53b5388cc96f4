"""Hand one vLLM encoder batch to this rank's capturer (shared by the check and merge wrappers)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mmcli.capture._common import Settings
from mmcli.capture.vllm.items import ItemInfo, batch_context, tp_rank
from mmcli.capture.vllm.state import state

logger = logging.getLogger("mmcli.capture.vllm")


def capture(
    settings: Settings,
    outputs: Any,
    expected: Any,
    infos: list[ItemInfo | None] | None,
    phase: str,
    error: BaseException | None,
    extra: Mapping[str, str] | None = None,
    changes: Mapping[str, Any] | None = None,
    warn_masks: bool = True,
) -> None:
    """Hand the batch to this rank's capturer, which writes it when the mode says so.

    ``extra``: more metadata (the merge's ``failed_at``); ``changes``: context fields that
    replace the batch's (the merge's ``hidden_size``, ``placeholder_positions``);
    ``warn_masks``: say once in the log when no item's range is known. Never raises.
    """
    try:
        rank = tp_rank()
        capturer = settings.capturer(rank)
        if capturer is None:
            return
        masks, context = batch_context(
            outputs,
            expected if isinstance(expected, int) else None,
            infos,
            runner=state.runner,
            phase=phase,
            rank=rank,
        )
        if extra or changes:
            context = context.with_(extra={**context.extra, **(extra or {})}, **(changes or {}))
        if masks is None and phase != "profile" and warn_masks:
            _warn_no_masks()
        path = capturer.record(outputs, is_embed=masks, context=context, error=error)
        if path is not None:
            logger.warning("mmcli: wrote %s", path)
    except Exception:
        logger.exception("mmcli: could not capture encoder outputs")


def _warn_no_masks() -> None:
    if not state.warned_no_masks:
        state.warned_no_masks = True
        logger.warning(
            "mmcli: no placeholder ranges for this encoder batch (a vLLM release whose runner "
            "differs from the ones covered?); dumping without masks"
        )
