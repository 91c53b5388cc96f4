"""The layers as one tensor-parallel rank of the engine builds them.

The options applied: KV heads split (or replicated) across ranks, the KV dtype (attention
layers only: a recurrent state keeps its own dtype), the block size, the SSM-state dtype the
engine picks for the release, the window Cohere2's model code widens by one, and the attention
layers a speculative-decoding drafter adds.
"""

from __future__ import annotations

from dataclasses import replace

from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.model import DEFAULT_BLOCK_SIZE, ModelConfig
from mmcli.kv.options import DS_MLA, PlanOptions
from mmcli.kv.releases import EngineRules, applies, first_release
from mmcli.kv.spec import (
    IndexerCacheSpec,
    KVCacheSpec,
    Layer,
    MLAAttentionSpec,
    SlidingWindowSpec,
)
from mmcli.kv.state import MambaSpec

#: The text model types whose vLLM model widens the window by one
#: (:attr:`~mmcli.kv.releases.EngineRules.cohere2_window_plus_one`); Cohere2-Vision's language
#: model is a ``cohere2`` one.
COHERE2_TYPES = ("cohere2", "cohere2_moe")

#: Model types whose vLLM model widens its GDN / Mamba-2 conv state by the speculative tokens
#: (``num_spec=vllm_config.num_speculative_tokens`` in qwen3_next.py, qwen3_5.py,
#: nemotron_h.py, mamba2.py, falcon_h1.py, granitemoehybrid.py, zamba2.py, and LFM2's
#: short_conv.py, of vLLM 0.32;
#: Bamba's, Jamba's and Mamba's do not).
SPEC_CONV_TYPES = (
    "qwen3_next",
    "qwen3_5",
    "nemotron_h",
    "mamba2",
    "falcon_h1",
    "granitemoehybrid",
    "zamba2",
    "lfm2",
)


def _heads_per_rank(heads: int, tp: int, where: str) -> int:
    """KV heads one tensor-parallel rank holds: split, or replicated when tp > heads."""
    if tp <= heads:
        if heads % tp:
            raise InputError(
                f"{where}: {heads} KV heads cannot be split evenly across "
                f"--tensor-parallel-size {tp}",
                hint="the engine needs the KV head count divisible by the tensor-parallel size",
            )
        return heads // tp
    if tp % heads:
        raise InputError(
            f"{where}: --tensor-parallel-size {tp} is not a multiple of the {heads} KV heads",
            hint="with more ranks than KV heads, the engine replicates each head over tp / heads "
            "ranks, so tp must be a multiple of the head count",
        )
    return 1


def rank_layers(config: ModelConfig, options: PlanOptions) -> list[Layer]:
    """The layers with --kv-dtype, --block-size and tensor parallelism applied.

    The KV dtype applies to attention layers only: a recurrent state keeps the model dtype.
    """
    tp = options.tensor_parallel_size
    heads = config.num_attention_heads
    if tp > 1 and heads is not None and heads % tp:
        raise InputError(
            f"the model's {heads} attention heads cannot be split across "
            f"--tensor-parallel-size {tp}",
            hint="the engine needs num_attention_heads divisible by the tensor-parallel size",
        )
    dtype = _cache_dtype(config, options)
    converted: dict[int, KVCacheSpec | MambaSpec] = {}  # by identity: few spec objects
    out: list[Layer] = []
    mtp = config.mtp_layers if options.mtp else []
    if options.mtp and not mtp:
        raise InputError(
            f"--mtp: {config.name} declares no multi-token-prediction layers",
            hint="MTP layers come from num_nextn_predict_layers (DeepSeek V3) or "
            "mtp_num_hidden_layers; for an EAGLE drafter use --num-draft-layers",
        )
    for layer in [*config.layers, *mtp]:
        spec = layer.spec
        if spec is not None:
            new = converted.get(id(spec))
            if new is None:
                new = _on_rank(spec, layer.name, config, options, dtype)
                if new == spec:  # nothing changes on this rank: the layer is kept as it is
                    new = spec
                converted[id(spec)] = new
            if new is not spec:
                layer = Layer(layer.name, new, layer.kv_sharing_target, layer.kind)
        out.append(layer)
    return out + _draft_layers(out, options.num_draft_layers)


