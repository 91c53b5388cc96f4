"""``mmcli kv-share plan``: validate a cross-layer KV-sharing map and plan KV memory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core

from mmcli.cli._boundary import guarded
from mmcli.cli._output import OutputFormat, emit_json, stdout
from mmcli.cli.kv_share import engines as eng
from mmcli.cli.kv_share import vllm_options as vo
from mmcli.cli.kv_share.explain import register_explain
from mmcli.cli.kv_share.outputs import Notes, check_outputs
from mmcli.cli.kv_share.serve_line import ServeLineCommand, refuse_twice
from mmcli.cli.options import (
    ENGINE,
    INPUT,
    MEMORY,
    OUTPUT,
    PARALLEL,
    FormatOpt,
    RevisionOpt,
    flag,
)
from mmcli.errors import InputError
from mmcli.kv import first_release, mirrored_range, value_history
from mmcli.text import plural, printable

if TYPE_CHECKING:
    from mmcli.kv import PlanRun

app = typer.Typer(
    help="Cross-layer KV-cache sharing: validate maps and plan KV memory.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

#: The plan command's parameters that say how to print, not what to plan (every other one is
#: a field of PlanRequest).
OUTPUT_PARAMETERS = ("plot", "emit_map", "all_layers", "output_format")

EXAMPLE = (
    "Example: mmcli kv-share plan samples/kv/gemma3n-e2b-like.json --memory 20GiB "
    "--max-model-len 32768"
)


@app.command("plan", epilog=EXAMPLE, no_args_is_help=True, cls=ServeLineCommand)
@guarded
def plan(
    model: Annotated[
        str,
        typer.Argument(
            metavar="MODEL",
            help="A Hugging Face config.json or an mmcli layer config (.json, .toml), a local "
            "model folder, or a Hub repo id (org/name; a local path wins). With "
            "-- vllm serve MODEL [FLAGS] or --serve: the serve line's.",
            show_default=False,
        ),
    ] = "",
    revision: RevisionOpt = None,
    map_path: Annotated[
        Path | None,
        typer.Option(
            "--map",
            help="A JSON object {layer: target} that replaces the map the config implies.",
            rich_help_panel=INPUT,
        ),
    ] = None,
    kv_cache_dtype: Annotated[
        str,
        typer.Option(
            "--kv-cache-dtype",
            "--kv-dtype",
            help="auto (the config's dtype), bfloat16, float16, float32, fp8 (fp8_e4m3, "
            "fp8_e5m2), fp8_ds_mla (DeepSeek MLA).",
            rich_help_panel=MEMORY,
        ),
    ] = "auto",
    block_size: Annotated[
        int | None,
        typer.Option(
            "--block-size",
            help="Tokens per KV block (default: the config's, else the release's: "
            f"{value_history('default_block_size')}).",
            rich_help_panel=MEMORY,
        ),
    ] = None,
    max_model_len: Annotated[
        str | None,
        typer.Option(
            "--max-model-len",
            help="Sequence length (default: the model's, as vLLM derives it); auto (or -1): "
            "the largest that fits the KV memory, found as vLLM finds it.",
            rich_help_panel=MEMORY,
        ),
    ] = None,
    allow_long_max_model_len: Annotated[
        bool,
        flag(
            "--allow-long-max-model-len",
            help="VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
            rich_help_panel=MEMORY,
        ),
    ] = False,
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-num-batched-tokens",
            help="The engine's prefill chunk; sliding layers reserve blocks for it (default: "
            "8192, or vllm serve's default for --gpu).",
            show_default=False,
            rich_help_panel=MEMORY,
        ),
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory",
            help="KV-cache memory per GPU: 20GiB, 80GB, 512MiB or bytes. Adds blocks, "
            "tokens and concurrency.",
            rich_help_panel=MEMORY,
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu",
            help="Estimate the KV memory from a GPU (H100, H200, A100-80GB, L40S, RTX4090, … or "
            "a size such as 79GiB) instead of --memory.",
            rich_help_panel=MEMORY,
        ),
    ] = None,
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            help="With --gpu: the weights, a size with a byte unit (140GB, 130GiB), an index "
            "/ .safetensors file, a folder or a repo id (default: the model's own, else an "
            "ESTIMATE from the config).",
            rich_help_panel=MEMORY,
        ),
    ] = None,
    gpu_memory_utilization: Annotated[
        float | None,
        typer.Option(
            "--gpu-memory-utilization",
            help="With --gpu: the share of GPU memory vLLM uses (default: the release's, "
            f"{value_history('default_gpu_memory_utilization')}).",
            show_default=False,
            rich_help_panel=MEMORY,
        ),
    ] = None,
    kv_cache_memory_bytes: vo.KvCacheMemoryBytesOpt = None,
    entry: vo.EntryOpt = "serve",
    reserve: Annotated[
        str | None,
        typer.Option(
            "--reserve",
            help="With --gpu: activation and CUDA-graph memory held back (default 2GiB; 0: none).",
            rich_help_panel=MEMORY,
        ),
    ] = None,
    sweep: Annotated[
        str | None,
        typer.Option(
            "--sweep",
            help="Plan over a range: max-model-len=4K..128K or memory=8GiB..80GiB "
            "(:N points, or :x2 geometric); a table and a chart of concurrency and KV tokens.",
            rich_help_panel=OUTPUT,
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="With --sweep: also draw it as FILE.png or FILE.svg.",
            rich_help_panel=OUTPUT,
        ),
    ] = None,
    tensor_parallel_size: Annotated[
        int,
        typer.Option(
            "--tensor-parallel-size",
            "-tp",
            help="Split KV heads (and states) across this many ranks; figures are per GPU.",
            rich_help_panel=PARALLEL,
        ),
    ] = 1,
    pipeline_parallel_size: Annotated[
        int,
        typer.Option(
            "--pipeline-parallel-size",
            "-pp",
            help="Pipeline stages: layers split as the engine splits them; each stage sizes "
            "its own pool and the smallest block count wins (vLLM "
            f"{first_release('pp_global_groups')}+ rules).",
            rich_help_panel=PARALLEL,
        ),
    ] = 1,
    data_parallel_size: vo.DataParallelOpt = 1,
    pp_layer_partition: Annotated[
        str | None,
        typer.Option(
            "--pp-layer-partition",
            help="Decoder layers per stage, comma-separated (vLLM's VLLM_PP_LAYER_PARTITION), "
            "e.g. 8,12,12.",
            rich_help_panel=PARALLEL,
        ),
    ] = None,
    vllm_version: Annotated[
        str | None,
        typer.Option(
            "--vllm-version",
            help=f"Plan with the rules of this vLLM release ({mirrored_range()}; default: the "
            "newest mirrored). Older releases are refused: their KV sizing is not mirrored.",
            rich_help_panel=ENGINE,
        ),
    ] = None,
    async_scheduling: Annotated[
        bool,
        flag(
            "--async-scheduling/--no-async-scheduling",
            help="Async scheduling (vLLM's default) keeps 2 batches in flight: from "
            f"{first_release('in_flight_reserve')} a sliding window reserves blocks for both.",
            rich_help_panel=ENGINE,
        ),
    ] = True,
    enable_prefix_caching: Annotated[
        bool | None,
        flag(
            "--enable-prefix-caching/--no-enable-prefix-caching",
            help="Prefix caching: hybrid models then keep 2 states per request (default: the "
            f"release's default, on from {first_release('hybrid_prefix_caching_default')}).",
            show_default=False,
            rich_help_panel=ENGINE,
        ),
    ] = None,
    mamba_ssm_cache_dtype: Annotated[
        str,
        typer.Option(
            "--mamba-ssm-cache-dtype",
            help="dtype of the SSM / recurrent state (auto: the config's, else the model's).",
            rich_help_panel=MEMORY,
        ),
    ] = "auto",
    disable_hybrid_kv_cache_manager: Annotated[
        bool,
        flag(
            "--disable-hybrid-kv-cache-manager",
            help="Plan sliding and chunked layers as full attention (one group), as vLLM does "
            "with this flag.",
            rich_help_panel=ENGINE,
        ),
    ] = False,
    chunked_local_attn_hybrid: vo.ChunkedHybridOpt = None,
    num_draft_layers: vo.DraftLayersOpt = 0,
    mtp: vo.MtpOpt = False,
    num_speculative_tokens: vo.SpeculativeTokensOpt = None,
    speculative_config: vo.SpeculativeConfigOpt = None,
    enforce_eager: vo.EnforceEagerOpt = False,
    skip_mm_profiling: vo.SkipMmProfilingOpt = False,
    flashinfer_sampler: vo.FlashinferSamplerOpt = None,
    max_num_seqs: vo.MaxNumSeqsOpt = None,
    num_gpu_blocks_override: vo.BlocksOverrideOpt = None,
    strict: Annotated[
        bool,
        flag(
            "--strict",
            help="Treat sharing the engine accepts but that is likely a mistake (a sliding "
            "layer reading a full layer's cache) as an error.",
            rich_help_panel=INPUT,
        ),
    ] = False,
    device: Annotated[
        str,
        typer.Option(
            "--device",
            help="Where the aliasing check allocates: meta (nothing), cpu, cuda or cuda:N.",
            rich_help_panel=INPUT,
        ),
    ] = "meta",
    emit_map: Annotated[
        Path | None,
        typer.Option(
            "--emit-map",
            help="Write the resolved map {layer: target} as JSON here.",
            rich_help_panel=OUTPUT,
        ),
    ] = None,
    all_layers: Annotated[
        bool,
        flag("--all-layers", help="One table row per layer (no folding).", rich_help_panel=OUTPUT),
    ] = False,
    engine: eng.EngineOpt = "vllm",
    sglang_version: eng.SglangVersionOpt = None,
    trtllm_version: eng.TrtllmVersionOpt = None,
    mem_fraction_static: eng.MemFractionOpt = None,
    page_size: eng.PageSizeOpt = None,
    tokens_per_block: eng.TokensPerBlockOpt = None,
    free_gpu_memory_fraction: eng.FreeFractionOpt = None,
    speculative_num_steps: eng.SpecStepsOpt = None,
    speculative_eagle_topk: eng.SpecTopkOpt = None,
    speculative_num_draft_tokens: eng.SpecDraftOpt = None,
    output_format: FormatOpt = OutputFormat.table,
    serve: vo.ServeOpt = None,
    from_log: vo.FromLogOpt = None,
) -> None:
    """Validate a KV-sharing map and plan the KV cache as the engine would build it.

    Exit 0 when the map is valid, 1 when it has errors, 2 for bad input.
    """
    request_args = dict(locals())  # the parameters are PlanRequest's fields, but for these:
    outputs = [request_args.pop(name) for name in OUTPUT_PARAMETERS]
    from mmcli.kv import PlanRequest, plan_run, refuse_vllm_only, serve_option

    refuse_twice(serve)
    if serve is None and from_log is None and not model:
        raise InputError(
            "MODEL is missing",
            hint="kv-share plan MODEL [OPTIONS], or kv-share plan [OPTIONS] -- vllm serve MODEL …",
        )
    if isinstance(serve, str):  # a list: the tokens after --
        request_args["serve"] = serve_option(serve)
    request = PlanRequest(**request_args)
    refuse_vllm_only(request.resolved.engines, {"--emit-map": emit_map})
    if emit_map is not None and sweep is not None:
        raise InputError(
            "--emit-map is not written by a --sweep (one map, many plans)",
            hint="emit the map from the same command without --sweep",
        )
    if plot is not None and sweep is None:
        raise InputError("--plot needs --sweep", hint="e.g. --sweep max-model-len=4K..128K")
    run = plan_run(request, inputs_read=lambda: check_outputs(emit_map, plot))
    notes = Notes(run.notes)  # said once the command has worked, never before an error
    if run.sweep is not None:
        from mmcli.cli.kv_share.chart import sweep_command

        sweep_command(run.sweep, plot, output_format, run.estimate, notes)
    if emit_map is not None and run.plan is not None:
        from mmcli.kv import write_map

        written = write_map(emit_map, run.plan.sharing_map())
        notes.append(f"wrote {written} map entries to {printable(str(emit_map))}")
    render_run(run, *outputs[2:])
    notes.say()
    raise typer.Exit(run.exit_code)


def render_run(run: PlanRun, all_layers: bool, output_format: OutputFormat) -> None:
    """The plan, or the engines side by side, as a report or one JSON document."""
    if output_format is OutputFormat.json:
        emit_json(run.to_json(lazy_layers=True))
        return
    if (serve := run.request.resolved.serve) is not None:
        from mmcli.cli.kv_share.serve_report import serve_table

        stdout().print(serve_table(serve))
    if run.engines:
        eng.render_engines(run.source.config.name, run.engines)
    else:
        from rich.markup import escape

        from mmcli.cli.kv_share.budget import estimate_panel
        from mmcli.cli.kv_share.render import render_plan

        assert run.plan is not None
        if run.source.kind != "file":
            stdout().print(f"model: {escape(run.source.label)}", highlight=False)
        if run.estimate is not None:
            stdout().print(estimate_panel(run.estimate))
        render_plan(run.plan, run.aliasing, all_layers=all_layers)
        if (deployment := run.deployment()) is not None:
            stdout().print(deployment_line(deployment), highlight=False, soft_wrap=True)


def deployment_line(d: dict[str, Any]) -> str:
    """``deployment: 8 GPUs = 2 replicas × 4 GPUs; KV tokens 2 × 476,368 = 952,736; …``."""
    n = d["replicas"]
    if n == 1:
        return f"deployment: {d['gpus']} GPUs, one replica (the figures above are the whole's)"
    line = f"deployment: {d['gpus']} GPUs = {plural(n, 'replica')} × {d['gpus_per_replica']} GPUs"
    if d["kv_tokens"] is not None:
        line += f"; KV tokens {n} × {d['kv_tokens_per_replica']:,} = {d['kv_tokens']:,}"
    if d["max_concurrency"] is not None:
        per, total = d["max_concurrency_per_replica"], d["max_concurrency"]
        line += f"; max concurrency {n} × {per:.2f}× = {total:.2f}×"
    return line


register_explain(app)  # `kv-share explain` lives in its own module
