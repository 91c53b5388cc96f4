"""The KV memory of a ``--gpu`` plan before launch: the GPU's memory, the weights per rank
and what vLLM keeps back, as an estimate (:func:`mmcli.kv.whatif.gpus.estimate_kv_budget`)."""

from __future__ import annotations

from mmcli.errors import InputError
from mmcli.kv.inputs.model_source import ModelSource
from mmcli.kv.inputs.weights import WeightsFigure, weights_figure
from mmcli.kv.releases import rules_for
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
    vllm_version: str | None = None,
) -> tuple[Estimate | None, WeightsFigure | None]:
    """``--gpu``'s estimate (vLLM's, when vLLM is planned) and the weights figure it took;
    ``utilization`` None is the release's default (0.9, 0.92 from 0.20, 1.0 from 0.34)."""
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
    rules = rules_for(vllm_version)
    share = rules.default_gpu_memory_utilization if utilization is None else utilization
    args = (share, reserve, tensor_parallel_size, pipeline_parallel_size)
    return estimate(gpu, figure, *args, extensible=rules.extensible_kv_cache), figure


def estimate(
    gpu: str,
    weights: WeightsFigure,
    utilization: float,
    reserve: str | None,
    tensor_parallel_size: int,
    pipeline_parallel_size: int = 1,
    *,
    extensible: bool = False,
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
        extensible=extensible,
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
