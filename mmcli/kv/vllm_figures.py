"""A vLLM plan's engine-side figures as :class:`~mmcli.kv.figures.EngineFigures`, so that
``kv-share plan --engine all`` can set them beside SGLang's and TensorRT-LLM's."""

from __future__ import annotations

from mmcli.kv.figures import EngineFigures, Figure
from mmcli.kv.result import ENGINE_CODES, KVPlan


def vllm_figures(plan: KVPlan, *, estimate: str | None) -> EngineFigures:
    """The side the engine runs, labelled vLLM and its release; ``estimate`` is why the
    budget is one (``--gpu``), or None for ``--memory``."""
    side = plan.with_sharing if plan.engine_side == "with_sharing" else plan.without_sharing
    release = plan.rules.release
    if side is None:
        return EngineFigures(
            "vllm", release, {}, "not planned", "", notes=["the plan has map errors"]
        )
    memory = plan.options.memory_bytes
    figures = {
        "bytes_per_token": Figure(side.bytes_per_token),
        "block_tokens": Figure(side.block_size),
        "budget_bytes": Figure(memory, estimate),
        "pool_tokens": Figure(side.max_tokens, estimate),
        "blocks": Figure(side.num_blocks, estimate),
        "max_concurrency": Figure(side.max_concurrency, estimate),
    }
    source = "--memory: 'Available KV cache memory'" if estimate is None else "estimate from --gpu"
    reserves = "1 − gpu_memory_utilization of the GPU, the weights and the profiled activation "
    reserves += "peak; the pool is the rest"
    refusal = None
    for finding in plan.findings:
        if finding.code in ENGINE_CODES:
            refusal = f"vLLM refuses to start: {finding.message}"
    notes = [] if side.max_tokens is None else ["pool tokens: the 'GPU KV cache size' it prints"]
    kept = "1−util + peak"
    return EngineFigures(
        "vllm", release, figures, source, reserves, notes=notes, refusal=refusal, kept_back=kept
    )
