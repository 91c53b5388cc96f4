"""The KV-cache planner: groups, page size, bytes per token and capacity, as the engine computes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from operator import attrgetter
from typing import cast

from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.chunked_note import chunked_as_full
from mmcli.kv.engine.capacity import capacity, stage_plans
from mmcli.kv.engine.layout import (
    EngineRefusal,
    LayerSpecs,
    Layout,
    align_hybrid_block_size,
    disable_hybrid,
    group_layers,
)
from mmcli.kv.engine.max_len import model_max_len
from mmcli.kv.engine.pipeline import Stages, check_sharing, split_layers, stage_shares
from mmcli.kv.engine.ranks import batched_tokens, rank_layers
from mmcli.kv.engine.sparse import sparse_options
from mmcli.kv.engine.startable import refuse_unstartable
from mmcli.kv.engine.states import speculative_tokens, state_pages
from mmcli.kv.model import DEFAULT_BLOCK_SIZE, ModelConfig
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan_notes import release_notes, too_small
from mmcli.kv.releases import EngineRules, describe
from mmcli.kv.result import GroupPlan, KVPlan, SidePlan
from mmcli.kv.reuse import options_key, reuse
from mmcli.kv.sharing import first_group_of, validate_sharing_map
from mmcli.kv.spec import KVCacheSpec, Layer
from mmcli.kv.state import MambaSpec


def _distinct_specs(layers: list[Layer]) -> list[KVCacheSpec | MambaSpec | None]:
    """The layers' spec objects, each once (a million layers have a handful), made in C."""
    specs = list(map(attrgetter("spec"), layers))
    return list(dict(zip(map(id, specs), specs, strict=True)).values())


@dataclass(frozen=True)
class _Run:
    """What every side of a plan shares: the rules and the request's shape."""

    rules: EngineRules
    max_model_len: int | None
    reserve_tokens: int
    state_pages: int
    options: PlanOptions
    #: The pipeline stages (None: one GPU holds every layer).
    stages: Stages | None = None

    def pages(self, spec: MambaSpec) -> int:
        """States of ``spec`` the start-up check and the concurrency count for one request:
        in "align" mode a Mamba-2 state (vLLM's ``MambaMixer2``) also keeps its prefill
        checkpoint block from 0.32; the speculative blocks count from 0.15."""
        checkpoint = self.state_pages == 2 and spec.kind == "mamba2"
        pages = self.state_pages + int(checkpoint and self.rules.mamba2_prefill_checkpoint)
        if not self.rules.speculative_state_blocks:
            return pages
        return pages + (self.options.num_speculative_tokens or 0)

    def held(self, spec: MambaSpec) -> int:
        """States of ``spec`` one running request is allocated: the speculative blocks in
        every release (``MambaManager.allocate_new_blocks``), counted or not."""
        extra = 0 if self.rules.speculative_state_blocks else self.options.num_speculative_tokens
        return self.pages(spec) + (extra or 0)


def _layout(layers: list[Layer], run: _Run) -> Layout:
    # Every layer here keeps a cache (the callers pass layers with a spec).
    per_layer = cast(list[KVCacheSpec | MambaSpec], [layer.spec for layer in layers])
    specs = LayerSpecs.of([layer.name for layer in layers], per_layer)
    specs = specs.map(
        lambda _, s: replace(s, pages_per_request=run.pages(s)) if isinstance(s, MambaSpec) else s
    )
    block = run.options.block_size or DEFAULT_BLOCK_SIZE
    if run.state_pages == 1 and run.max_model_len:
        if all(isinstance(s, MambaSpec) for s in specs.table):
            # An attention-free model without prefix caching: one block is a whole request's
            # state (vLLM's ``mamba_block_size`` = max_model_len, MambaModelConfig; 0.32).
            block = run.max_model_len
    specs, _ = align_hybrid_block_size(specs, block, run.rules)
    chunked = any(s.attention == "chunked" for s in specs.table)
    if run.options.disable_hybrid_kv_cache_manager or (
        chunked and not run.options.chunked_local_hybrid
    ):
        specs = disable_hybrid(specs)
    return group_layers(specs, run.rules)


