"""The KV memory of a ``--gpu`` plan before launch: the GPU's memory, the weights per rank
and what vLLM keeps back, as an estimate (:func:`mmcli.kv.whatif.gpus.estimate_kv_budget`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mmcli.errors import InputError
from mmcli.kv.inputs.model_source import ModelSource
from mmcli.kv.inputs.weights import WeightsFigure, is_size, weights_figure
from mmcli.kv.releases import rules_for
from mmcli.kv.whatif.encoder import MmSettings
from mmcli.kv.whatif.gpus import Estimate

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules
    from mmcli.kv.whatif.components import Component, Geometry


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
    profile: Profile | None = None,
    figure: WeightsFigure | None = None,
) -> tuple[Estimate | None, WeightsFigure | None]:
    """``--gpu``'s estimate (vLLM's, when vLLM is planned) and the weights figure it took
    (``figure``: one already read, so a second estimate reads no weights again);
    ``utilization`` None is the release's default (0.9, 0.92 from 0.20, 1.0 from 0.34)."""
    if gpu is None:
        if weights is not None or reserve is not None:
            raise InputError(
                "--weights and --reserve need --gpu", hint="e.g. --gpu H100 --weights 16GiB"
            )
        if profile is not None and profile.flashinfer_sampler is not None:
            raise InputError(
                "--flashinfer-sampler / --no-flashinfer-sampler need --gpu",
                hint="the sampler shapes only the --gpu estimate's activation peak",
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
    if figure is None:
        figure = weights_figure(weights, source, revision)
    if engine in ("sglang", "trtllm"):
        return None, figure
    rules = rules_for(vllm_version)
    share = rules.default_gpu_memory_utilization if utilization is None else utilization
    args = (share, reserve, tensor_parallel_size, pipeline_parallel_size)
    loaded, left_out, profile = _loaded(figure, weights, source, rules, profile)
    # The flat estimate first: it checks the sizes the components divide by.
    est = estimate(gpu, loaded, *args, extensible=rules.extensible_kv_cache)
    parts, notes, transient = _components(gpu, reserve, tensor_parallel_size, rules, profile)
    if parts or notes:
        from mmcli.kv.whatif.gpus import estimate_kv_budget

        est = estimate_kv_budget(
            est.gpu,
            est.utilization,
            est.weights_bytes,
            tp=tensor_parallel_size,
            pp=pipeline_parallel_size,
            weights_source=est.weights_source,
            weights_estimated=est.weights_estimated,
            extensible=rules.extensible_kv_cache,
            reserve=est.reserve_bytes,
            components=parts,
            notes=notes,
            transient=transient,
        )
    if left_out:
        est = replace(est, towers_left_out_bytes=left_out)
    return est, figure


def _loaded(
    figure: WeightsFigure,
    weights: str | None,
    source: ModelSource,
    rules: EngineRules,
    profile: Profile | None,
) -> tuple[WeightsFigure, int, Profile | None]:
    """The weights vLLM loads: the checkpoint's figure less the encoder towers it leaves out
    when every modality is off (:mod:`mmcli.kv.inputs.towers`; not a ``--weights`` figure,
    which is taken as given), the bytes left out, and the profile whose off-note says so."""
    from mmcli.kv.inputs.towers import towers_left_out

    if profile is None or figure.estimated:
        return figure, 0, profile
    if weights is not None:
        note = (
            "the --weights size is taken as given (what vLLM loads, without them)"
            if is_size(weights)
            else "the --weights checkpoint's figure counts them (give the size vLLM loads)"
        )
        return figure, 0, replace(profile, mm=replace(profile.mm, weights_note=note))
    got = towers_left_out(profile.doc, source, rules, profile.mm)
    if got is None:
        return figure, 0, profile
    if not got.bytes:
        note = (
            f"weights read from the checkpoint count them ({got.reason}; give --weights the "
            "size its log's 'Model loading took' line prints)"
        )
        return figure, 0, replace(profile, mm=replace(profile.mm, weights_note=note))
    gib = got.bytes / 2**30
    under = ", ".join(got.prefixes)
    note = (
        f"the weights figure leaves out their {gib:.2f} GiB ({got.tensors:,} tensors under "
        f"{under} in the checkpoint's safetensors headers)"
    )
    loaded = replace(
        figure,
        total_bytes=figure.total_bytes - got.bytes,
        source=f"{figure.source}, less {got.bytes:,} bytes of encoder towers not loaded",
    )
    return loaded, got.bytes, replace(profile, mm=replace(profile.mm, weights_note=note))


@dataclass(frozen=True)
class Profile:
    """What vLLM's profile run depends on: the config's document and the batch limits
    (None: the GPU's defaults)."""

    doc: dict[str, Any]
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    enforce_eager: bool = False
    kv_cache_memory_bytes: int | None = None
    #: The entry point whose batch defaults apply: ``vllm serve`` or the ``LLM`` class.
    entry: str = "serve"
    #: vLLM's ``--skip-mm-profiling``: no encoder profile.
    skip_mm_profiling: bool = False
    #: What the encoder profile's dummy batch depends on (max_model_len, limits, processor).
    mm: MmSettings = field(default_factory=MmSettings)
    #: ``VLLM_USE_FLASHINFER_SAMPLER`` (None: unset; False also stands for FlashInfer not
    #: installed): which sampler the profile runs (:mod:`mmcli.kv.whatif.sampler`).
    flashinfer_sampler: bool | None = None


def _components(
    gpu: str, reserve: str | None, tp: int, rules: EngineRules, profile: Profile | None
) -> tuple[tuple[Component, ...], tuple[str, ...], int | None]:
    """The named figures held back (empty: the flat reserve), notes, and the transient peak."""
    from mmcli.kv.whatif import components as c
    from mmcli.kv.whatif.gpus import (
        default_max_num_batched_tokens,
        default_max_num_seqs,
        resolve_gpu,
    )
    from mmcli.kv.whatif.runner import default_runner, graph_term_subtracted
    from mmcli.kv.whatif.sampler import sampler_note, sampler_path

    if profile is None:
        return (), (), None
    notes: list[str] = []
    if profile.kv_cache_memory_bytes is not None:
        notes.append(
            "--kv-cache-memory-bytes replaces this estimate: vLLM skips the memory profile "
            "and takes the size as given"
        )
    device = resolve_gpu(gpu)
    tokens = profile.max_num_batched_tokens or default_max_num_batched_tokens(
        device, entry=profile.entry, rules=rules
    )
    seqs = profile.max_num_seqs or default_max_num_seqs(device, rules=rules)
    runner = default_runner(profile.doc, rules)
    graphs = c.cuda_graphs(
        seqs,
        subtracted=graph_term_subtracted(runner, rules),
        enforce_eager=profile.enforce_eager,
        runner=runner,
    )
    if reserve is not None:
        notes.append("--reserve replaces the activation peak, non-torch and CUDA-graph figures")
        return (), tuple(notes), None
    geo = c.geometry(profile.doc)
    if geo is None:
        from mmcli.kv.whatif.class_defaults import installed

        missing = ", ".join(c.missing_keys(profile.doc)) or "intermediate_size"
        lookup = (
            "nor does transformers' config class for its model_type"
            if installed()
            else "and transformers, which fills keys from its config class, is not installed"
        )
        notes.append(
            f"the activation peak needs {missing} as a positive integer: the config does not "
            f"give it, {lookup}; the flat reserve applies"
        )
        return (), tuple(notes), None
    if geo.class_defaults:
        named = ", ".join(f"{key} {getattr(geo, _FIELD[key]):,}" for key in geo.class_defaults)
        notes.append(
            f"the config lacks {', '.join(geo.class_defaults)}: {named} from transformers' "
            f"{next(iter(geo.class_defaults.values()))} defaults, as vLLM reads the config"
        )
    path = sampler_path(rules, device, seqs, profile.flashinfer_sampler, runner)
    peak = c.activation_peak(geo, tokens, seqs, tp, path.names, path.sms)
    if peak.inputs["sampler_bytes"] >= peak.inputs["forward_bytes"]:
        notes.append(sampler_note(path, seqs, geo.vocab))
    encoder = encoder_parts(profile, rules, runner, (tokens, seqs, tp), geo, peak.bytes, notes)
    buffers = buffer_parts(rules, profile.doc, geo, tokens, seqs, runner)
    parts = (peak, *encoder, c.non_torch(tp), *buffers, graphs)
    return parts, tuple(notes), peak.bytes + sum(e.bytes for e in encoder)


def buffer_parts(
    rules: EngineRules,
    doc: dict[str, Any],
    geo: Geometry,
    tokens: int,
    seqs: int,
    runner: str,
) -> tuple[Component, ...]:
    """The model runner's buffers, where the release counts them against the KV cache
    (``runner_buffers_counted``); a multimodal config's V2 runner keeps an embeddings buffer."""
    from mmcli.kv.whatif.components import runner_buffers
    from mmcli.kv.whatif.encoder import encoder_sections

    if not rules.runner_buffers_counted:
        return ()
    return (runner_buffers(geo, tokens, seqs, runner, bool(encoder_sections(doc))),)


def encoder_parts(
    profile: Profile,
    rules: EngineRules,
    runner: str,
    batch: tuple[int, int, int],
    geo: Geometry,
    text_peak: int,
    notes: list[str],
) -> tuple[Component, ...]:
    """The encoder profile of a multimodal config (:mod:`mmcli.kv.whatif.encoder`); none under
    ``--skip-mm-profiling`` or where the release's model runner does not profile it."""
    from mmcli.kv.whatif.encoder import encoder_profile, encoder_sections

    if not encoder_sections(profile.doc):
        return ()
    if profile.skip_mm_profiling:
        notes.append("--skip-mm-profiling: vLLM's profile run leaves out the multimodal encoder")
        return ()
    if runner == "v2" and not rules.v2_encoder_profile:
        notes.append(
            f"vLLM {rules.release}'s Model Runner V2 does not profile the multimodal encoder "
            "(its profile_run runs the text forward only)"
        )
        return ()
    tokens, seqs, tp = batch
    part, note = encoder_profile(
        profile.doc,
        rules,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        tp=tp,
        dtype_bytes=geo.dtype_bytes,
        text_peak=text_peak,
        settings=profile.mm,
        enforce_eager=profile.enforce_eager,
    )
    if note is not None:
        notes.append(note)
    return () if part is None else (part,)


#: Config key → the Geometry field it fills.
_FIELD = {
    "hidden_size": "hidden",
    "intermediate_size": "intermediate",
    "vocab_size": "vocab",
    "num_attention_heads": "heads",
    "num_key_value_heads": "kv_heads",
    "head_dim": "head_dim",
    "num_experts_per_tok": "topk",
    "moe_intermediate_size": "moe_intermediate",
}


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
