"""One KV plan as a library call: ``plan_run(PlanRequest(...))`` → :class:`PlanRun`, what
``mmcli kv-share plan`` prints (its ``--format json`` document is ``run.to_json()``).

The model is resolved and its config read once, and handed to every engine planned. A run is
one of three kinds: a vLLM plan (:attr:`PlanRun.plan`, with its aliasing check), a sweep
(:attr:`PlanRun.sweep`), or engines side by side (:attr:`PlanRun.engines`: ``--engine
sglang``, ``trtllm`` or ``all``). Bad input raises :class:`~mmcli.errors.InputError`; findings
(a broken map, an engine that would not start) are in the result and its ``exit_code``.

>>> from mmcli.kv import PlanRequest, plan_run
>>> run = plan_run(PlanRequest("samples/kv/qwen3-14b-like.json", memory="20GiB"))
>>> run.plan.without_sharing.max_concurrency  # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mmcli.errors import EXIT_FINDINGS, EXIT_OK, InputError
from mmcli.kv.request import PlanRequest

if TYPE_CHECKING:
    from mmcli.kv.aliasing import AliasingReport
    from mmcli.kv.figures import EngineFigures
    from mmcli.kv.inputs.model_source import ModelSource
    from mmcli.kv.inputs.weights import WeightsFigure
    from mmcli.kv.model import ModelConfig
    from mmcli.kv.options import PlanOptions
    from mmcli.kv.result import KVPlan
    from mmcli.kv.whatif.budget import Profile
    from mmcli.kv.whatif.gpus import Estimate
    from mmcli.kv.whatif.sweep import Sweep


@dataclass
class PlanRun:
    """What one request gave: the plan, the sweep or the engines' figures, and its notes."""

    request: PlanRequest
    source: ModelSource
    #: The vLLM planner's options as planned (the ``--gpu`` budget and auto-fit applied).
    options: PlanOptions
    #: The config as read (None: a single other engine read it for its own figures).
    model: ModelConfig | None = None
    #: ``--gpu``'s estimate of vLLM's KV memory, and the weights it took.
    estimate: Estimate | None = None
    weights: WeightsFigure | None = None
    plan: KVPlan | None = None
    #: The aliasing check of the plan (None: the map has errors, or nothing was planned).
    aliasing: AliasingReport | None = None
    sweep: Sweep | None = None
    #: The engines' figures, one per column (``--engine sglang``, ``trtllm`` or ``all``).
    engines: list[EngineFigures] = field(default_factory=list)
    #: Lines for the user beside the result (the auto-fit of max_model_len).
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0, or 1 for findings: a broken map, an engine that would not start, aliasing."""
        if self.engines:
            return EXIT_FINDINGS if any(r.refusal for r in self.engines) else EXIT_OK
        if self.sweep is not None:
            return self.sweep.exit_code
        assert self.plan is not None
        failed = self.aliasing is not None and not self.aliasing.verified
        return EXIT_FINDINGS if self.plan.has_errors or failed else EXIT_OK

    def deployment(self) -> dict[str, Any] | None:
        """The whole deployment's figures when it spans more than one GPU (tp × pp × dp):
        per GPU (the plan), per replica (tp × pp GPUs: the engine's KV tokens and
        concurrency, which tensor and pipeline ranks hold together) and in all (× dp)."""
        request, plan = self.request, self.plan
        per_replica = request.tensor_parallel_size * request.pipeline_parallel_size
        replicas = request.data_parallel_size
        if plan is None or per_replica * replicas == 1:
            return None
        side = plan.with_sharing if plan.engine_side == "with_sharing" else plan.without_sharing
        tokens = side.max_tokens if side is not None else None
        concurrency = side.max_concurrency if side is not None else None
        return {
            "gpus": per_replica * replicas,
            "replicas": replicas,
            "gpus_per_replica": per_replica,
            "kv_tokens_per_replica": tokens,
            "kv_tokens": None if tokens is None else tokens * replicas,
            "max_concurrency_per_replica": concurrency,
            "max_concurrency": None if concurrency is None else concurrency * replicas,
        }

    def to_json(self, *, lazy_layers: bool = False) -> dict[str, Any]:
        """The ``--format json`` document (``lazy_layers``: a plan's layers as a lazy list,
        for a streaming writer), with the serve line's settings when there is one."""
        doc = self._document(lazy_layers)
        if (serve := self.request.resolved.serve) is not None:
            doc["serve"] = serve.to_json()
        return doc

    def _document(self, lazy_layers: bool) -> dict[str, Any]:
        if self.engines:
            engines = [r.to_json() for r in self.engines]
            return {
                "model": self.source.config.name,
                "engines": engines,
                "exit_code": self.exit_code,
            }
        if self.sweep is not None:
            doc = {"sweep": self.sweep.to_json(), "exit_code": self.sweep.exit_code}
            if self.estimate is not None:
                doc["memory_estimate"] = self.estimate.to_json()
            return doc
        assert self.plan is not None
        verified = self.aliasing.verified if self.aliasing is not None else None
        doc = self.plan.to_json(
            aliasing_verified=verified, exit_code=self.exit_code, lazy_layers=lazy_layers
        )
        if self.estimate is not None:
            doc["memory_estimate"] = self.estimate.to_json()
        doc["model_source"] = self.source.to_json()
        if (deployment := self.deployment()) is not None:
            doc["deployment"] = deployment
        return doc