def _side(layers: list[Layer], run: _Run) -> tuple[SidePlan, Layout]:
    # The length counts only where one block is a whole request's state (see _layout).
    specs = reuse("specs", (layers,), (), lambda: _distinct_specs(layers))
    stateful = run.state_pages == 1 and all(isinstance(s, MambaSpec) for s in specs)
    length = run.max_model_len if stateful else None
    key = (options_key(run.options), run.state_pages, length)
    layout = reuse("layout", (layers,), key, lambda: _layout(layers, run))
    max_len = run.max_model_len
    counts = layout.counts
    st, rules = run.stages, run.rules
    shares = (
        None
        if st is None
        else reuse("shares", (layout, st), (rules,), lambda: stage_shares(layout, st, rules))
    )
    side = SidePlan(
        owners=len(layers),
        num_groups=len(layout.groups),
        group_size=layout.group_size,
        bytes_per_token=sum(n * s.bytes_per_token for s, n in counts.items()),
        # With stages, the fullest stage's block: the one that sets the block count.
        bytes_per_block=max(s.bytes_per_block for s in shares)
        if shares
        else layout.bytes_per_block,
        block_size=layout.block_size,
        page_size_bytes=layout.page_size_bytes,
        state_bytes=sum(
            n * s.page_size_bytes * s.pages_per_request
            for s, n in counts.items()
            if isinstance(s, MambaSpec)
        ),
        stages=stage_plans(shares, run.stages) if shares and run.stages else (),
    )
    if max_len is None:
        return side, layout
    reserve = run.reserve_tokens
    per_sequence = sum(
        n
        * (
            s.tokens_held(max_len) * s.bytes_per_token
            + (s.page_size_bytes * s.pages_per_request if isinstance(s, MambaSpec) else 0)
        )
        for s, n in counts.items()
    )
    per_request = layout.blocks_per_request(max_len, reserve)
    side = replace(
        side,
        per_sequence_bytes=per_sequence,
        blocks_per_request=per_request,
        engine_request_bytes=layout.request_bytes(max_len, reserve, run.rules),
    )
    pool = capacity(
        layout,
        shares,
        run.stages,
        run.rules,
        memory=run.options.memory_bytes,
        override=run.options.num_gpu_blocks_override,
        max_model_len=max_len,
        reserve=reserve,
    )
    if pool is None:
        return side, layout
    blocks = pool.num_blocks
    concurrency = blocks / per_request
    if run.rules.tokens_from_concurrency:
        tokens = int(concurrency * max_len)
    else:
        tokens = blocks // len(layout.groups) * layout.block_size
    return (
        replace(
            side,
            num_blocks=blocks,
            max_tokens=tokens,
            max_concurrency=concurrency,
            engine_request_bytes=pool.request_bytes,
            check_memory_bytes=pool.check_memory_bytes,
            largest_fitting_max_model_len=pool.largest_fitting_max_model_len,
            stages=pool.stages or side.stages,
        ),
        layout,
    )


def _reserve_tokens(options: PlanOptions) -> int:
    """Tokens a window may be written past in one step: one batch, or every in-flight batch."""
    batches = 2 if options.rules.in_flight_reserve and options.async_scheduling else 1
    return batches * options.max_num_batched_tokens


