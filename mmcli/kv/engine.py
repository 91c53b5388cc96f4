"""The engine's KV-cache arithmetic: block sizes, groups, blocks, concurrency, start-up check.

This mirrors vLLM v1's planner (``get_kv_cache_groups``, ``unify_kv_cache_spec_page_size``,
the hybrid block-size alignment, ``get_max_concurrency_for_kv_cache_config`` and the start-up
memory check) under the rules of one release (:class:`~mmcli.kv.releases.EngineRules`). It
takes the layers that own a cache and returns numbers; wording and findings live in the plan.

Every layer here has its engine spec: attention specs (full, sliding, chunked, MLA) or a
recurrent state (:class:`~mmcli.kv.state.MambaSpec`). Facts mirrored:

* Block size for hybrids: with state layers, the attention block is raised to the smallest
  multiple of the kernel alignment (16) whose attention page holds one state; the state page is
  then padded to the attention page.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from mmcli.errors import InputError
from mmcli.kv.releases import EngineRules
from mmcli.kv.spec import KVCacheSpec, MLAAttentionSpec, cdiv
from mmcli.kv.state import MambaSpec

Spec = KVCacheSpec | MambaSpec

#: The attention kernels' block alignment the hybrid block size is a multiple of (FlashAttention
#: and most backends: 16; MLA backends need larger blocks).
KERNEL_ALIGNMENT = 16
MLA_ALIGNMENT = {False: 64, True: 128}  # before / from 0.29 (pad_unequal_pages marks 0.29)


class EngineRefusal(Exception):
    """The engine itself would fail to start with this model and these options."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass
class EngineGroup:
    """One KV-cache group: layers sharing one block table, with each layer's spec."""

    index: int
    layer_names: list[str]
    specs: list[Spec]

    @property
    def spec(self) -> Spec:
        """The group's spec (its first layer's; all equal except in a uniform-type group)."""
        return self.specs[0]

    @property
    def attention(self) -> str:
        kinds = sorted({s.attention for s in self.specs})
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
    specs: dict[str, Spec]

    @cached_property
    def counts(self) -> dict[Spec, int]:
        """How many owning layers have each distinct spec (the sums below go over these)."""
        return dict(Counter(self.specs.values()))

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

    def request_bytes(self, max_model_len: int, reserve_tokens: int, rules: EngineRules) -> int:
        """Bytes the start-up check requires free for one request at ``max_model_len``."""
        if rules.check == "per-layer" or self.kind == "uniform-type":
            return sum(
                n * s.blocks_per_request(max_model_len, reserve_tokens) * s.page_size_bytes
                for s, n in self.counts.items()
            )
        if rules.check == "first-group":
            first = self.groups[0].spec.blocks_per_request(max_model_len, reserve_tokens)
            return self.bytes_per_block * first
        return self.bytes_per_block * self.blocks_per_request(max_model_len, reserve_tokens)


def map_specs(specs: dict[str, Spec], change: Callable[[str, Spec], Spec]) -> dict[str, Spec]:
    """``change`` applied to each layer's spec, computed once per distinct spec (a model of a
    million layers has a handful of specs)."""
    done: dict[Spec, Spec] = {}
    out: dict[str, Spec] = {}
    for name, spec in specs.items():
        new = done.get(spec)
        if new is None:
            new = done[spec] = change(name, spec)
        out[name] = new
    return out


