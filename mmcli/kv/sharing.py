"""Cross-layer KV sharing: validate a map layer by layer, and apply one to built caches."""

from __future__ import annotations

import operator
from collections.abc import Mapping, MutableMapping, Sequence
from itertools import repeat
from typing import Any

from mmcli.errors import KVSharingError
from mmcli.findings import Finding
from mmcli.kv.spec import IndexerCacheSpec, KVCacheSpec, Layer

# Looking for near-miss names is linear in the layer count per unknown target; beyond this
# many layers the suggestion is not worth the time.
_SUGGEST_LIMIT = 5000


def _describe(index: int, name: str) -> str:
    return f"layer {index} ({name})"


def _spec_differences(layer: Layer, target: Layer) -> list[str]:
    """Every KV-spec field on which ``layer`` and ``target`` differ, as 'field A vs B'."""
    a, b = layer.spec, target.spec
    if not isinstance(a, KVCacheSpec) or not isinstance(b, KVCacheSpec):
        return []
    fields = ["num_kv_heads", "head_size", "dtype", "block_size"]
    if layer.attention == target.attention:  # a kind mismatch is reported on its own
        fields += ["sliding_window", "attention_chunk_size"]
    out = []
    for name in fields:
        va, vb = getattr(a, name, None), getattr(b, name, None)
        if va != vb:
            out.append(f"{name} {va} vs {vb}")
    return out


def validate_sharing_map(layers: Sequence[Layer], *, strict: bool = False) -> list[Finding]:
    """Every problem with the layers' ``kv_sharing_target`` entries, as findings.

    Checks what the engine checks (target exists, is not the layer, comes before it, a
    target that holds a KV cache) and what it does not (chains and cycles, equal KV specs,
    unique names). Sharing between attention kinds (a sliding layer reading a full layer's
    cache, or the reverse) is accepted by the engine, which compares only the attention type
    (decoder, encoder): it is a warning (``attention-kind-mismatch``), an error with
    ``strict``. Sharing with a layer that keeps no KV cache (or a recurrent state) is an
    error. Linear in the number of layers.
    """
    findings: list[Finding] = []
    names = [layer.name for layer in layers]
    # Each name's first index (later indices are overwritten by earlier ones).
    index_of = dict(zip(reversed(names), range(len(names) - 1, -1, -1), strict=True))
    duplicates: dict[str, list[int]] = {}
    if len(index_of) < len(names):
        for i, name in enumerate(names):
            first = index_of[name]
            if first != i:
                duplicates.setdefault(name, [first]).append(i)
    for name, where in duplicates.items():
        findings.append(
            Finding(
                "duplicate-layer",
                "error",
                f"layer name {name} appears {len(where)} times "
                f"(indices {', '.join(map(str, where))})",
                hint="layer names must be unique: the engine keys caches and sharing by name",
                layer=name,
            )
        )

    # Sparse-attention indexer caches neither share nor are shared; most models have none
    # (looked for among the distinct spec objects, in C: a model has a handful).
    specs = list(map(operator.attrgetter("spec"), layers))
    distinct = dict(zip(map(id, specs), specs, strict=True)).values()
    has_indexer = any(isinstance(spec, IndexerCacheSpec) for spec in distinct)
    roots: list[int] | None = None
    for i, layer in enumerate(layers):
        target = layer.kv_sharing_target
        if target is None:
            continue
        j = index_of.get(target)
        indexer = _indexer_finding(layers, i, j) if has_indexer else None
        if indexer is not None:
            findings.append(indexer)
            continue
        if j is not None and j < i:
            tgt = layers[j]
            if (
                tgt.kv_sharing_target is None
                and layer.spec is tgt.spec
                and isinstance(layer.spec, KVCacheSpec)
            ):
                continue  # an earlier owner of the very same spec: nothing to report
        who = _describe(i, layer.name)
        if target == layer.name:
            findings.append(
                Finding(
                    "self-target",
                    "error",
                    f"{who} names itself as its KV-sharing target",
                    hint="remove the entry (the layer then owns its cache) or name an earlier "
                    "layer of the same attention type",
                    layer=layer.name,
                )
            )
            continue
        j = index_of.get(target)
        if j is None:
            hint = "targets are full layer names of this model"
            if len(layers) <= _SUGGEST_LIMIT:
                import difflib

                close = difflib.get_close_matches(target, index_of.keys(), n=1)
                if close:
                    hint = f"did you mean {close[0]}?"
            findings.append(
                Finding(
                    "unknown-target",
                    "error",
                    f"{who} shares with {target}, which is not a layer of this model",
                    hint=hint,
                    layer=layer.name,
                )
            )
            continue
        tgt = layers[j]
        if j >= i:
            findings.append(
                Finding(
                    "target-after",
                    "error",
                    f"{who} shares with {_describe(j, target)}, which does not come before it",
                    hint="the engine builds layers in order, so a target must have a smaller "
                    "index ('must come before the current layer')",
                    layer=layer.name,
                )
            )
        if tgt.kv_sharing_target is not None:
            if roots is None:
                roots = _roots(layers, index_of)
            findings.append(_chain_finding(layers, i, j, roots[i]))
        if layer.spec is tgt.spec and isinstance(layer.spec, KVCacheSpec):
            continue  # one spec object: same attention, nothing differs (the common case)
        kv = isinstance(layer.spec, KVCacheSpec) and isinstance(tgt.spec, KVCacheSpec)
        if layer.attention != tgt.attention and not kv:
            findings.append(
                Finding(
                    "attention-mismatch",
                    "error",
                    f"{who} has attention {layer.attention} but its target "
                    f"{_describe(j, target)} has attention {tgt.attention}",
                    hint="a layer can only share the cache of an attention layer ('none' "
                    "layers keep no KV cache to share, and a recurrent state is no KV cache)",
                    layer=layer.name,
                )
            )
        else:
            if layer.attention != tgt.attention:
                findings.append(_kind_finding(i, layer, j, tgt, strict))
            diffs = _spec_differences(layer, tgt)
            if diffs:
                findings.append(
                    Finding(
                        "spec-mismatch",
                        "error",
                        f"{who} and its target {_describe(j, target)} have different KV "
                        f"specs: {', '.join(diffs)}",
                        hint="sharing aliases the target's tensor, so KV heads, head size, "
                        "dtype, window and block size must all match (the engine does not "
                        "check this)",
                        layer=layer.name,
                    )
                )
    return findings


