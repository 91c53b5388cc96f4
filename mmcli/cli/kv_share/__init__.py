"""``mmcli kv-share plan``: validate a cross-layer KV-sharing map and plan KV memory."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from mmcli.cli._boundary import guarded
from mmcli.cli._output import OutputFormat, emit_json, stdout
from mmcli.cli.kv_share import engines as eng
from mmcli.cli.kv_share import vllm_options as vo
from mmcli.cli.kv_share.explain import register_explain
from mmcli.cli.kv_share.outputs import Notes, check_outputs
from mmcli.cli.options import FormatOpt, RevisionOpt, flag
from mmcli.errors import EXIT_FINDINGS, EXIT_OK, InputError
from mmcli.text import printable

app = typer.Typer(
    help="Cross-layer KV-cache sharing: validate maps and plan KV memory.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXAMPLE = (
    "Example: mmcli kv-share plan samples/kv/gemma3n-e2b-like.json --memory 20GiB "
    "--max-model-len 32768"
)


@app.command("plan", epilog=EXAMPLE, no_args_is_help=True)
@guarded
def plan(
    config: Annotated[
        str,
        typer.Argument(
            metavar="MODEL",
            help="A Hugging Face config.json or an mmcli layer config (.json, .toml), a local "
            "model folder, or a Hub repo id (org/name; a local path wins).",
            show_default=False,
        ),
    ],
    revision: RevisionOpt = None,
    map_path: Annotated[
        Path | None,
        typer.Option(
            "--map",
            help="A JSON object {layer: target} that replaces the map the config implies.",
        ),
    ] = None,
    kv_dtype: Annotated[
        str,
        typer.Option(
            "--kv-cache-dtype",
            "--kv-dtype",
            help="auto (the config's dtype), bfloat16, float16, float32, fp8 (fp8_e4m3, "
            "fp8_e5m2), fp8_ds_mla (DeepSeek MLA).",
        ),
    ] = "auto",
    block_size: Annotated[
        int | None,
        typer.Option("--block-size", help="Tokens per KV block (default: the config's, else 16)."),
    ] = None,
    max_model_len: Annotated[
        str | None,
        typer.Option(
            "--max-model-len",
            help="Sequence length (default: the model's, as vLLM derives it); auto (or -1): "
            "the largest that fits the KV memory, found as vLLM finds it.",
        ),
    ] = None,
    allow_long_max_model_len: Annotated[
        bool,
        flag("--allow-long-max-model-len", help="VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."),
    ] = False,
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-num-batched-tokens",
            help="The engine's prefill chunk; sliding layers reserve blocks for it (default: "
            "8192, or vllm serve's default for --gpu).",
            show_default=False,
        ),
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory",
            help="KV-cache memory per GPU: 20GiB, 80GB, 512MiB or bytes. Adds blocks, "
            "tokens and concurrency.",
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu",
            help="Estimate the KV memory from a GPU (H100, H200, A100-80GB, L40S, RTX4090, … or "
            "a size such as 79GiB) instead of --memory.",
        ),
    ] = None,
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            help="With --gpu: the weights, a size with a byte unit (140GB, 130GiB), an index "
            "/ .safetensors file, a folder or a repo id (default: the model's own, else an "
            "ESTIMATE from the config).",
        ),
    ] = None,
    gpu_memory_utilization: Annotated[
        float | None,
        typer.Option(
            "--gpu-memory-utilization",
            help="With --gpu: the share of GPU memory vLLM uses (default 0.9).",
            show_default=False,
        ),
    ] = None,
    reserve: Annotated[
        str | None,
        typer.Option(
            "--reserve",
            help="With --gpu: activation and CUDA-graph memory held back (default 2GiB; 0: none).",
        ),
    ] = None,
    sweep: Annotated[
        str | None,
        typer.Option(
            "--sweep",
            help="Plan over a range: max-model-len=4K..128K or memory=8GiB..80GiB "
            "(:N points, or :x2 geometric); a table and a chart of concurrency and KV tokens.",
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="With --sweep: also draw it as FILE.png or FILE.svg."),
    ] = None,
    tensor_parallel_size: Annotated[
        int,
        typer.Option(
            "--tensor-parallel-size",
            "-tp",
            help="Split KV heads (and states) across this many ranks; figures are per GPU.",
        ),
    ] = 1,
    pipeline_parallel_size: Annotated[
        int,
        typer.Option(
            "--pipeline-parallel-size",
            "-pp",
            help="Pipeline stages: layers split as the engine splits them; each stage sizes "
            "its own pool and the smallest block count wins (vLLM 0.11+ rules).",
        ),
    ] = 1,
    pp_layer_partition: Annotated[
        str | None,
        typer.Option(
            "--pp-layer-partition",
            help="Decoder layers per stage, comma-separated (vLLM's VLLM_PP_LAYER_PARTITION), "
            "e.g. 8,12,12.",
        ),
    ] = None,
    vllm_version: Annotated[
        str | None,
        typer.Option(
            "--vllm-version",
            help="Plan with the rules of this vLLM release (0.10 … 0.34; default: the newest "
            "mirrored). Older releases take the oldest rules mirrored.",
        ),
    ] = None,
    async_scheduling: Annotated[
        bool,
        flag(
            "--async-scheduling/--no-async-scheduling",
            help="Async scheduling (vLLM's default) keeps 2 batches in flight: from 0.26 a "
            "sliding window reserves blocks for both.",
        ),
    ] = True,
    enable_prefix_caching: Annotated[
        bool | None,
        flag(
            "--enable-prefix-caching/--no-enable-prefix-caching",
            help="Prefix caching: hybrid models then keep 2 states per request (default: the "
            "release's default, on from 0.26).",
            show_default=False,
        ),
    ] = None,
    mamba_ssm_cache_dtype: Annotated[
        str,
        typer.Option(
            "--mamba-ssm-cache-dtype",
            help="dtype of the SSM / recurrent state (auto: the config's, else the model's).",
        ),
    ] = "auto",
    disable_hybrid: Annotated[
        bool,
        flag(
            "--disable-hybrid-kv-cache-manager",
            help="Plan sliding and chunked layers as full attention (one group), as vLLM does "
            "with this flag.",
        ),
    ] = False,
    chunked_hybrid: vo.ChunkedHybridOpt = None,
    num_draft_layers: vo.DraftLayersOpt = 0,
    mtp: vo.MtpOpt = False,
    num_speculative_tokens: vo.SpeculativeTokensOpt = None,
    speculative_config: vo.SpeculativeConfigOpt = None,
    enforce_eager: vo.EnforceEagerOpt = False,
    max_num_seqs: vo.MaxNumSeqsOpt = None,
    num_gpu_blocks_override: Annotated[
        int | None,
        typer.Option(
            "--num-gpu-blocks-override",
            help="Plan with this many KV blocks, whatever the memory (as vLLM's option).",
        ),
    ] = None,
    strict: Annotated[
        bool,
        flag(
            "--strict",
            help="Treat sharing the engine accepts but that is likely a mistake (a sliding "
            "layer reading a full layer's cache) as an error.",
        ),
    ] = False,
    device: Annotated[
        str,
        typer.Option(
            "--device",
            help="Where the aliasing check allocates: meta (nothing), cpu, cuda or cuda:N.",
        ),
    ] = "meta",
    emit_map: Annotated[
        Path | None,
        typer.Option("--emit-map", help="Write the resolved map {layer: target} as JSON here."),
    ] = None,
    all_layers: Annotated[
        bool, flag("--all-layers", help="One table row per layer (no folding).")
    ] = False,
    engine: eng.EngineOpt = "vllm",
    sglang_version: eng.SglangVersionOpt = None,
    trtllm_version: eng.TrtllmVersionOpt = None,
    mem_fraction_static: eng.MemFractionOpt = None,
    page_size: eng.PageSizeOpt = None,
    tokens_per_block: eng.TokensPerBlockOpt = None,
    free_gpu_memory_fraction: eng.FreeFractionOpt = None,
    output_format: FormatOpt = OutputFormat.table,
) -> None:
    """Validate a KV-sharing map and plan the KV cache as the engine would build it.

    Exit 0 when the map is valid, 1 when it has errors, 2 for bad input.
    """
    from mmcli.cli.kv_share.budget import estimate_panel, gpu_budget, parse_partition
    from mmcli.kv.aliasing import check_aliasing
    from mmcli.kv.engine.max_len import parse_max_model_len
    from mmcli.kv.inputs.layer_config import load_config
    from mmcli.kv.inputs.map_file import apply_map, load_map, write_map
    from mmcli.kv.inputs.model_source import resolve_model
    from mmcli.kv.options import PlanOptions
    from mmcli.kv.plan import plan_kv_cache
    from mmcli.kv.speculative import speculative_options
    from mmcli.kv.whatif.sweep import parse_sweep

    partition = parse_partition(pp_layer_partition) if pp_layer_partition is not None else None
    speculative = (speculative_config, mtp, num_speculative_tokens, num_draft_layers)
    mtp, num_speculative_tokens, num_draft_layers = speculative_options(*speculative)
    length = parse_max_model_len(max_model_len, vllm_version)
    engines = eng.EngineArgs(
        engine,
        sglang_version,
        trtllm_version,
        mem_fraction_static,
        page_size,
        tokens_per_block,
        free_gpu_memory_fraction,
    )
    given = {"--map": map_path, "--sweep": sweep, "--emit-map": emit_map}
    eng.refuse_vllm_only(engines, {**given, "--max-model-len auto": length == "auto"})
    vllm_args: dict[str, object] = {"--block-size": block_size, "--vllm-version": vllm_version}
    vllm_args |= {"--num-speculative-tokens": num_speculative_tokens}
    vllm_args |= {"--enable-prefix-caching": enable_prefix_caching, "--max-num-seqs": max_num_seqs}
    vllm_args |= {"--num-gpu-blocks-override": num_gpu_blocks_override, "--strict": strict}
    vllm_args |= {"--disable-hybrid-kv-cache-manager": disable_hybrid, "--mtp": mtp}
    vllm_args |= {"--speculative-config": speculative[0], "--enforce-eager": enforce_eager}
    vllm_args |= {"--gpu-memory-utilization": gpu_memory_utilization}
    vllm_args |= vo.vllm_only(chunked_hybrid)
    if engines.engine in ("sglang", "trtllm"):  # with all, they shape vLLM's column
        eng.refuse_vllm_only(engines, {**vllm_args, "--num-draft-layers": num_draft_layers})
    if emit_map is not None and sweep is not None:
        raise InputError(
            "--emit-map is not written by a --sweep (one map, many plans)",
            hint="emit the map from the same command without --sweep",
        )
    if plot is not None and sweep is None:
        raise InputError("--plot needs --sweep", hint="e.g. --sweep max-model-len=4K..128K")
    spec = parse_sweep(sweep) if sweep is not None else None  # refused before any planning
    source = resolve_model(config, revision)
    est, figure = gpu_budget(
        gpu, memory, weights, reserve, source, revision, engines.engine, gpu_memory_utilization,
        tensor_parallel_size, pipeline_parallel_size,
    )  # fmt: skip
    if batched_default := max_num_batched_tokens is None:
        from mmcli.kv.options import DEFAULT_MAX_NUM_BATCHED_TOKENS
        from mmcli.kv.whatif.gpus import default_max_num_batched_tokens, resolve_gpu

        max_num_batched_tokens = (
            default_max_num_batched_tokens(resolve_gpu(gpu))
            if gpu is not None
            else DEFAULT_MAX_NUM_BATCHED_TOKENS
        )
    options = PlanOptions(
        block_size=block_size,
        kv_dtype=kv_dtype,
        max_model_len=length if isinstance(length, int) else None,
        memory=memory,
        memory_bytes=est.memory_bytes() if est is not None else None,
        tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size,
        pp_layer_partition=partition,
        max_num_batched_tokens=max_num_batched_tokens,
        vllm_version=vllm_version,
        async_scheduling=async_scheduling,
        enable_prefix_caching=enable_prefix_caching,
        mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
        disable_hybrid_kv_cache_manager=disable_hybrid,
        chunked_local_attn_hybrid=chunked_hybrid,
        strict=strict,
        num_draft_layers=num_draft_layers,
        num_gpu_blocks_override=num_gpu_blocks_override,
        mtp=mtp,
        num_speculative_tokens=num_speculative_tokens,
        max_num_seqs=max_num_seqs,
        enforce_eager=enforce_eager,
        allow_long_max_model_len=allow_long_max_model_len,
        max_num_batched_tokens_default=batched_default,
    )
    if engines.engine in ("sglang", "trtllm"):
        raise typer.Exit(eng.run_engines(engines, source, options, gpu, figure, output_format))
    target_device: Any = "meta"
    if device.strip().lower() != "meta":
        # Only a real device needs torch; the default meta check stays import-free and fast.
        from mmcli.devices import resolve_device

        target_device = resolve_device(device, allow_meta=True)
        if target_device.type == "meta":
            target_device = "meta"

    model = load_config(source.config)
    map_findings = apply_map(model, load_map(map_path)) if map_path is not None else []
    check_outputs(emit_map, plot)  # every input is read (and protected): before planning
    notes = Notes()  # said once the command has worked, never before an error
    if length == "auto":
        from mmcli.kv.whatif.fit import fit_max_model_len

        fit = fit_max_model_len(model, options)
        notes.append(fit.message())
        options = replace(options, max_model_len=fit.fitted)
    if spec is not None:
        from mmcli.cli.kv_share.chart import sweep_command

        sweep_command(model, options, spec, plot, output_format, est, notes, map_findings)
    result = plan_kv_cache(model, options, extra_findings=map_findings)
    aliasing = None if result.has_map_errors else check_aliasing(result, target_device)
    if emit_map is not None:
        written = write_map(emit_map, result.sharing_map())
        notes.append(f"wrote {written} map entries to {printable(str(emit_map))}")
    if engines.engine == "all":
        code = eng.run_engines(engines, source, options, gpu, figure, output_format, vllm=result)
        notes.say()
        raise typer.Exit(code)
    exit_code = EXIT_FINDINGS if result.has_errors else EXIT_OK
    if aliasing is not None and not aliasing.verified:
        exit_code = EXIT_FINDINGS
    if output_format is OutputFormat.json:
        verified = aliasing.verified if aliasing is not None else None
        doc = result.to_json(aliasing_verified=verified, exit_code=exit_code, lazy_layers=True)
        if est is not None:
            doc["memory_estimate"] = est.to_json()
        doc["model_source"] = source.to_json()
        emit_json(doc)
    else:
        from rich.markup import escape

        from mmcli.cli.kv_share.render import render_plan

        if source.kind != "file":
            stdout().print(f"model: {escape(source.label)}", highlight=False)
        if est is not None:
            stdout().print(estimate_panel(est))
        render_plan(result, aliasing, all_layers=all_layers)
    notes.say()
    raise typer.Exit(exit_code)


register_explain(app)  # `kv-share explain` lives in its own module