def align_hybrid_block_size(
    specs: dict[str, Spec], block_size: int, rules: EngineRules
) -> tuple[dict[str, Spec], int]:
    """Raise the attention block size until a page holds one state; pad the states to it.

    Returns the specs with their block size (and padded state pages) and the block size. A
    model without state layers, or without attention layers, is returned unchanged.
    """
    distinct = list(dict.fromkeys(specs.values()))  # in layer order
    states = [s for s in distinct if isinstance(s, MambaSpec)]
    attention = [s for s in distinct if isinstance(s, KVCacheSpec)]
    if not states or not attention:
        same = map_specs(specs, lambda _, s: replace(s, block_size=block_size))
        return same, block_size
    state_page = max(s.state_bytes for s in states)
    per_token = attention[0].bytes_per_token  # the model's own attention geometry
    mla = isinstance(attention[0], MLAAttentionSpec)
    align = MLA_ALIGNMENT[rules.pad_unequal_pages] if mla else KERNEL_ALIGNMENT
    needed = align * cdiv(state_page, align * per_token)
    block = max(block_size, needed)
    page = block * per_token

    def aligned(_: str, spec: Spec) -> Spec:
        if isinstance(spec, MambaSpec):
            return replace(spec, block_size=block, page_size_padded=page)
        return replace(spec, block_size=block)

    return map_specs(specs, aligned), block


def _unify_pages(specs: dict[str, Spec], rules: EngineRules) -> dict[str, Spec]:
    """Make every page the largest page: scale block sizes by the ratio (or pad, from 0.29)."""
    largest = max(s.page_size_bytes for s in set(specs.values()))

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

    return map_specs(specs, unify)


def _uniform_type(specs: Sequence[Spec]) -> bool:
    distinct = set(specs)
    return len({s.type_key for s in distinct}) == 1 and len({s.block_size for s in distinct}) == 1


def group_layers(specs: dict[str, Spec], rules: EngineRules) -> Layout:
    """The engine's groups for the owning layers (``specs`` in layer order, blocks aligned)."""
    names = list(specs)
    values = list(specs.values())
    if len(set(values)) == 1:
        spec = values[0]
        group = EngineGroup(0, names, list(values))
        return Layout("uniform", [group], spec.page_size_bytes * len(names), len(names), specs)
    if _uniform_type(values):
        group = EngineGroup(0, names, list(values))
        total = sum(s.page_size_bytes for s in values)
        return Layout("uniform-type", [group], total, len(names), specs)
    specs = _unify_pages(specs, rules)
    buckets: dict[Spec, list[str]] = {}
    for name, spec in specs.items():
        buckets.setdefault(spec, []).append(name)
    sizes = [len(b) for b in buckets.values()]
    group_size = min(sizes)
    if rules.group_threshold is not None and max(sizes) < group_size * rules.group_threshold:
        group_size = max(sizes)
    groups: list[EngineGroup] = []
    for spec, members in buckets.items():
        k = cdiv(len(members), group_size)
        for i in range(k):
            chosen = members[i::k]
            groups.append(EngineGroup(len(groups), chosen, [spec] * len(chosen)))
    page = next(iter(specs.values())).page_size_bytes
    return Layout("hybrid", groups, page * group_size, group_size, specs)


def disable_hybrid(specs: dict[str, Spec]) -> dict[str, Spec]:
    """``--disable-hybrid-kv-cache-manager``: sliding and chunked layers become full layers."""
    from mmcli.kv.spec import FullAttentionSpec

    distinct = set(specs.values())
    if any(isinstance(s, MambaSpec) for s in distinct):
        if any(isinstance(s, KVCacheSpec) for s in distinct):
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

    return map_specs(specs, as_full)


def num_blocks(layout: Layout, memory_bytes: int) -> int:
    """Blocks the pool holds in ``memory_bytes``."""
    return memory_bytes // layout.bytes_per_block


def check_memory(layout: Layout, memory_bytes: int, rules: EngineRules) -> int:
    """The memory the start-up check compares a request against (the null block held back)."""
    return memory_bytes - (layout.bytes_per_block if rules.null_block else 0)


def largest_max_model_len(
    layout: Layout, available: int, upper: int, reserve_tokens: int, rules: EngineRules
) -> int:
    """The largest ``max_model_len`` ≤ ``upper`` whose request fits ``available`` (0: none)."""
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if layout.request_bytes(mid, reserve_tokens, rules) <= available:
            lo = mid
        else:
            hi = mid - 1
    return lo
