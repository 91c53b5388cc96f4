"""``kv-share plan`` options of vLLM's alone: speculative decoding's, and those that stand for
a vLLM environment variable, not a flag."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mmcli.cli.options import ENGINE, INPUT, MEMORY, PARALLEL, flag
from mmcli.kv import first_release

DraftLayersOpt = Annotated[
    int,
    typer.Option(
        "--num-draft-layers",
        help="Attention layers a speculative-decoding drafter adds to the same pool (an "
        "EAGLE head: 1), with the target model's geometry.",
        rich_help_panel=ENGINE,
    ),
]
MtpOpt = Annotated[
    bool,
    flag(
        "--mtp",
        help="Plan the config's multi-token-prediction layers too (vLLM builds them for "
        "speculative decoding with method mtp / deepseek_mtp).",
        rich_help_panel=ENGINE,
    ),
]
SpeculativeTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--num-speculative-tokens",
        min=1,
        help="num_speculative_tokens of vLLM's --speculative-config (default with --mtp: "
        "the MTP layer count): a Mamba / GDN state keeps that many more blocks per "
        "request and, for most hybrids, a wider conv state.",
        rich_help_panel=ENGINE,
    ),
]
SpeculativeConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--speculative-config",
        help='vLLM\'s --speculative-config JSON, e.g. \'{"method": "mtp", '
        '"num_speculative_tokens": 2}\': an MTP method plans the MTP layers, ngram / suffix '
        "none, eagle / eagle3 --num-draft-layers; instead of --mtp and "
        "--num-speculative-tokens.",
        show_default=False,
        rich_help_panel=ENGINE,
    ),
]
DataParallelOpt = Annotated[
    int,
    typer.Option(
        "--data-parallel-size",
        "-dp",
        help="Replicas of tp × pp GPUs (vLLM's -dp): the deployment's KV tokens and "
        "concurrency grow with them, one GPU's memory does not.",
        rich_help_panel=PARALLEL,
    ),
]
MaxNumSeqsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-num-seqs",
        help="Requests run at once; a hybrid model's state pool is checked against it.",
        rich_help_panel=MEMORY,
    ),
]
EnforceEagerOpt = Annotated[
    bool,
    flag(
        "--enforce-eager",
        help="vLLM's --enforce-eager: no CUDA graphs, so a hybrid model's state pool may hold "
        "fewer blocks than --max-num-seqs (with FULL decode graphs vLLM "
        f"{first_release('full_graph_state_check')}+ refuses that).",
        rich_help_panel=ENGINE,
    ),
]
SkipMmProfilingOpt = Annotated[
    bool,
    flag(
        "--skip-mm-profiling",
        help="vLLM's --skip-mm-profiling (from "
        f"{first_release('skip_mm_profiling_flag')}): the --gpu estimate leaves out the "
        "multimodal encoder's profile.",
        rich_help_panel=ENGINE,
    ),
]
BlocksOverrideOpt = Annotated[
    int | None,
    typer.Option(
        "--num-gpu-blocks-override",
        help="Plan with this many KV blocks, whatever the memory (as vLLM's option).",
        rich_help_panel=MEMORY,
    ),
]
FlashinferSamplerOpt = Annotated[
    bool | None,
    flag(
        "--flashinfer-sampler/--no-flashinfer-sampler",
        help="VLLM_USE_FLASHINFER_SAMPLER=1 / 0 (--no also for FlashInfer not installed): "
        "which top-k / top-p sampler the --gpu estimate's profile runs, FlashInfer's or vLLM's "
        "own (default: the release's, FlashInfer's where it is installed; only with =1 from "
        f"{first_release('flashinfer_sampler', 'opt-in')}, unless =0 from "
        f"{first_release('flashinfer_sampler', 'default')}).",
        show_default=False,
        rich_help_panel=ENGINE,
    ),
]

ChunkedHybridOpt = Annotated[
    bool | None,
    flag(
        "--chunked-local-attn-hybrid/--no-chunked-local-attn-hybrid",
        help="VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 / 0: chunked local layers "
        "(Llama 4) keep their own groups, or the hybrid manager is off and they are planned as "
        "full attention (default: the release's, on from "
        f"{first_release('chunked_local_hybrid', 'on')}).",
        show_default=False,
        rich_help_panel=ENGINE,
    ),
]


def vllm_only(chunked_hybrid: bool | None) -> dict[str, bool]:
    """These options, as ``refuse_vllm_only`` reads them (given either way: refused)."""
    return {"--chunked-local-attn-hybrid": chunked_hybrid is not None}


KvCacheMemoryBytesOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-cache-memory-bytes",
        metavar="SIZE",
        help="vLLM's --kv-cache-memory-bytes: the KV memory per GPU as given, read as vLLM "
        "reads it (bytes, 20G = 20×2³⁰, 20g = 20×10⁹); instead of --memory, and with --gpu "
        "it replaces the estimate (vLLM skips its profile).",
        show_default=False,
        rich_help_panel=MEMORY,
    ),
]

EntryOpt = Annotated[
    str,
    typer.Option(
        "--entry",
        metavar="serve|llm",
        help="With --gpu: whose batch defaults the estimate takes, vllm serve's (serve) or the "
        "LLM class's (llm): larger max_num_batched_tokens on most GPUs.",
        rich_help_panel=MEMORY,
    ),
]

ServeOpt = Annotated[
    str | None,
    typer.Option(
        "--serve",
        help="A vllm serve line, read with the flags of --vllm-version (@FILE: read from a "
        "file, -: from stdin); or put it last: -- vllm serve MODEL [FLAGS].",
        show_default=False,
        rich_help_panel=INPUT,
    ),
]
FromLogOpt = Annotated[
    Path | None,
    typer.Option(
        "--from-log",
        help="Replan a run from its vLLM start-up log: its 'Available KV cache memory' "
        "(exact, as --memory), its release and the settings it shows.",
        show_default=False,
        rich_help_panel=MEMORY,
    ),
]
