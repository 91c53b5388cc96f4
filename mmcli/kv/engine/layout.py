"""The engine's KV-cache arithmetic: block sizes, groups, blocks, concurrency, start-up check.

This mirrors vLLM v1's planner (``get_kv_cache_groups``, ``unify_kv_cache_spec_page_size``,
the hybrid block-size alignment, ``get_max_concurrency_for_kv_cache_config`` and the start-up
memory check) under the rules of one release (:class:`~mmcli.kv.releases.EngineRules`). It
takes the layers that own a cache and returns numbers; wording and findings live in the plan.

Every layer here has its engine spec: attention specs (full, sliding, chunked, MLA) or a
recurrent state (:class:`~mmcli.kv.state.MambaSpec`). Facts mirrored:

* Block size for hybrids: with state layers, the attention block is raised to the smallest
  multiple of B whose attention page holds one state, B = the kernel alignment (16; MLA 64,
  128 from 0.27), and from 0.20 B = max(kernel alignment, block size); the state page is then
  padded to the attention page.
* Grouping: one group when every spec is equal; one group of per-layer specs when every layer
  has the same attention type and block size (vLLM's ``UniformTypeKVCacheSpecs``); otherwise
  pages are made equal (smaller pages get proportionally larger blocks), layers are bucketed by
  spec, the group size is the smallest bucket (the largest if largest < threshold × smallest),
  and each bucket is split into ``cdiv(n, size)`` strided groups.
* One block of the pool spans one page of every layer of the largest group:
  ``num_blocks = memory // bytes_per_block``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from mmcli.errors import InputError
from mmcli.kv.releases import EngineRules
from mmcli.kv.spec import IndexerCacheSpec, KVCacheSpec, MLAAttentionSpec, cdiv
from mmcli.kv.state import MambaSpec

Spec = KVCacheSpec | MambaSpec

#: The attention kernels' block alignment the hybrid block size is a multiple of (FlashAttention
#: and most backends: 16; MLA backends need larger blocks: ``EngineRules.mla_hybrid_alignment``).
KERNEL_ALIGNMENT = 16


class EngineRefusal(Exception):
    """The engine itself would fail to start with this model and these options."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class LayerSpecs:
    """Each owning layer's spec, in layer order, with every distinct spec stored once.

    Layer ``names[i]`` has spec ``table[index[i]]``. A model of a million layers has a handful
    of specs, so the engine's steps change the table and count over it; only grouping walks
    the layers.
    """

    names: list[str]
    table: list[Spec]
    index: list[int]

    @classmethod
    def of(cls, names: list[str], specs: list[Spec]) -> LayerSpecs:
        """From each layer's name and spec, in layer order (equal specs share one slot)."""
        ids = list(map(id, specs))
        table: list[Spec] = []
        slot_of_value: dict[Spec, int] = {}
        slot_of_id: dict[int, int] = {}
        # Per distinct object (a handful), then per layer in C: no Python code per layer.
        for key, spec in dict(zip(ids, specs, strict=True)).items():
            slot = slot_of_value.get(spec)
            if slot is None:
                slot = slot_of_value[spec] = len(table)
                table.append(spec)
            slot_of_id[key] = slot
        return cls(names, table, list(map(slot_of_id.__getitem__, ids)))

    def __len__(self) -> int:
        return len(self.names)

    def per_layer(self) -> list[Spec]:
        """Every layer's spec, in layer order."""
        return list(map(self.table.__getitem__, self.index))

    def items(self) -> Iterator[tuple[str, Spec]]:
        return zip(self.names, self.per_layer(), strict=True)

    def counts(self) -> dict[Spec, int]:
        """How many layers have each distinct spec."""
        return {self.table[slot]: n for slot, n in Counter(self.index).items()}

    def map(self, change: Callable[[str, Spec], Spec]) -> LayerSpecs:
        """``change`` applied to each distinct spec, given the first layer that has it (the
        name an error names); specs that become equal share one slot."""
        first = [self.names[self.index.index(slot)] for slot in range(len(self.table))]
        table: list[Spec] = []
        slot_of: dict[Spec, int] = {}
        remap: list[int] = []
        for name, spec in zip(first, self.table, strict=True):
            new = change(name, spec)
            slot = slot_of.get(new)
            if slot is None:
                slot = slot_of[new] = len(table)
                table.append(new)
            remap.append(slot)
        same = remap == list(range(len(remap)))
        index = self.index if same else list(map(remap.__getitem__, self.index))
        return LayerSpecs(self.names, table, index)


