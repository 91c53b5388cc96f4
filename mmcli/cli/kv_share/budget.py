"""``kv-share plan`` options that start from what a vLLM user knows: a GPU, weights, ``auto``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.panel import Panel
from rich.table import Table

from mmcli.errors import InputError
from mmcli.text import quoted

if TYPE_CHECKING:
    from mmcli.kv.gpus import Estimate


def parse_max_model_len(text: str | None) -> int | str | None:
    """``--max-model-len``: a positive integer, or ``auto`` / ``-1`` (the largest that fits)."""
    if text is None:
        return None
    value = text.strip().lower()
    if value in ("auto", "-1"):
        return "auto"
    if not value.isascii() or not value.isdigit() or len(value) > 12 or int(value) <= 0:
        raise InputError(
            f"--max-model-len must be a positive integer or auto, got {quoted(text)}",
            hint="e.g. 32768, or auto (-1) for the largest length that fits the KV memory",
        )
    return int(value)


def estimate(
    gpu: str,
    weights: str | None,
    utilization: float,
    reserve: str | None,
    tensor_parallel_size: int,
) -> Estimate:
    """The KV-memory estimate of ``--gpu`` (with ``--weights``, utilization and reserve)."""
    from mmcli.kv.gpus import DEFAULT_RESERVE_BYTES, estimate_kv_budget, resolve_gpu, weights_bytes
    from mmcli.kv.options import parse_size

    return estimate_kv_budget(
        resolve_gpu(gpu),
        utilization,
        weights_bytes(weights) if weights else 0,
        tp=tensor_parallel_size,
        reserve=parse_size(reserve) if reserve else DEFAULT_RESERVE_BYTES,
    )


def estimate_panel(est: Estimate) -> Panel:
    """Every term of the estimate, right-aligned, under a title that says it is one."""
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("")
    table.add_column("", justify="right")
    for label, value in est.terms():
        table.add_row(label, f"{abs(value) / 2**30:,.2f} GiB")  # the label carries the sign
    return Panel(table, title="KV memory per GPU: an ESTIMATE", expand=False)
