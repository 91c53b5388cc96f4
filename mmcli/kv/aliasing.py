"""The aliasing check: build the owners' caches, apply the map, verify every alias."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from mmcli.dtypes import kv_torch_dtype
from mmcli.errors import InputError
from mmcli.kv.result import KVPlan
from mmcli.kv.sharing import first_group_of, initialize_kv_cache_for_kv_sharing
from mmcli.kv.spec import KVCacheGroupSpec, KVCacheSpec, MLAAttentionSpec
from mmcli.kv.state import MambaSpec


@dataclass
class AliasingReport:
    """What the aliasing check did and found."""

    device: str
    verified: bool
    checked: int
    tensors: int
    problems: list[str] = field(default_factory=list)


def cache_layout(spec: KVCacheSpec | MambaSpec) -> tuple[tuple[int, ...], str]:
    """The shape and dtype of one block of a layer's cache, as the engine views its page."""
    if isinstance(spec, MambaSpec):
        return (spec.page_size_bytes,), "uint8"
    if isinstance(spec, MLAAttentionSpec):
        if spec.ds_mla:
            return (spec.block_size, spec.bytes_per_token), "uint8"
        return (1, spec.block_size, spec.num_kv_heads, spec.head_size), spec.dtype
    return (2, 1, spec.block_size, spec.num_kv_heads, spec.head_size), spec.dtype


def check_aliasing(plan: KVPlan, device: Any) -> AliasingReport:
    """Allocate one block per owning layer on ``device`` (``"meta"`` or a ``torch.device``),
    apply :func:`initialize_kv_cache_for_kv_sharing`, and verify each sharing layer reads its
    target's very tensor and sits in its target's group, as the plan says.

    Like the engine, a group's i-th layer uses the i-th of ``group_size`` shared buffers, so
    memory is bounded by the group size, not the layer count.
    """
    device_name = str(device)
    groups = [KVCacheGroupSpec(list(g.layer_names), g.spec) for g in plan.owner_groups]
    shared = plan.sharing_map()
    caches: dict[str, Any] = {}
    group_size = max((len(g.layer_names) for g in groups), default=0)
    if device_name == "meta":
        # What meta allocates: nothing. Each owner's stand-in is a bare object of its own
        # (made in C), so aliasing is object identity, as it is for tensors.
        for group in groups:
            cache_layout(group.kv_cache_spec)  # each group's view must be expressible
            names = group.layer_names
            caches.update(zip(names, map(object.__new__, repeat(object, len(names))), strict=True))
        tensors = len(caches)
    else:
        import torch

        from mmcli.devices import available_bytes

        page = plan.page_size_bytes
        available = available_bytes(device)
        if available is not None and page * group_size > available // 2:
            raise InputError(
                f"the aliasing check needs {group_size} block(s) of {page:,} bytes on "
                f"{device_name}, but it has {available / 2**30:.1f} GiB available",
                hint="use --device meta (allocates nothing), or check the config's sizes",
            )
        buffers = [torch.zeros(page, dtype=torch.int8, device=device) for _ in range(group_size)]
        tensors = len(buffers)
        for group in groups:
            shape, dtype_name = cache_layout(group.kv_cache_spec)
            dtype = kv_torch_dtype(dtype_name)
            size = group.kv_cache_spec.page_size_bytes
            for i, name in enumerate(group.layer_names):
                caches[name] = buffers[i][:size].view(dtype).view(shape)
    initialize_kv_cache_for_kv_sharing(shared, groups, caches)

    problems: list[str] = []
    group_of = first_group_of(groups)
    layers, targets = list(shared), list(shared.values())
    # Checked over the whole map in C first; entry by entry only to say what is wrong.
    read: list[Any] = list(map(caches.get, layers))
    owned: list[Any] = list(map(caches.get, targets))
    aliased = None not in owned and all(map(operator.is_, read, owned))
    grouped = list(map(group_of.get, layers)) == list(map(group_of.get, targets))
    if device_name != "meta" and aliased:  # the same objects: check their storage too
        aliased = all(a.data_ptr() == b.data_ptr() for a, b in zip(read, owned, strict=True))
    if not (aliased and grouped):
        problems = _alias_problems(shared, caches, group_of, meta=device_name == "meta")
    expected = [g.layer_names for g in plan.groups]
    if [g.layer_names for g in groups] != expected:
        problems.append("the groups after sharing differ from the plan's groups")
    return AliasingReport(
        device=device_name,
        verified=not problems,
        checked=len(shared),
        tensors=tensors,
        problems=problems,
    )


def _alias_problems(
    shared: dict[str, str], caches: dict[str, Any], group_of: dict[str, int], *, meta: bool
) -> list[str]:
    """Each sharing layer that does not read its target's tensor or sit in its group."""
    problems = []
    for layer, target in shared.items():
        a, b = caches.get(layer), caches.get(target)
        if a is None or b is None or a is not b:
            problems.append(f"{layer} does not read the tensor of its target {target}")
        elif not meta and a.data_ptr() != b.data_ptr():  # same object, same storage
            problems.append(f"{layer} and {target} do not share storage")
        if group_of.get(layer) != group_of.get(target):
            problems.append(f"{layer} is not in the group of its target {target}")
    return problems