def _indexer_finding(layers: Sequence[Layer], i: int, j: int | None) -> Finding | None:
    """Layer ``i`` (or its target ``j``) is a sparse-attention indexer cache, which vLLM
    builds without a KV-sharing target (``DeepseekV32IndexerCache``) and reads for its own
    top-k only: it neither shares nor is shared."""
    layer = layers[i]
    who = _describe(i, layer.name)
    if layer.attention == "indexer":
        message = f"{who} is a sparse-attention indexer cache, which takes no KV-sharing target"
    elif j is not None and layers[j].attention == "indexer":
        message = (
            f"{who} shares with {_describe(j, layers[j].name)}, a sparse-attention indexer "
            "cache, which holds no attention keys and values to share"
        )
    else:
        return None
    return Finding(
        "indexer-sharing",
        "error",
        message,
        hint="indexer caches (self_attn.indexer.k_cache) are not sharing targets; map MLA "
        "layers (self_attn.attn) onto MLA layers only",
        layer=layer.name,
    )


def _kind_finding(i: int, layer: Layer, j: int, tgt: Layer, strict: bool) -> Finding:
    """A layer sharing the cache of a layer of another attention kind (full ↔ sliding …)."""
    who, whom = _describe(i, layer.name), _describe(j, tgt.name)
    assert isinstance(layer.spec, KVCacheSpec) and isinstance(tgt.spec, KVCacheSpec)
    kept = _tokens_kept(tgt.spec)
    needed = _tokens_kept(layer.spec)
    message = (
        f"{who} ({layer.attention}) shares the cache of {whom} ({tgt.attention}); the engine "
        "accepts this, as it compares only the attention type (decoder, encoder)"
    )
    if kept is not None and (needed is None or needed > kept):
        message += (
            f", but the target keeps only its last {kept} tokens (older blocks are freed), so "
            f"layer {i} cannot see tokens further back and its outputs change past {kept} tokens"
        )
    else:
        message += (
            ": the target keeps every token the layer reads, so the layer loses no context "
            "and keeps no pages of its own"
        )
    return Finding(
        "attention-kind-mismatch",
        "error" if strict else "warning",
        message,
        hint="share with a layer of the same attention kind to keep the model's behaviour "
        "(an error under --strict)",
        layer=layer.name,
    )


def _tokens_kept(spec: KVCacheSpec) -> int | None:
    """Tokens a layer of this spec reads back (None: all of them)."""
    window = getattr(spec, "sliding_window", None) or getattr(spec, "attention_chunk_size", None)
    return window if isinstance(window, int) else None


_CYCLE = -1
_DANGLING = -2


def _roots(layers: Sequence[Layer], index_of: Mapping[str, int]) -> list[int]:
    """For each layer, the index of the layer that owns the cache it ends up reading.

    ``_CYCLE`` when following targets loops, ``_DANGLING`` when it reaches an unknown name.
    Each layer is walked once (memoised), so this is linear in the number of layers.
    """
    unknown = -3
    roots = [unknown] * len(layers)
    for start in range(len(layers)):
        path: list[int] = []
        on_path: set[int] = set()
        k = start
        result = unknown
        while True:
            if roots[k] != unknown:
                result = roots[k]
                break
            target = layers[k].kv_sharing_target
            if target is None:
                result = k
                break
            if k in on_path:
                result = _CYCLE
                break
            path.append(k)
            on_path.add(k)
            nxt = index_of.get(target)
            if nxt is None:
                result = _DANGLING
                break
            k = nxt
        for p in path:
            roots[p] = result
        if roots[start] == unknown:
            roots[start] = result
    return roots