def refuse_deepseek_v4_on_sglang(path: Any, release: str | None) -> None:
    """SGLang's own refusal of a DeepSeek-V4 config (mmcli.kv.sglang.dsv4), before the config
    parser's, which names vLLM's caches."""
    from mmcli.kv.hf.dsv4 import is_deepseek_v4, layer_ratios
    from mmcli.kv.inputs.layer_config import read_document
    from mmcli.kv.sglang.dsv4 import sglang_refusal

    doc = read_document(path)
    nested = doc.get("text_config")
    text = nested if isinstance(nested, dict) else doc
    if is_deepseek_v4(doc, text):
        raise sglang_refusal(layer_ratios(text), release, str(path))


def _max_len(request: PlanRequest, model: ModelConfig) -> int | None:
    """The ``max_model_len`` vLLM profiles with: the requested length, else the model's (also
    for ``auto``, which vLLM fits after profiling); None where the plan will refuse it."""
    from mmcli.kv.engine.max_len import model_max_len
    from mmcli.kv.releases import rules_for

    length = request.resolved.max_model_len
    requested = length if isinstance(length, int) and length > 0 else None
    try:
        return model_max_len(
            model,
            rules_for(request.vllm_version),
            requested,
            allow_long=request.allow_long_max_model_len,
        )
    except InputError:
        return None


def _counts_an_encoder(estimate: Estimate) -> bool:
    """Whether the estimate takes off an estimated multimodal encoder profile."""
    return any(c.name == "encoder profile" and c.estimated for c in estimate.components)


def _refuse_encoder_flags(estimate: Estimate, flags: tuple[str, ...]) -> None:
    """The encoder profile is estimated for a tensor-parallel encoder on the default vision
    attention: a serve line that changes either is refused where the profile is estimated."""
    if _counts_an_encoder(estimate):
        raise InputError(
            f"{', '.join(flags)} on the serve line change(s) the multimodal encoder's forward "
            "that the --gpu estimate's encoder profile counts (a tensor-parallel encoder on "
            "the default vision attention)",
            hint="plan with --memory (the KV memory the engine logs), or without the flag",
        )