def _on_rank(
    spec: KVCacheSpec | MambaSpec,
    where: str,
    config: ModelConfig,
    options: PlanOptions,
    dtype: str | None,
) -> KVCacheSpec | MambaSpec:
    """A layer's spec as one tensor-parallel rank holds it, under the options."""
    tp, block = options.tensor_parallel_size, options.block_size
    if isinstance(spec, MambaSpec):
        ssm = options.mamba_ssm_cache_dtype
        if ssm == "auto":
            ssm = _release_ssm_dtype(config, spec, options.rules)
        widens = spec.kind in ("gdn", "mamba2", "short_conv") and config.model_type.startswith(
            SPEC_CONV_TYPES
        )
        state = replace(
            spec,
            tp=tp,
            block_size=block or DEFAULT_BLOCK_SIZE,
            ssm_dtype=spec.ssm_dtype if ssm == "auto" else ssm,
            num_spec=(options.num_speculative_tokens or 0) if widens else 0,
        )
        state.shapes()  # refuses a state that cannot be split across tp
        return state
    if isinstance(spec, IndexerCacheSpec):  # uint8 whatever the dtype, on every rank
        return replace(spec, block_size=block or spec.block_size)
    heads_per_rank = (
        spec.num_kv_heads
        if isinstance(spec, MLAAttentionSpec)  # one latent, replicated
        else _heads_per_rank(spec.num_kv_heads, tp, where)
    )
    new = replace(
        spec,
        dtype=_attention_dtype(spec, dtype, where),
        block_size=block or spec.block_size,
        num_kv_heads=heads_per_rank,
    )
    if dtype == DS_MLA and isinstance(new, MLAAttentionSpec):
        new = replace(new, ds_mla=True)
    if (
        isinstance(new, SlidingWindowSpec)
        and options.rules.cohere2_window_plus_one
        and config.model_type in COHERE2_TYPES
    ):
        new = replace(new, sliding_window=new.sliding_window + 1)
    return new


def _attention_dtype(spec: KVCacheSpec, dtype: str | None, where: str) -> str:
    """The cache dtype of an attention layer under --kv-cache-dtype (None: the config's)."""
    if dtype is None:
        return spec.dtype
    if dtype == DS_MLA:
        if not isinstance(spec, MLAAttentionSpec):
            raise InputError(
                f"--kv-cache-dtype fp8_ds_mla: {where} is not a multi-head latent attention layer",
                hint="fp8_ds_mla is the cache format of DeepSeek's MLA; use fp8 for other models",
            )
        return "fp8"
    return dtype


def _cache_dtype(config: ModelConfig, options: PlanOptions) -> str | None:
    """The attention cache dtype (None: each layer's own), with the checkpoint's declared
    KV-cache quantization applied as the release applies it."""
    given = None if options.kv_dtype == "auto" else options.kv_dtype
    declared, rules = config.checkpoint_kv, options.rules
    if declared is None:
        return given
    if declared.kind == "modelopt":
        if given is None and rules.modelopt_kv_dtype:
            return declared.dtype
        return given
    if rules.kv_scheme_fp8 == "always":
        return declared.dtype
    if given is not None:
        return given
    if rules.kv_scheme_fp8 == "auto":
        return declared.dtype
    raise InputError(
        f"{config.name}: the checkpoint declares a KV-cache quantization ({declared.source}); "
        f"how vLLM {rules.release} sizes its cache under --kv-cache-dtype auto is not mirrored",
        hint="pass the --kv-cache-dtype the engine runs it with (e.g. fp8), or plan with "
        f"--vllm-version {first_release('kv_scheme_fp8', 'auto')} or newer",
    )


def _release_ssm_dtype(config: ModelConfig, spec: MambaSpec, rules: EngineRules) -> str:
    """The SSM-state dtype the engine of ``rules`` picks for this model type by default."""
    chosen = spec.dtype if config.ssm_dtype_by_release else spec.ssm_dtype
    for since, dtype in config.ssm_dtype_by_release:
        if applies(since, rules):
            chosen = dtype
    return chosen


def _draft_layers(layers: list[Layer], count: int) -> list[Layer]:
    """``count`` attention layers of the target model's geometry, as a drafter adds them."""
    if not count:
        return []
    target = next(
        (
            lay.spec
            for lay in layers
            if isinstance(lay.spec, KVCacheSpec) and lay.spec.attention in ("full", "mla")
        ),
        next((lay.spec for lay in layers if isinstance(lay.spec, KVCacheSpec)), None),
    )
    if target is None:
        raise InputError(
            "--num-draft-layers needs an attention layer whose geometry the drafter copies",
            hint="the model has no attention layer",
        )
    return [
        Layer(f"drafter.layers.{i}.self_attn.attn", target, None, "draft") for i in range(count)
    ]


def batched_tokens(config: ModelConfig, options: PlanOptions) -> tuple[int, Finding | None]:
    """``max_num_batched_tokens`` as the engine runs it: an unset value is raised to the
    largest multimodal item of a multimodal prefix-LM model (0.22+, ``vllm/engine/
    arg_utils.py``: "Raising max_num_batched_tokens from … to … to accommodate 'video'")."""
    given, item = options.max_num_batched_tokens, config.mm_item_tokens
    if not (options.max_num_batched_tokens_default and item and item > given):
        return given, None
    if not options.rules.mm_prefix_batch_floor:
        return given, None
    note = Finding(
        "max-num-batched-tokens",
        "info",
        f"vLLM {options.rules.release} raises max_num_batched_tokens from {given:,} to "
        f"{item:,} so that one video (32 frames) of this multimodal model fits one batch",
        hint="pass --max-num-batched-tokens to plan another value",
    )
    return item, note