def _chain_finding(layers: Sequence[Layer], i: int, j: int, root: int) -> Finding:
    """A chained-target finding for layer ``i`` whose target ``j`` itself shares."""
    layer, tgt = layers[i], layers[j]
    message = (
        f"{_describe(i, layer.name)} shares with {_describe(j, tgt.name)}, which itself "
        f"shares with {tgt.kv_sharing_target}"
    )
    if root == _CYCLE:
        message += "; following the targets loops (a cycle), so no layer there owns a cache"
        hint = "break the cycle: the first layer of it must own its cache (no target)"
    elif root >= 0:
        message += f"; the chain ends at {_describe(root, layers[root].name)}"
        hint = f"point it directly at the layer that owns the cache: {layers[root].name}"
    else:
        hint = "point it directly at a layer that owns its cache"
    return Finding("chained-target", "error", message, hint=hint, layer=layer.name)


def first_group_of(groups: Sequence[Any]) -> dict[str, int]:
    """Each layer name's first group (by index) among groups with ``layer_names``."""
    group_of: dict[str, int] = {}
    for g in range(len(groups) - 1, -1, -1):  # earlier groups overwrite later ones
        group_of.update(zip(groups[g].layer_names, repeat(g)))
    return group_of


def initialize_kv_cache_for_kv_sharing(
    shared_kv_cache_layers: Mapping[str, str],
    kv_cache_groups: Sequence[Any],
    kv_caches: MutableMapping[str, Any],
) -> None:
    """Alias each sharing layer's cache to its target's tensor and join the target's group.

    The engine's effect, in map order: ``kv_caches[layer]`` becomes the very object
    ``kv_caches[target]``, and ``layer`` is appended to the ``layer_names`` of the group that
    holds ``target``. Unlike the engine, the whole map is checked first; on any problem a
    :class:`~mmcli.errors.KVSharingError` lists them all and nothing is mutated.
    """
    group_of = first_group_of(kv_cache_groups)
    layers, targets = list(shared_kv_cache_layers), list(shared_kv_cache_layers.values())
    if not _map_applies(layers, targets, shared_kv_cache_layers, group_of, kv_caches):
        problems = _map_problems(shared_kv_cache_layers, group_of, kv_caches)
        count = len(problems)
        raise KVSharingError(
            f"cannot apply the KV-sharing map: {count} problem{'s' if count != 1 else ''}, "
            f"first: {problems[0]}",
            problems=problems,
            hint="nothing was changed; every sharing layer must name a different layer that "
            "owns a cache and belongs to a KV-cache group",
        )
    kv_caches.update(zip(layers, map(kv_caches.__getitem__, targets), strict=True))
    for layer, g in zip(layers, map(group_of.__getitem__, targets), strict=True):
        kv_cache_groups[g].layer_names.append(layer)


def _map_applies(
    layers: list[str],
    targets: list[str],
    shared: Mapping[str, str],
    group_of: Mapping[str, int],
    kv_caches: MutableMapping[str, Any],
) -> bool:
    """Whether every entry of the map can be applied, tested per condition over the whole map
    (in C: a million-layer map is checked in milliseconds); :func:`_map_problems` says why not."""
    return not (
        any(map(operator.eq, layers, targets))
        or any(map(kv_caches.__contains__, layers))
        or any(map(group_of.__contains__, layers))
        or any(map(shared.__contains__, targets))
        or not all(map(group_of.__contains__, targets))
        or not all(map(kv_caches.__contains__, targets))
    )


def _map_problems(
    shared_kv_cache_layers: Mapping[str, str],
    group_of: Mapping[str, int],
    kv_caches: MutableMapping[str, Any],
) -> list[str]:
    """Every problem of the map, entry by entry."""
    problems: list[str] = []
    for layer, target in shared_kv_cache_layers.items():
        if layer == target:
            problems.append(f"layer {layer} names itself as its target")
            continue
        if layer in kv_caches or layer in group_of:
            problems.append(f"layer {layer} already owns a KV cache or sits in a group")
        if target in shared_kv_cache_layers:
            problems.append(
                f"layer {layer} targets {target}, which itself shares with "
                f"{shared_kv_cache_layers[target]} (chained target)"
            )
            continue
        known = target in kv_caches or target in group_of
        if not known:
            problems.append(f"layer {layer} targets {target}, which is not a known layer")
            continue
        if target not in group_of:
            problems.append(f"layer {layer} targets {target}, which is in no KV-cache group")
        if target not in kv_caches:
            problems.append(f"layer {layer} targets {target}, which has no cache tensor")
    return problems