def _refuse_length_dependent_estimate(
    estimate: Estimate,
    profile: Profile,
    lengths: tuple[int, ...],
    budget: Callable[[Profile], tuple[Estimate | None, WeightsFigure | None]],
) -> None:
    """A ``--gpu`` estimate swept over max_model_len holds only where vLLM's profile run does
    not change with the length: the encoder profile's dummy items can (Qwen2-VL's video of
    most frames, the items a prompt holds), so each length is estimated and a sweep whose
    estimate moves is refused, naming the lengths."""
    from dataclasses import replace as changed

    if not _counts_an_encoder(estimate):
        return
    moved = []
    for length in lengths:
        at = changed(profile, mm=changed(profile.mm, max_model_len=length))
        other, _ = budget(at)
        if other is not None and other.kv_bytes != estimate.kv_bytes:
            moved.append(f"{length:,} ({other.kv_bytes / 2**30:.2f} GiB)")
    if moved:
        raise InputError(
            f"--sweep max-model-len with --gpu: the encoder profile vLLM runs depends on "
            f"max_model_len, so the estimated KV memory is not one figure "
            f"({estimate.kv_bytes / 2**30:.2f} GiB at {profile.mm.max_model_len or 0:,}; "
            f"{', '.join(moved[:4])})",
            hint="plan each length with --gpu and --max-model-len, sweep with --memory, or "
            "take the encoder out as vLLM would (--limit-mm-per-prompt, --skip-mm-profiling)",
        )


def plan_run(request: PlanRequest, *, inputs_read: Callable[[], None] | None = None) -> PlanRun:
    """Plan ``request`` (see the module docstring). ``inputs_read`` is called once every input
    (the config, the map, the weights) has been read, before any planning: where a caller
    checks its output paths against the inputs."""
    from mmcli.kv.inputs.layer_config import load_document
    from mmcli.kv.inputs.model_source import resolve_model
    from mmcli.kv.whatif.budget import Profile, gpu_budget
    from mmcli.kv.whatif.encoder import mm_settings

    got = request.resolved
    source = resolve_model(request.model, request.revision)
    memory = request.memory
    if got.kv_cache_memory_bytes is not None:
        _check_kv_cache_memory_bytes(request)
    if got.engines.engine == "sglang":
        refuse_deepseek_v4_on_sglang(source.config, got.engines.sglang_version)
    model, doc = load_document(source.config)
    mm = mm_settings(
        doc,
        lambda: _max_len(request, model),
        source.side_file,
        request.limit_mm_per_prompt,
        request.mm_processor_kwargs,
        request.mm_device_do_normalize,
        request.language_model_only,
    )
    profile = Profile(
        doc,
        request.max_num_batched_tokens,
        request.max_num_seqs,
        request.enforce_eager,
        got.kv_cache_memory_bytes,
        request.entry,
        request.skip_mm_profiling,
        mm,
        request.flashinfer_sampler,
    )

    def budget(
        profile: Profile, figure: WeightsFigure | None = None
    ) -> tuple[Estimate | None, WeightsFigure | None]:
        return gpu_budget(
            request.gpu,
            None if memory is None else str(memory),
            request.weights,
            request.reserve,
            source,
            request.revision,
            got.engines.engine,
            request.gpu_memory_utilization,
            request.tensor_parallel_size,
            request.pipeline_parallel_size,
            request.vllm_version,
            profile,
            figure,
        )

    estimate, weights = budget(profile)
    if estimate is not None and got.serve is not None and got.serve.encoder:
        _refuse_encoder_flags(estimate, got.serve.encoder)
    if estimate is not None and got.sweep is not None and got.sweep.parameter == "max-model-len":
        again = functools.partial(budget, figure=weights)  # the weights read once
        _refuse_length_dependent_estimate(estimate, profile, got.sweep.values, again)
    options = _options(request, estimate)
    if got.engines.engine in ("sglang", "trtllm"):
        from mmcli.kv.side_by_side import engine_figures

        figures = engine_figures(got.engines, model, doc, options, request.gpu, weights)
        run = PlanRun(request, source, options, model, estimate, weights, engines=figures)
        return run
    device = _device(request.device)
    map_findings = []
    if request.map_path is not None:
        from pathlib import Path

        from mmcli.kv.inputs.map_file import apply_map, load_map

        map_findings = apply_map(model, load_map(Path(request.map_path)))
    if inputs_read is not None:
        inputs_read()
    run = PlanRun(request, source, options, model, estimate, weights)
    if got.max_model_len == "auto":
        from mmcli.kv.whatif.fit import fit_max_model_len

        fit = fit_max_model_len(model, options)
        run.notes.append(fit.message())
        run.options = options = replace(options, max_model_len=fit.fitted)
    if got.sweep is not None:
        from mmcli.kv.whatif.sweep import run_sweep

        run.sweep = run_sweep(model, options, got.sweep, map_findings)
        return run
    from mmcli.kv.aliasing import check_aliasing
    from mmcli.kv.plan import plan_kv_cache

    run.plan = plan = plan_kv_cache(model, options, extra_findings=map_findings)
    run.aliasing = None if plan.has_map_errors else check_aliasing(plan, device)
    if got.engines.engine == "all":
        from mmcli.kv.side_by_side import engine_figures

        run.engines = engine_figures(
            got.engines, model, doc, options, request.gpu, weights, vllm=plan
        )
    return run


