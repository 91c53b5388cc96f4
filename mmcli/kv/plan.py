"""The KV-cache planner: groups, page size, bytes per token and capacity, as the engine computes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.model import ModelConfig
from mmcli.kv.options import PlanOptions
from mmcli.kv.sharing import validate_sharing_map
from mmcli.kv.spec import KVCacheSpec, Layer, cdiv


@dataclass
class GroupPlan:
    """One KV-cache group: layers that share a block table (sharing layers appended last)."""

    index: int
    attention: str
    spec: KVCacheSpec
    layer_names: list[str]


@dataclass(frozen=True)
class SidePlan:
    """Memory figures for one side (with or without sharing), per GPU."""

    owners: int
    num_groups: int
    group_size: int
    bytes_per_token: int
    per_sequence_bytes: int
    #: Blocks one request at max_model_len takes, counted over the groups (engine rule).
    blocks_per_request: int
    #: Bytes the engine requires free for one request at max_model_len (its start-up check).
    engine_request_bytes: int
    num_blocks: int | None = None
    max_tokens: int | None = None
    max_concurrency: float | None = None


@dataclass
class KVPlan:
    """Everything ``kv-share plan`` reports."""

    model: str
    source: str
    layers: list[Layer]
    groups: list[GroupPlan]
    #: Each layer's group index after sharing (None: no KV, or the map is invalid).
    group_of: list[int | None]
    findings: list[Finding]
    page_size_bytes: int
    block_size: int
    max_model_len: int
    options: PlanOptions
    with_sharing: SidePlan | None
    without_sharing: SidePlan | None
    owner_groups: list[GroupPlan] = field(default_factory=list)

    @property
    def has_errors(self) -> bool:
        """Whether any finding is an error (the map cannot be used)."""
        return any(f.severity == "error" for f in self.findings)

    @property
    def savings_fraction(self) -> float | None:
        """1 − with/without of the per-sequence bytes."""
        if self.with_sharing is None or self.without_sharing is None:
            return None
        if self.without_sharing.per_sequence_bytes == 0:
            return 0.0
        return 1 - self.with_sharing.per_sequence_bytes / self.without_sharing.per_sequence_bytes

    def sharing_map(self) -> dict[str, str]:
        """``{layer: target}`` for every sharing layer, in layer order."""
        return {
            layer.name: layer.kv_sharing_target
            for layer in self.layers
            if layer.kv_sharing_target is not None
        }

    def to_json(self, *, aliasing_verified: bool | None, exit_code: int) -> dict[str, Any]:
        """The plan as ``kv-share plan --format json`` prints it.

        ``aliasing_verified`` is the aliasing check's verdict (None: not run, the map has
        errors); ``exit_code`` the command's. Figures that need ``--memory`` are null
        without it; a side that was not planned has null figures.
        """
        with_side, without = self.with_sharing, self.without_sharing

        def pair(attr: str) -> dict[str, Any]:
            values = [getattr(s, attr) if s is not None else None for s in (with_side, without)]
            return {"with_sharing": values[0], "without_sharing": values[1]}

        has_memory = self.options.memory_bytes is not None
        layers = []
        for i, layer in enumerate(self.layers):
            spec = layer.spec
            layers.append(
                {
                    "index": i,
                    "name": layer.name,
                    "attention": layer.attention,
                    "num_kv_heads": spec.num_kv_heads if spec is not None else None,
                    "head_size": spec.head_size if spec is not None else None,
                    "dtype": spec.dtype if spec is not None else None,
                    "sliding_window": getattr(spec, "sliding_window", None),
                    "kv_sharing_target": layer.kv_sharing_target,
                    "group": self.group_of[i],
                }
            )
        return {
            "model": self.model,
            "source": self.source,
            "layers": layers,
            "groups": [
                {"index": g.index, "attention": g.attention, "layer_names": g.layer_names}
                for g in self.groups
            ],
            "findings": [f.to_json(location="layer") for f in self.findings],
            "memory": {
                "page_size_bytes": self.page_size_bytes,
                "bytes_per_token": pair("bytes_per_token"),
                "per_sequence_bytes": pair("per_sequence_bytes"),
                "savings_fraction": self.savings_fraction,
                "num_blocks": pair("num_blocks") if has_memory else None,
                "max_tokens": pair("max_tokens") if has_memory else None,
                "max_concurrency": pair("max_concurrency") if has_memory else None,
            },
            "aliasing_verified": aliasing_verified,
            "exit_code": exit_code,
        }


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


def _apply_options(config: ModelConfig, options: PlanOptions) -> list[Layer]:
    """The layers with --kv-dtype, --block-size and tensor parallelism applied."""
    tp = options.tensor_parallel_size
    heads = config.num_attention_heads
    if tp > 1 and heads is not None and heads % tp:
        raise InputError(
            f"the model's {heads} attention heads cannot be split across "
            f"--tensor-parallel-size {tp}",
            hint="the engine needs num_attention_heads divisible by the tensor-parallel size",
        )
    dtype = None if options.kv_dtype == "auto" else options.kv_dtype
    if dtype is None and options.block_size is None and tp == 1:
        return list(config.layers)
    converted: dict[KVCacheSpec, KVCacheSpec] = {}
    out: list[Layer] = []
    for layer in config.layers:
        spec = layer.spec
        if spec is not None:
            new = converted.get(spec)
            if new is None:
                new = replace(
                    spec,
                    dtype=dtype or spec.dtype,
                    block_size=options.block_size or spec.block_size,
                    num_kv_heads=_heads_per_rank(spec.num_kv_heads, tp, layer.name),
                )
                converted[spec] = new
            layer = replace(layer, spec=new)
        out.append(layer)
    return out


def engine_groups(owners: list[Layer]) -> list[GroupPlan]:
    """The engine's KV-cache groups for layers that own a cache (all with one page size).

    Layers are bucketed by spec (first appearance order); the group size is the smallest
    bucket (the largest when largest < 1.25 × smallest); each bucket is split into
    ``cdiv(n, group_size)`` groups, strided. One bucket gives one group of every layer.
    """
    buckets: dict[KVCacheSpec, list[str]] = {}
    for layer in owners:
        assert layer.spec is not None
        buckets.setdefault(layer.spec, []).append(layer.name)
    if not buckets:
        return []
    sizes = [len(names) for names in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < group_size * 1.25:
        group_size = max(sizes)
    groups: list[GroupPlan] = []
    for spec, names in buckets.items():
        k = cdiv(len(names), group_size)
        for i in range(k):
            groups.append(GroupPlan(len(groups), spec.attention, spec, names[i::k]))
    return groups


def _uniform(layers: list[Layer], what: str) -> tuple[int, int] | None:
    """(page size, block size) shared by ``layers``; None when they differ."""
    pages = {layer.spec.page_size_bytes for layer in layers if layer.spec is not None}
    blocks = {layer.spec.block_size for layer in layers if layer.spec is not None}
    if len(pages) > 1 or len(blocks) > 1:
        return None
    return pages.pop(), blocks.pop()


def _side(
    owners: list[Layer], groups: list[GroupPlan], max_len: int, options: PlanOptions
) -> SidePlan:
    mnbt = options.max_num_batched_tokens
    bytes_per_token = 0
    per_sequence = 0
    engine_request = 0
    counts: dict[KVCacheSpec, int] = {}
    for layer in owners:
        assert layer.spec is not None
        counts[layer.spec] = counts.get(layer.spec, 0) + 1
    for spec, n in counts.items():
        bytes_per_token += n * spec.bytes_per_token
        per_sequence += n * spec.tokens_held(max_len) * spec.bytes_per_token
        engine_request += n * spec.blocks_per_request(max_len, mnbt) * spec.page_size_bytes
    group_size = max(len(g.layer_names) for g in groups)
    per_request = sum(g.spec.blocks_per_request(max_len, mnbt) for g in groups)
    side = SidePlan(
        owners=len(owners),
        num_groups=len(groups),
        group_size=group_size,
        bytes_per_token=bytes_per_token,
        per_sequence_bytes=per_sequence,
        blocks_per_request=per_request,
        engine_request_bytes=engine_request,
    )
    memory = options.memory_bytes
    if memory is None:
        return side
    page = groups[0].spec.page_size_bytes
    block = groups[0].spec.block_size
    num_blocks = memory // page // group_size
    return replace(
        side,
        num_blocks=num_blocks,
        max_tokens=num_blocks // len(groups) * block,
        max_concurrency=num_blocks / per_request,
    )


def plan_kv_cache(
    config: ModelConfig, options: PlanOptions, *, extra_findings: list[Finding] | None = None
) -> KVPlan:
    """Validate the config's sharing map and plan its KV cache as the engine would."""
    layers = _apply_options(config, options)
    max_len = options.max_model_len or config.max_model_len
    if max_len is None:
        raise InputError(
            "the config gives no maximum model length",
            hint="pass --max-model-len (or set max_model_len / max_position_embeddings)",
        )
    if max_len <= 0:  # only a ModelConfig built in code: the readers and options refuse it
        raise InputError(f"{config.name}: max_model_len must be positive, got {max_len}")
    if not any(layer.spec is not None for layer in layers):
        raise InputError(
            f"no layer of {config.name} keeps a KV cache, so there is nothing to plan",
            hint="every layer is of a type without KV cache (linear attention, state space)",
        )
    findings = list(extra_findings or []) + validate_sharing_map(layers)
    findings += config.findings + config.map_findings
    errors = any(f.severity == "error" for f in findings)

    kv_layers = [layer for layer in layers if layer.spec is not None]
    owners = [layer for layer in kv_layers if layer.kv_sharing_target is None]
    if not owners:
        raise InputError(
            "every layer with a KV cache shares another's, so no layer owns a cache",
            hint="at least one layer must own its cache (no kv_sharing_target)",
        )
    uniform = _uniform(owners, "owning layers")
    if uniform is None:
        pages = sorted({(lay.spec.page_size_bytes, lay.spec.block_size) for lay in owners})  # type: ignore[union-attr]
        raise InputError(
            "the layers that own a KV cache have different page sizes or block sizes "
            f"({', '.join(f'{p} B / block {b}' for p, b in pages)}); the engine's grouping for "
            "that is not modelled by mmcli",
            hint="plan models whose cache-owning layers have equal page sizes",
        )
    page, block = uniform

    without: SidePlan | None = None
    if _uniform(kv_layers, "layers") is not None:
        without = _side(kv_layers, engine_groups(kv_layers), max_len, options)

    with_side: SidePlan | None = None
    groups: list[GroupPlan] = []
    owner_groups: list[GroupPlan] = []
    group_of: list[int | None] = [None] * len(layers)
    if not errors:
        owner_groups = engine_groups(owners)
        with_side = _side(owners, owner_groups, max_len, options)
        groups = [
            GroupPlan(g.index, g.attention, g.spec, list(g.layer_names)) for g in owner_groups
        ]
        index_of = {layer.name: i for i, layer in enumerate(layers)}
        for g in groups:
            for name in g.layer_names:
                group_of[index_of[name]] = g.index
        for i, layer in enumerate(layers):
            if layer.kv_sharing_target is not None and layer.spec is not None:
                g_index = group_of[index_of[layer.kv_sharing_target]]
                assert g_index is not None
                groups[g_index].layer_names.append(layer.name)
                group_of[i] = g_index

    running = with_side or without
    if running is not None and options.memory_bytes is not None:
        if options.memory_bytes < running.engine_request_bytes:
            findings.append(
                Finding(
                    "memory-too-small",
                    "warning",
                    f"one request of {max_len} tokens needs {running.engine_request_bytes} "
                    f"bytes of KV cache per GPU, but --memory gives {options.memory_bytes}: "
                    "the engine would refuse to start",
                    hint="lower --max-model-len, raise --memory or --tensor-parallel-size, or "
                    "use --kv-dtype fp8",
                )
            )
    return KVPlan(
        model=config.name,
        source=config.source,
        layers=layers,
        groups=groups,
        group_of=group_of,
        findings=findings,
        page_size_bytes=page,
        block_size=block,
        max_model_len=max_len,
        options=options,
        with_sharing=with_side,
        without_sharing=without,
        owner_groups=owner_groups,
    )