@dataclass
class EngineGroup:
    """One KV-cache group: layers sharing one block table, with each layer's spec."""

    index: int
    layer_names: list[str]
    specs: list[Spec]

    @property
    def spec(self) -> Spec:
        """The group's spec (its first layer's; all equal except in a uniform-type group). A
        sparse-attention indexer is passed over for the MLA layer it sits beside."""
        first = self.specs[0]
        if isinstance(first, IndexerCacheSpec):
            return next((s for s in self.specs if not isinstance(s, IndexerCacheSpec)), first)
        return first

    @property
    def attention(self) -> str:
        kinds = sorted({s.attention for s in {id(s): s for s in self.specs}.values()})
        return "+".join(kinds)


@dataclass
class Layout:
    """How the engine lays the owning layers out in its pool."""

    #: "uniform" (one spec), "uniform-type" (one group, per-layer specs) or "hybrid".
    kind: str
    groups: list[EngineGroup]
    #: Bytes one block of the pool takes: one page of each layer of the largest group.
    bytes_per_block: int
    #: Layers in the largest group (the number of pool tensors).
    group_size: int
    #: Each owning layer's spec after block-size alignment and page unification.
    specs: LayerSpecs

    @cached_property
    def counts(self) -> dict[Spec, int]:
        """How many owning layers have each distinct spec (the sums below go over these)."""
        return self.specs.counts()

    @property
    def block_size(self) -> int:
        """The smallest block size of any group (what the older token count multiplies by)."""
        return min(s.block_size for s in self.counts)

    @property
    def page_size_bytes(self) -> int:
        """The largest page of one layer (all pages are equal except in a uniform-type group)."""
        return max(s.page_size_bytes for s in self.counts)

    def blocks_per_request(self, max_model_len: int, reserve_tokens: int) -> int:
        """Blocks one request at ``max_model_len`` takes, as max concurrency counts them."""
        if self.kind == "hybrid":
            return sum(
                g.spec.blocks_per_request(max_model_len, reserve_tokens) for g in self.groups
            )
        return max(s.blocks_per_request(max_model_len, reserve_tokens) for s in self.counts)

    def request_bytes(
        self,
        max_model_len: int,
        reserve_tokens: int,
        rules: EngineRules,
        *,
        counts: Mapping[Spec, int] | None = None,
        bytes_per_block: int | None = None,
    ) -> int:
        """Bytes the start-up check requires free for one request at ``max_model_len``: of
        the whole model, or of one pipeline stage given its layers' ``counts`` and its
        ``bytes_per_block`` (the groups, and so the blocks a request takes, are the model's)."""
        counts = self.counts if counts is None else counts
        block = self.bytes_per_block if bytes_per_block is None else bytes_per_block
        if rules.check == "per-layer" or self.kind == "uniform-type":
            return sum(
                n * s.blocks_per_request(max_model_len, reserve_tokens) * s.page_size_bytes
                for s, n in counts.items()
            )
        if rules.check == "first-group":
            first = self.groups[0].spec.blocks_per_request(max_model_len, reserve_tokens)
            return block * first
        return block * self.blocks_per_request(max_model_len, reserve_tokens)


def align_hybrid_block_size(
    specs: LayerSpecs, block_size: int, rules: EngineRules
) -> tuple[LayerSpecs, int]:
    """Raise the attention block size until a page holds one state; pad the states to it.

    The block is the smallest multiple of B whose page holds the largest state, B the kernel
    alignment or, from 0.20, max(kernel alignment, ``block_size``) (vLLM's
    ``_align_hybrid_block_size``; before 0.20 ``HybridAttentionMambaModelConfig``); a larger
    ``block_size`` is kept. Returns the specs with their block size (and padded state pages)
    and the block size. A model without state layers, or without attention layers, is
    returned unchanged.
    """
    states = [s for s in specs.table if isinstance(s, MambaSpec)]  # the table is in layer order
    attention = [s for s in specs.table if isinstance(s, KVCacheSpec)]
    if not states or not attention:
        return specs.map(lambda _, s: replace(s, block_size=block_size)), block_size
    state_page = max(s.state_bytes for s in states)
    per_token = attention[0].bytes_per_token  # the model's own attention geometry
    mla = isinstance(attention[0], MLAAttentionSpec)
    align = rules.mla_hybrid_alignment if mla else KERNEL_ALIGNMENT
    if rules.hybrid_align_to_block_size:
        if block_size > align and block_size % KERNEL_ALIGNMENT:
            raise InputError(
                f"a hybrid model's --block-size {block_size} is not a multiple of the attention "
                f"kernels' {KERNEL_ALIGNMENT}-token block: the engine's block then depends on "
                "the attention backend, which mmcli does not model",
                hint=f"use a multiple of {KERNEL_ALIGNMENT}, e.g. "
                f"{KERNEL_ALIGNMENT * cdiv(block_size, KERNEL_ALIGNMENT)}",
            )
        align = max(align, block_size)
    needed = align * cdiv(state_page, align * per_token)
    block = max(block_size, needed)
    page = block * per_token

    def aligned(_: str, spec: Spec) -> Spec:
        if isinstance(spec, MambaSpec):
            return replace(spec, block_size=block, page_size_padded=page)
        return replace(spec, block_size=block)

    return specs.map(aligned), block