def _options(request: PlanRequest, estimate: Estimate | None) -> PlanOptions:
    """The vLLM planner's options: the request's, the ``--gpu`` budget, the batch default."""
    from mmcli.kv.options import DEFAULT_MAX_NUM_BATCHED_TOKENS, PlanOptions

    got = request.resolved
    batched = request.max_num_batched_tokens
    if batched_default := batched is None:
        from mmcli.kv.releases import rules_for
        from mmcli.kv.whatif.gpus import default_max_num_batched_tokens, resolve_gpu

        gpu = request.gpu
        rules = rules_for(request.vllm_version)
        batched = (
            default_max_num_batched_tokens(resolve_gpu(gpu), entry=request.entry, rules=rules)
            if gpu is not None
            else DEFAULT_MAX_NUM_BATCHED_TOKENS
        )
    memory = request.memory
    memory_bytes = memory if isinstance(memory, int) else None
    if estimate is not None:
        memory_bytes = estimate.memory_bytes()
    if got.kv_cache_memory_bytes is not None:
        memory_bytes = got.kv_cache_memory_bytes
    return PlanOptions(
        block_size=request.block_size,
        kv_dtype=request.kv_cache_dtype,
        max_model_len=got.max_model_len if isinstance(got.max_model_len, int) else None,
        memory=memory if isinstance(memory, str) else None,
        memory_bytes=memory_bytes,
        tensor_parallel_size=request.tensor_parallel_size,
        pipeline_parallel_size=request.pipeline_parallel_size,
        pp_layer_partition=got.partition,
        max_num_batched_tokens=batched,
        vllm_version=request.vllm_version,
        async_scheduling=request.async_scheduling,
        enable_prefix_caching=request.enable_prefix_caching,
        mamba_ssm_cache_dtype=request.mamba_ssm_cache_dtype,
        disable_hybrid_kv_cache_manager=request.disable_hybrid_kv_cache_manager,
        chunked_local_attn_hybrid=request.chunked_local_attn_hybrid,
        strict=request.strict,
        num_draft_layers=got.num_draft_layers,
        num_gpu_blocks_override=request.num_gpu_blocks_override,
        mtp=got.mtp,
        num_speculative_tokens=got.num_speculative_tokens,
        max_num_seqs=request.max_num_seqs,
        enforce_eager=request.enforce_eager,
        allow_long_max_model_len=request.allow_long_max_model_len,
        max_num_batched_tokens_default=batched_default,
    )


def _check_kv_cache_memory_bytes(request: PlanRequest) -> None:
    """``--kv-cache-memory-bytes`` is the KV memory itself: positive, and not beside
    ``--memory`` (which says the same)."""
    from mmcli.errors import InputError

    if request.memory is not None:
        raise InputError(
            "give --memory or --kv-cache-memory-bytes, not both",
            hint="both are the KV memory per GPU; --kv-cache-memory-bytes is vLLM's own flag",
        )
    size = request.resolved.kv_cache_memory_bytes
    assert size is not None
    if size <= 0:
        raise InputError(
            f"--kv-cache-memory-bytes must be positive, got {size}",
            hint="e.g. --kv-cache-memory-bytes 21474836480 (20 GiB)",
        )


def _device(spec: str) -> Any:
    """Where the aliasing check allocates: ``"meta"`` (no torch), or a present device."""
    if spec.strip().lower() == "meta":
        return "meta"
    # Only a real device needs torch; the default meta check stays import-free and fast.
    from mmcli.devices import resolve_device

    device = resolve_device(spec, allow_meta=True)
    return "meta" if device.type == "meta" else device
