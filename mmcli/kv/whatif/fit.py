"""``--max-model-len auto``: the largest max_model_len that fits, found as the engine finds it.

vLLM (``--max-model-len auto`` / ``-1``) starts from the model's own maximum and, when one
request of that length does not fit the KV memory, binary-searches the largest length whose
request passes the start-up check, logging "Auto-fit max_model_len: reduced from X to Y". The
plan already runs that search (:func:`mmcli.kv.engine.layout.largest_max_model_len`) on the side the
engine runs; this module asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mmcli.errors import InputError
from mmcli.kv.engine.max_len import model_max_len
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import plan_kv_cache


@dataclass(frozen=True)
class AutoFit:
    """The outcome of ``--max-model-len auto``."""

    #: The length searched from: the config's maximum (or the one asked for).
    upper: int
    #: The largest length that fits (== upper when the upper one fits).
    fitted: int

    @property
    def reduced(self) -> bool:
        return self.fitted < self.upper

    def message(self) -> str:
        """What vLLM logs, or that nothing had to change."""
        if self.reduced:
            return f"Auto-fit max_model_len: reduced from {self.upper:,} to {self.fitted:,}"
        return f"Auto-fit max_model_len: {self.upper:,} fits as it is"


def fit_max_model_len(config: ModelConfig, options: PlanOptions) -> AutoFit:
    """Plan at the config's maximum length and return the largest length that fits.

    ``options.max_model_len``, when set, replaces the config's maximum as the upper bound.
    Needs the KV memory (``memory_bytes``) or ``num_gpu_blocks_override``.
    """

    upper = model_max_len(
        config, options.rules, options.max_model_len, allow_long=options.allow_long_max_model_len
    )
    if upper is None:
        raise InputError(
            f"--max-model-len auto: {config.name} gives no maximum length to start from",
            hint="set max_position_embeddings in the config, or pass a number",
        )
    if options.memory_bytes is None and options.num_gpu_blocks_override is None:
        raise InputError(
            "--max-model-len auto needs the KV memory to fit into",
            hint="pass --memory (the log's 'Available KV cache memory'), or --gpu and --weights",
        )
    plan = plan_kv_cache(config, replace(options, max_model_len=upper))
    side = plan.with_sharing if plan.engine_side == "with_sharing" else plan.without_sharing
    if side is None or side.max_concurrency is None:
        raise InputError(
            f"--max-model-len auto: cannot plan {config.name} (the sharing map has errors?)",
            hint="run kv-share plan with a number first to see the findings",
        )
    fitted = side.largest_fitting_max_model_len
    if fitted is None:
        return AutoFit(upper, upper)
    if fitted == 0:
        need = side.engine_request_bytes or 0
        raise InputError(
            f"--max-model-len auto: not even a 1-token request fits in "
            f"{(side.check_memory_bytes or 0) / 2**30:.2f} GiB of KV memory "
            f"(a {upper:,}-token request needs {need / 2**30:.2f} GiB)",
            hint="raise --memory (or --gpu-memory-utilization), or use --kv-cache-dtype fp8",
        )
    return AutoFit(upper, fitted)


def auto_max_model_len(config: ModelConfig, options: PlanOptions) -> int:
    """The largest ``max_model_len`` ≤ the config's maximum that fits (vLLM's auto-fit)."""
    return fit_max_model_len(config, options).fitted
