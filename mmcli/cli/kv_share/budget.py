"""``kv-share plan`` options that start from what a vLLM user knows: a GPU, weights, ``auto``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mmcli.errors import InputError
from mmcli.text import quoted

if TYPE_CHECKING:
    from mmcli.cli.kv_share.weights import WeightsFigure
    from mmcli.kv.inputs.model_source import ModelSource
    from mmcli.kv.whatif.gpus import Estimate


def gpu_budget(
    gpu: str | None,
    memory: str | None,
    weights: str | None,
    reserve: str | None,
    source: ModelSource,
    revision: str | None,
    engine: str,
    utilization: float | None,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
) -> tuple[Estimate | None, WeightsFigure | None]:
    """``--gpu``'s estimate (vLLM's, when vLLM is planned) and the weights figure it took;
    ``utilization`` None is vLLM's default (0.9)."""
    from mmcli.cli.kv_share.weights import weights_figure

    if gpu is None:
        if weights is not None or reserve is not None:
            raise InputError(
                "--weights and --reserve need --gpu", hint="e.g. --gpu H100 --weights 16GiB"
            )
        if utilization is not None:  # it shapes only the --gpu estimate
            raise InputError(
                "--gpu-memory-utilization needs --gpu",
                hint="with --memory (the KV memory itself) there is nothing to scale; "
                "e.g. --gpu H100 --gpu-memory-utilization 0.8",
            )
        return None, None
    if memory is not None:
        raise InputError(
            "give --memory (the exact KV memory) or --gpu (an estimate), not both",
            hint="--memory is what vLLM logs as 'Available KV cache memory'",
        )
    figure = weights_figure(weights, source, revision)
    if engine in ("sglang", "trtllm"):
        return None, figure
    share = DEFAULT_UTILIZATION if utilization is None else utilization
    args = (share, reserve, tensor_parallel_size, pipeline_parallel_size)
    return estimate(gpu, figure, *args), figure


#: vLLM's ``--gpu-memory-utilization`` default.
DEFAULT_UTILIZATION = 0.9


def estimate(
    gpu: str,
    weights: WeightsFigure,
    utilization: float,
    reserve: str | None,
    tensor_parallel_size: int,
    pipeline_parallel_size: int = 1,
) -> Estimate:
    """The KV-memory estimate of ``--gpu`` (with the weights figure, utilization and reserve)."""
    from mmcli.kv.whatif.gpus import DEFAULT_RESERVE_BYTES, estimate_kv_budget, resolve_gpu

    return estimate_kv_budget(
        resolve_gpu(gpu),
        utilization,
        weights.total_bytes,
        tp=tensor_parallel_size,
        pp=pipeline_parallel_size,
        reserve=parse_reserve(reserve) if reserve is not None else DEFAULT_RESERVE_BYTES,
        weights_source=weights.source,
        weights_estimated=weights.estimated,
    )


def parse_reserve(text: str) -> int:
    """``--reserve``'s bytes: a size as ``--memory`` takes it, where 0 (no reserve) is valid."""
    from mmcli.kv.options import parse_size

    try:
        return parse_size(text, allow_zero=True)
    except InputError as exc:
        message = exc.message.replace("memory size", "size", 1)
        raise InputError(
            f"--reserve: {message}",
            hint="the activation and CUDA-graph memory held back, e.g. 2GiB (the default), "
            "or 0 for none",
        ) from None


def estimate_panel(est: Estimate) -> Group:
    """Every term of the estimate, right-aligned, under a title that says it is one."""
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("")
    table.add_column("", justify="right")
    for label, value in est.terms():
        table.add_row(label, f"{abs(value) / 2**30:,.2f} GiB")  # the label carries the sign
    panel = Panel(table, title="KV memory per GPU: an ESTIMATE", expand=False)
    return Group(panel, Text(f"weights: {est.weights_source}"))


def parse_partition(text: str) -> tuple[int, ...]:
    """``--pp-layer-partition 8,12,12`` → ``(8, 12, 12)``."""
    parts = text.split(",")
    if len(text) > 10_000 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise InputError(
            f"--pp-layer-partition: cannot read {quoted(text)} as layer counts",
            hint="one count per stage, comma-separated, e.g. 8,12,12",
        )
    return tuple(int(p) for p in parts)
