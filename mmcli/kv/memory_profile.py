"""The memory profiler's figures of a vLLM log beside mmcli's ESTIMATE of each component.

The estimate is the one ``kv-share plan --gpu`` makes (:mod:`mmcli.kv.whatif.components`), on
the log's own inputs: the GPU total the log printed (else ``--gpu``), the weights it measured
and its utilization (else the release's default). KV = total × utilization − weights −
activation peak − non-torch memory − CUDA-graph estimate. Each row shows the log's figure, the
estimate and the difference, so a user sees which part the estimate missed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from mmcli.kv.explain.profiler_lines import MemoryProfile
    from mmcli.kv.explain.report import Explanation
    from mmcli.kv.explain.vllm_log import VllmLog
    from mmcli.kv.inputs.model_source import ModelSource
    from mmcli.kv.model import ModelConfig
    from mmcli.kv.releases import EngineRules
    from mmcli.kv.whatif.components import Geometry
    from mmcli.kv.whatif.sampler import SamplerPath

GIB: Final = 2**30


@dataclass(frozen=True)
class MemoryRow:
    """One component: the log's figure and mmcli's estimate, GiB (None: not available)."""

    component: str
    logged_gib: float | None
    estimate_gib: float | None
    #: Which log line gave the figure.
    logged_from: str = ""

    @property
    def difference_gib(self) -> float | None:
        if self.logged_gib is None or self.estimate_gib is None:
            return None
        return round(self.estimate_gib - self.logged_gib, 2)


@dataclass
class MemoryComparison:
    """The log's profiler figures, the estimate's, and the inputs both were taken on."""

    rows: list[MemoryRow]
    #: Input name → (value, where it came from).
    inputs: dict[str, tuple[float | int | str, str]]
    #: Inputs the estimate lacked (then the rows it needs have no estimate).
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "estimate": "an estimate (mmcli's components, as kv-share plan --gpu)",
            "inputs": {k: {"value": v, "from": s} for k, (v, s) in self.inputs.items()},
            "rows": [asdict(r) | {"difference_gib": r.difference_gib} for r in self.rows],
            "missing": list(self.missing),
            "notes": list(self.notes),
        }


def _gib(value: int) -> float:
    return round(value / GIB, 2)


def compare_memory(
    log: VllmLog,
    doc: dict[str, Any],
    rules: EngineRules,
    gpu: str | None,
    side_file: Callable[[str], Path | None] | None = None,
) -> MemoryComparison | None:
    """The memory section of ``log`` (None when it prints no profiler figure)."""
    from mmcli.kv.whatif import components as c
    from mmcli.kv.whatif.gpus import (
        default_max_num_batched_tokens,
        default_max_num_seqs,
        resolve_gpu,
    )
    from mmcli.kv.whatif.runner import default_runner, graph_term_subtracted

    p = log.profile
    if not p.any():
        return None
    inputs: dict[str, tuple[float | int | str, str]] = {}
    missing: list[str] = []
    total: int | None = None
    if p.total_gpu_gib is not None:
        total = round(p.total_gpu_gib * GIB)
        inputs["gpu_total_gib"] = (p.total_gpu_gib, "log")
    elif gpu is not None:
        total = resolve_gpu(gpu).total_bytes
        inputs["gpu_total_gib"] = (_gib(total), "--gpu")
    else:
        missing.append("the GPU's total memory (the log does not print it: give --gpu)")
    util_arg = log.args.get("gpu_memory_utilization")
    if p.utilization is not None:
        inputs["gpu_memory_utilization"] = (p.utilization, "log")
    elif isinstance(util_arg, float):
        inputs["gpu_memory_utilization"] = (util_arg, "log")
    else:
        inputs["gpu_memory_utilization"] = (rules.default_gpu_memory_utilization, "release")
    utilization = float(inputs["gpu_memory_utilization"][0])
    if p.weights_gib is not None:
        inputs["weights_gib"] = (p.weights_gib, "log")
    else:
        missing.append("the weights (the log has no 'Model loading took' line)")
    tp = log.int_arg("tensor_parallel_size") or 1
    inputs["tensor_parallel_size"] = (
        tp,
        "log" if log.int_arg("tensor_parallel_size") else "default",
    )
    eager = log.args.get("enforce_eager") is True
    tokens = log.int_arg("max_num_batched_tokens")
    seqs = log.int_arg("max_num_seqs")
    if total is not None:
        # The named GPU where given: its defaults know the cards that get the smaller batch.
        device = resolve_gpu(gpu) if gpu is not None else total
        if tokens is None:
            tokens = default_max_num_batched_tokens(device, rules=rules)
            inputs["max_num_batched_tokens"] = (tokens, "the GPU's default")
        if seqs is None:
            seqs = default_max_num_seqs(device, rules=rules)
            inputs["max_num_seqs"] = (seqs, "the GPU's default")
    for key, value in (("max_num_batched_tokens", tokens), ("max_num_seqs", seqs)):
        if value is not None and key not in inputs:
            inputs[key] = (value, "log")
    geo = c.geometry(doc) if doc else None
    if geo is None:
        missing.append("the config's geometry (hidden, intermediate and vocab sizes)")
    runner = default_runner(doc or {}, rules)
    sampler: tuple[tuple[str, ...], int] = (("flashinfer",), 0)
    if seqs is not None:
        path = _sampler(rules, gpu, total, seqs, p.flashinfer_sampler, runner)
        sampler = path.names, path.sms
        source = "log" if p.flashinfer_sampler is not None else "the release's default"
        if p.flashinfer_sampler is None and gpu is None and total is None:
            source += " (the GPU not known)"
        inputs["sampler"] = (" then ".join(path.names), source)
    notes: list[str] = []
    activation: float | None = None
    encoder: float | None = None
    if geo is not None and tokens is not None and seqs is not None:
        peak = c.activation_peak(geo, tokens, seqs, tp, *sampler).bytes
        activation = _gib(peak)
        encoder = _encoder(log, doc, rules, runner, (tokens, seqs, tp), geo, peak, side_file, notes)
    non_torch = _gib(c.non_torch(tp).bytes)
    buffers = None
    if geo is not None and tokens and seqs:
        from mmcli.kv.whatif.budget import buffer_parts

        counted = buffer_parts(rules, doc or {}, geo, tokens, seqs, runner)
        buffers = _gib(counted[0].bytes) if counted else None
    inputs["model_runner"] = (runner, "the release's default for the config")
    graphs = (
        _gib(
            c.cuda_graphs(
                seqs, subtracted=graph_term_subtracted(runner, rules), enforce_eager=eager
            ).bytes
        )
        if seqs is not None
        else None
    )
    kv = None
    if total is not None and p.weights_gib is not None and activation is not None:
        held = p.weights_gib + activation + (encoder or 0.0) + non_torch + (buffers or 0.0)
        held += graphs or 0.0
        kv = round(total * utilization / GIB - held, 2)
    graph_logged = p.cudagraph_estimate_gib
    graph_from = p.estimate_line or "Estimated CUDA graph memory"
    if graph_logged is None and p.graph_capture_gib is not None:
        graph_logged, graph_from = p.graph_capture_gib, "Graph capturing finished"
    if graph_logged is None and p.summary_graph_gib is not None:
        graph_logged, graph_from = p.summary_graph_gib, "CUDAGraph memory (captured)"
    kv_logged = log.min_available_gib
    rows = [
        _activation_row(p, activation, graphs),
        *_encoder_row(p, encoder, doc),
        *_non_torch_rows(p, non_torch, buffers),
        MemoryRow("CUDA graphs", graph_logged, graphs, graph_from if graph_logged else ""),
        MemoryRow("KV cache", kv_logged, kv, "Available KV cache memory"),
    ]
    captured = p.graph_pool_gib if p.graph_pool_gib is not None else p.graph_capture_gib
    if captured is not None and p.cudagraph_estimate_gib is not None:
        notes.append(
            f"the graphs took {captured:.2f} GiB when captured (after the KV cache "
            f"was sized on the {p.cudagraph_estimate_gib:.2f} GiB estimate)"
        )
    if graph_from == "CUDAGraph memory (captured)" and graph_logged is not None:
        notes.append(
            f"the CUDA graphs' log figure is what the captured graphs took ({graph_logged:.2f} "
            "GiB, after the KV cache was sized); the estimate taken off the KV memory is not "
            "printed apart"
            + (", it is in the log's peak activation" if p.summary_peak_has_graphs else "")
        )
    if not rules.cudagraph_estimate_subtracted:
        notes.append(
            f"{rules.mirrored} does not subtract a CUDA-graph estimate: the graphs are captured "
            "after the KV cache is sized, in the memory utilization leaves"
        )
    if rules.extensible_kv_cache:
        notes.append(
            "the extensible KV cache's sizing margin is not in this estimate: see kv-share "
            "plan --gpu"
        )
    return MemoryComparison(rows, inputs, missing, notes)


def _sampler(
    rules: EngineRules,
    gpu: str | None,
    total: int | None,
    seqs: int,
    flashinfer: bool | None,
    runner: str,
) -> SamplerPath:
    """The samplers the profile ran: the log's sampler line, else the release's default (on a
    GPU neither named nor in the log: the default for the GPUs the release supports)."""
    from mmcli.kv.whatif.gpu_table import GPU
    from mmcli.kv.whatif.gpus import resolve_gpu
    from mmcli.kv.whatif.sampler import sampler_path

    device = resolve_gpu(gpu) if gpu is not None else GPU("the log's GPU", "log", total or 0, "log")
    return sampler_path(rules, device, seqs, flashinfer, runner)


def _activation_row(p: MemoryProfile, activation: float | None, graphs: float | None) -> MemoryRow:
    """The activation peak: the torch peak a DEBUG or V0 line printed, else the summary's
    "for peak activation" — which from 0.27 holds the CUDA-graph estimate taken off the KV
    memory (with ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` at its default): less the
    logged estimate where the log prints it, else set beside mmcli's activation + graphs."""
    if p.activation_gib() is not None or p.summary_peak_gib is None:
        activation_from = (
            "torch peak" if p.activation_peak_gib is not None else "peak_torch_memory − weights"
        )
        return MemoryRow("activation peak", p.activation_gib(), activation, activation_from)
    if not p.summary_peak_has_graphs:
        return MemoryRow("activation peak", p.summary_peak_gib, activation, "peak activation")
    if p.cudagraph_estimate_gib is not None:
        logged = round(p.summary_peak_gib - p.cudagraph_estimate_gib, 2)
        return MemoryRow(
            "activation peak", logged, activation, "peak activation − CUDA-graph estimate"
        )
    both = None if activation is None else round(activation + (graphs or 0.0), 2)
    return MemoryRow(
        "activation peak + CUDA-graph estimate", p.summary_peak_gib, both, "peak activation"
    )


def _non_torch_rows(p: MemoryProfile, estimate: float, buffers: float | None) -> list[MemoryRow]:
    """Non-torch memory: printed, or from 0.27 the summary's consumed memory less the weights,
    which holds the runner's buffers too (``buffers``: where the release counts them)."""
    consumed, weights = p.total_consumed_gib, p.weights_gib
    if p.non_torch_gib is None and consumed is not None and weights is not None:
        logged = round(consumed - weights, 2)
        if buffers is None:
            return [MemoryRow("non-torch memory", logged, estimate, "consumed memory − weights")]
        both = round(estimate + buffers, 2)
        name = "non-torch memory + runner buffers"
        return [MemoryRow(name, logged, both, "consumed memory − weights")]
    rows = [MemoryRow("non-torch memory", p.non_torch_gib, estimate, "non-torch")]
    if buffers is not None:
        rows.append(MemoryRow("runner buffers", None, buffers, ""))
    return rows


#: What a batch unlike the log's means for an estimated encoder profile.
OFF: Final = ": the encoder estimate is off"


def _encoder(
    log: VllmLog,
    doc: dict[str, Any],
    rules: EngineRules,
    runner: str,
    batch: tuple[int, int, int],
    geo: Geometry,
    text_peak: int,
    side_file: Callable[[str], Path | None] | None,
    notes: list[str],
) -> float | None:
    """The encoder profile's estimate on the log's settings (None: no encoder, or not
    estimated), with a note setting the log's dummy batch beside mmcli's."""
    from mmcli.errors import InputError
    from mmcli.kv.whatif.budget import Profile, encoder_parts
    from mmcli.kv.whatif.encoder import encoder_sections, mm_settings

    if not encoder_sections(doc):
        return None
    try:
        settings = mm_settings(
            doc,
            lambda: log.max_model_len,
            side_file,
            log.dict_args.get("limit_mm_per_prompt"),
            log.dict_args.get("mm_processor_kwargs"),
            normalize
            if isinstance(normalize := log.args.get("mm_device_do_normalize"), bool)
            else None,
            log.args.get("language_model_only") is True,
        )
    except InputError as err:
        notes.append(f"the encoder profile is not estimated: the log's {err.message}")
        return None
    skipped = log.args.get("skip_mm_profiling") is True or bool(log.profile.encoder_skipped)
    eager = log.args.get("enforce_eager") is True
    profile = Profile(doc, batch[0], batch[1], eager, skip_mm_profiling=skipped, mm=settings)
    parts = encoder_parts(profile, rules, runner, batch, geo, text_peak, notes)
    part = parts[0] if parts else None
    if part is None:
        return None
    p, got = log.profile, part.inputs
    if p.encoder_items is not None and "encoder_budget" in got:
        ours = (got["encoder_budget"], got["items"], got["modality"])
        same = ours == (p.encoder_budget_tokens, p.encoder_items, p.encoder_modality)
        notes.append(
            f"the log's encoder cache line: a budget of {p.encoder_budget_tokens:,} tokens, "
            f"{p.encoder_items} {p.encoder_modality} items; mmcli's dummy batch: "
            f"{ours[0]:,} tokens, {ours[1]} {ours[2]} items"
            + (" (the same)" if same else " (they differ" + OFF * part.estimated + ")")
        )
    return _gib(part.bytes) if part.estimated else None


def _encoder_row(p: MemoryProfile, estimate: float | None, doc: dict[str, Any]) -> list[MemoryRow]:
    """The encoder profile's row, for a multimodal config or a log that names the batch."""
    from mmcli.kv.whatif.encoder import encoder_sections

    if not encoder_sections(doc) and p.encoder_items is None:
        return []
    named = "not printed apart" if p.encoder_items is not None else ""
    return [MemoryRow("encoder profile", None, estimate, named)]


def explain_vllm_log(
    config: ModelConfig,
    log: VllmLog,
    *,
    vllm_version: str | None = None,
    doc: dict[str, Any] | None = None,
    gpu: str | None = None,
    source: ModelSource | None = None,
) -> Explanation:
    """:func:`mmcli.kv.explain.report.explain_log` with the memory section: ``doc`` (the
    config's document), ``gpu`` (when the log does not print the GPU's total) and
    ``source`` (where the model's ``preprocessor_config.json`` is) feed its estimate, on the
    rules the explanation planned with."""
    from mmcli.kv.explain.report import explain_log
    from mmcli.kv.releases import rules_for

    explanation = explain_log(config, log, vllm_version=vllm_version)
    rules = rules_for(explanation.options.vllm_version)
    side_file = None if source is None else source.side_file
    explanation.memory = compare_memory(log, doc or {}, rules, gpu, side_file)
    return explanation