def _unify_pages(specs: LayerSpecs, rules: EngineRules) -> LayerSpecs:
    """Make every page the largest page: scale block sizes by the ratio (or pad, from 0.29)."""
    largest = max(s.page_size_bytes for s in specs.table)

    def unify(name: str, spec: Spec) -> Spec:
        page = spec.page_size_bytes
        if page == largest:
            return spec
        if largest % page == 0 and isinstance(spec, KVCacheSpec):
            return replace(spec, block_size=spec.block_size * (largest // page))
        if isinstance(spec, MambaSpec):
            return replace(spec, page_size_padded=largest)
        if rules.pad_unequal_pages and not isinstance(spec, MLAAttentionSpec):
            raise InputError(
                f"{name}: its page ({page:,} B) does not divide the largest page "
                f"({largest:,} B); the engine pads it, which mmcli does not model",
                hint="plan layers whose page sizes divide each other",
            )
        raise EngineRefusal(
            f"the engine cannot unify page sizes: {name} has a {page:,}-byte page that does "
            f"not divide the largest page ({largest:,} B)",
            hint="vLLM raises 'The page size of the layer is not divisible by the maximum "
            "page size'; use an equal head geometry or --disable-hybrid-kv-cache-manager",
        )

    return specs.map(unify)


def _uniform_type(kinds: Sequence[Spec]) -> bool:
    return len({s.type_key for s in kinds}) == 1 and len({s.block_size for s in kinds}) == 1


def group_layers(specs: LayerSpecs, rules: EngineRules) -> Layout:
    """The engine's groups for the owning layers (in layer order, blocks aligned)."""
    names = specs.names
    if len(specs.table) == 1:
        spec = specs.table[0]
        group = EngineGroup(0, list(names), [spec] * len(names))
        return Layout("uniform", [group], spec.page_size_bytes * len(names), len(names), specs)
    if _uniform_type(specs.table):
        group = EngineGroup(0, list(names), specs.per_layer())
        total = sum(n * s.page_size_bytes for s, n in specs.counts().items())
        return Layout("uniform-type", [group], total, len(names), specs)
    specs = _unify_pages(specs, rules)
    buckets: list[list[str]] = [[] for _ in specs.table]  # one per spec, in layer order
    for name, slot in zip(names, specs.index, strict=True):
        buckets[slot].append(name)
    sizes = [len(b) for b in buckets]
    group_size = min(sizes)
    if rules.group_threshold is not None and max(sizes) < group_size * rules.group_threshold:
        group_size = max(sizes)
    groups: list[EngineGroup] = []
    for spec, members in zip(specs.table, buckets, strict=True):
        k = cdiv(len(members), group_size)
        for i in range(k):
            chosen = members[i::k]
            groups.append(EngineGroup(len(groups), chosen, [spec] * len(chosen)))
    page = specs.table[0].page_size_bytes
    return Layout("hybrid", groups, page * group_size, group_size, specs)


def disable_hybrid(specs: LayerSpecs) -> LayerSpecs:
    """``--disable-hybrid-kv-cache-manager``: sliding and chunked layers become full layers."""
    from mmcli.kv.spec import FullAttentionSpec

    if any(isinstance(s, MambaSpec) for s in specs.table):
        if any(isinstance(s, KVCacheSpec) for s in specs.table):
            raise EngineRefusal(
                "with the hybrid KV cache manager disabled the engine cannot hold attention and "
                "state layers together",
                hint="vLLM raises 'Hybrid KV cache manager is disabled but failed to convert the "
                "KV cache specs to one unified type'; keep the hybrid manager on",
            )
        return specs

    def as_full(_: str, spec: Spec) -> Spec:
        if isinstance(spec, KVCacheSpec) and spec.attention in ("sliding", "chunked"):
            return FullAttentionSpec(spec.block_size, spec.num_kv_heads, spec.head_size, spec.dtype)
        return spec

    return specs.map(as_full)


def num_blocks(layout: Layout, memory_bytes: int) -> int:
    """Blocks the pool holds in ``memory_bytes``."""
    return memory_bytes // layout.bytes_per_block


def largest_max_model_len(request_bytes: Callable[[int], int], available: int, upper: int) -> int:
    """The largest ``max_model_len`` ≤ ``upper`` whose request (``request_bytes(length)``,
    growing with the length) fits ``available`` bytes (0: none fits)."""
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if request_bytes(mid) <= available:
            lo = mid
        else:
            hi = mid - 1
    return lo