def plan_kv_cache(
    config: ModelConfig, options: PlanOptions, *, extra_findings: list[Finding] | None = None
) -> KVPlan:
    """Validate the config's sharing map and plan its KV cache as the engine would."""
    rules = options.rules
    refuse_unstartable(config, rules)
    options, sparse_notes = sparse_options(config, options)  # DSA: 64-token blocks, fp8_ds_mla
    user_block = options.block_size is not None  # given, or the model's backend forces it
    if not user_block and not config.block_size_given:
        options = replace(options, block_size=rules.default_block_size)  # 64 from 0.34
    # The config's own specs, each once: a million layers have a handful.
    own_specs = reuse("specs", (config.layers,), (), lambda: _distinct_specs(config.layers))
    options, spec_note = speculative_tokens(config, own_specs, options)
    batch, batch_note = batched_tokens(config, options)
    options = replace(options, max_num_batched_tokens=batch)
    layers = reuse("ranks", (config,), options_key(options), lambda: rank_layers(config, options))
    max_len = model_max_len(
        config, rules, options.max_model_len, allow_long=options.allow_long_max_model_len
    )
    if max_len is not None and max_len <= 0:  # only a ModelConfig built in code
        raise InputError(f"{config.name}: max_model_len must be positive, got {max_len}")
    distinct = reuse("specs", (layers,), (), lambda: _distinct_specs(layers))
    if not any(spec is not None for spec in distinct):
        raise InputError(
            f"no layer of {config.name} keeps a KV cache or a state, so there is nothing to plan",
            hint="every layer is of a type without a cache",
        )
    strict = options.strict
    checked = reuse(
        "map", (layers,), (strict,), lambda: validate_sharing_map(layers, strict=strict)
    )
    findings = list(extra_findings or []) + list(checked)
    findings += config.findings + config.map_findings + ([batch_note] if batch_note else [])
    findings += ([spec_note] if spec_note else []) + sparse_notes
    map_errors = any(f.severity == "error" for f in findings)
    if max_len is None:
        findings.append(
            Finding(
                "no-max-model-len",
                "info",
                "the config gives no maximum model length, so per-request figures (blocks, "
                "concurrency, the start-up check) are not computed",
                hint="pass --max-model-len (or set max_position_embeddings in the config)",
            )
        )

    findings += release_notes(distinct, options, user_block) + chunked_as_full(distinct, options)
    kv_layers, owners = reuse("owners", (layers,), (), lambda: _owners(layers))
    if not owners and not map_errors:  # a map with errors (a cycle, say) is their finding
        raise InputError(
            "every layer with a KV cache shares another's, so no layer owns a cache",
            hint="at least one layer must own its cache (no kv_sharing_target)",
        )
    stages = None
    if options.pipeline_parallel_size > 1:
        pp = options.pipeline_parallel_size
        part = options.pp_layer_partition
        made = (config, layers)
        stages = reuse(
            "stages", made, (pp, part, rules), lambda: split_layers(*made, pp, part, rules)
        )
        if not map_errors:
            reuse(
                "stage-sharing", (kv_layers, stages), (), lambda: check_sharing(kv_layers, stages)
            )
    pages, caching_note = state_pages(config, distinct, options)
    findings += [caching_note] if caching_note else []
    run = _Run(rules, max_len, _reserve_tokens(options), pages, options, stages)
    if any(f.code == "duplicate-layer" for f in findings):
        # Duplicate names: the engine keys caches by name, so there is no plan to make.
        return _unplanned(config, layers, findings, max_len, options)
    try:
        without, without_layout = _side(kv_layers, run)
        with_side: SidePlan | None = None
        groups: list[GroupPlan] = []
        owner_groups: list[GroupPlan] = []
        group_of: list[int | None] = [None] * len(layers)
        engine_layout = without_layout
        if not map_errors:
            # Nothing shared: both sides are the same layers, planned once.
            shares = len(owners) < len(kv_layers)
            with_side, layout = _side(owners, run) if shares else (without, without_layout)
            if config.engine_shares:
                engine_layout = layout
            grouped = (layers, kv_layers, layout)
            owner_groups, groups, group_of = reuse("groups", grouped, (), lambda: _groups(*grouped))
    except EngineRefusal as refusal:
        raise InputError(refusal.message, hint=refusal.hint) from None

    engine_side = (
        "with_sharing" if with_side is not None and config.engine_shares else "without_sharing"
    )
    running = with_side if engine_side == "with_sharing" else without
    if running is not None and running.largest_fitting_max_model_len is not None:
        findings.append(too_small(running, max_len, options))
    if running is not None:
        findings += _state_pool(running, run, distinct)
    return KVPlan(
        model=config.name,
        source=config.source,
        layers=layers,
        groups=groups,
        group_of=group_of,
        findings=findings,
        page_size_bytes=engine_layout.page_size_bytes,
        block_size=engine_layout.block_size,
        max_model_len=max_len,
        options=options,
        with_sharing=with_side,
        without_sharing=without,
        owner_groups=owner_groups,
        rules=rules,
        engine_side=engine_side,
    )


def _owners(layers: list[Layer]) -> tuple[list[Layer], list[Layer]]:
    """The layers with a KV cache or a state, and those of them that own theirs."""
    kv_layers = [layer for layer in layers if layer.spec is not None]
    return kv_layers, [layer for layer in kv_layers if layer.kv_sharing_target is None]


def _groups(
    layers: list[Layer], kv_layers: list[Layer], layout: Layout
) -> tuple[list[GroupPlan], list[GroupPlan], list[int | None]]:
    """The owners' groups, the groups with each sharing layer in its target's, and each
    layer's group."""
    owner_groups = [
        GroupPlan(g.index, g.attention, g.spec, list(g.layer_names)) for g in layout.groups
    ]
    groups = [GroupPlan(g.index, g.attention, g.spec, list(g.layer_names)) for g in layout.groups]
    # A sharing layer joins its target's group (appended in layer order).
    group_by_name: dict[str, int] = first_group_of(groups)
    for layer in kv_layers:
        if layer.kv_sharing_target is not None:
            g_index = group_by_name[layer.kv_sharing_target]
            groups[g_index].layer_names.append(layer.name)
            group_by_name[layer.name] = g_index
    group_of = list(map(group_by_name.get, [layer.name for layer in layers]))
    return owner_groups, groups, group_of


def _unplanned(
    config: ModelConfig,
    layers: list[Layer],
    findings: list[Finding],
    max_len: int | None,
    options: PlanOptions,
) -> KVPlan:
    """A plan with findings only: the layers cannot be laid out (their names collide)."""
    return KVPlan(
        model=config.name,
        source=config.source,
        layers=layers,
        groups=[],
        group_of=[None] * len(layers),
        findings=findings,
        page_size_bytes=0,
        block_size=options.block_size or DEFAULT_BLOCK_SIZE,
        max_model_len=max_len,
        options=options,
        with_sharing=None,
        without_sharing=None,
        rules=options.rules,
        engine_side="without_sharing",
    )


def _state_pool(
    side: SidePlan, run: _Run, specs: list[KVCacheSpec | MambaSpec | None]
) -> list[Finding]:
    """--max-num-seqs against the state pool: each running request holds its own states.
    With FULL decode CUDA graphs the engine refuses to start when the pool has fewer blocks
    than max_num_seqs (``CompilationConfig``, from 0.20); else too many requests queue."""
    seqs = run.options.max_num_seqs
    if seqs is None or side.num_blocks is None or not side.state_bytes:
        return []
    if run.rules.full_graph_state_check and not run.options.enforce_eager:
        if seqs > side.num_blocks:
            return [
                Finding(
                    "state-blocks-below-max-num-seqs",
                    "error",
                    f"max_num_seqs ({seqs:,}) exceeds the {side.num_blocks:,} blocks of the "
                    f"state pool: with FULL decode CUDA graphs (the default) "
                    f"{describe(run.rules)} refuse to start ('max_num_seqs ({seqs}) exceeds "
                    f"available Mamba cache blocks ({side.num_blocks})')",
                    hint=f"lower --max-num-seqs to {side.num_blocks:,}, give the KV cache more "
                    "memory, or plan with --enforce-eager",
                )
            ]
    # Every state group has num_blocks blocks, and a request holds `pages` of them.
    pages = max(run.held(s) for s in specs if isinstance(s, MambaSpec))
    held = side.num_blocks // pages
    if seqs <= held:
        return []
    return [
        Finding(
            "state-pool-too-small",
            "warning",
            f"--max-num-seqs {seqs:,}, but each state group holds {side.num_blocks:,} blocks and a "
            f"request keeps {pages} of them: at most {held:,} requests can run at once",
            hint=f"lower --max-num-seqs to {held:,}, or give the KV cache more memory",
        )
    ]
