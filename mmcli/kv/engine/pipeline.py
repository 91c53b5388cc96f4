"""Pipeline parallelism: which layers each stage holds, and each stage's share of the pool.

Facts mirrored (vLLM 0.11 and newer; 0.10 groups each stage's layers on its own and is
refused):

* Layers are split by decoder-layer index (``get_pp_indices``): each stage gets
  ``L // pp``; the remainder goes one layer each to stages ``pp-2``, ``pp-3``, … (the last
  stage never gets an extra). ``VLLM_PP_LAYER_PARTITION`` gives the counts instead. Layers a
  drafter or MTP head adds live on the last stage.
* The KV-cache groups are formed over the whole model, then projected onto each stage
  (groups with no layer on a stage are kept, so every stage counts every group's blocks).
* A stage's block spans, in each group, a page of each of its layers there: its bytes per
  block are the largest such sum over the groups. Each stage divides its own memory by them,
  and the engine takes the smallest block count. (Before 0.17 a stage of unequal pages, a
  uniform-type model, divides by the whole model's pages.)
* The start-up check: from 0.17 each stage checks its own layers against its own memory (less
  its own null block from 0.29); 0.14–0.16 check the whole model once against the smallest
  stage's memory; 0.11–0.13 each stage's own layers, layer by layer.
* Max concurrency is the block count over the whole model's blocks per request, whichever
  stage computes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate, chain, repeat

from mmcli.errors import InputError
from mmcli.kv.engine.layout import Layout, Spec
from mmcli.kv.model import ModelConfig
from mmcli.kv.releases import EngineRules, describe, first_release
from mmcli.kv.spec import Layer


@dataclass(frozen=True)
class Stages:
    """How the model's layers fall on the stages."""

    #: Decoder layers per stage.
    sizes: tuple[int, ...]
    #: Each planned layer's stage, by name.
    stage_of: dict[str, int]

    @property
    def count(self) -> int:
        return len(self.sizes)

    @cached_property
    def starts(self) -> tuple[int, ...]:
        """Each stage's first decoder-layer index: summed once, so that the ranges of a
        million stages take a million additions, not a million sums."""
        return (0, *accumulate(self.sizes[:-1]))

    def layer_range(self, stage: int) -> tuple[int, int]:
        """The first and last decoder-layer index of ``stage`` (last < first: none)."""
        first = self.starts[stage]
        return first, first + self.sizes[stage] - 1


@dataclass(frozen=True)
class StageShare:
    """One stage's part of a layout: its pool block and the specs of its owning layers."""

    stage: int
    bytes_per_block: int
    #: How many of the stage's owning layers have each spec.
    counts: dict[Spec, int]

    @property
    def owners(self) -> int:
        return sum(self.counts.values())


def stage_sizes(num_layers: int, pp: int, partition: Sequence[int] | None) -> list[int]:
    """Decoder layers per stage, as ``get_pp_indices`` splits them (or ``partition``)."""
    if partition is not None:
        if len(partition) != pp or sum(partition) != num_layers:
            raise InputError(
                f"--pp-layer-partition {','.join(map(str, partition))}: needs "
                f"{pp} counts (one per stage) that add up to the model's {num_layers:,} layers",
                hint="as VLLM_PP_LAYER_PARTITION: e.g. 8,12,12 for 32 layers on 3 stages",
            )
        return list(partition)
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    return sizes


def split_layers(
    config: ModelConfig,
    layers: list[Layer],
    pp: int,
    partition: Sequence[int] | None,
    rules: EngineRules,
) -> Stages:
    """Each planned layer's stage: the config's by decoder index, added layers on the last."""
    if not rules.pp_global_groups:
        raise InputError(
            f"--pipeline-parallel-size {pp} under {describe(rules)}: before "
            f"{first_release('pp_global_groups')} each stage groups its own layers (stages may "
            "end up with different groups), which mmcli does not model",
            hint=f"plan with --vllm-version {first_release('pp_global_groups')} or newer",
        )
    index = config.decoder_index
    own = len(config.layers)
    num_layers = max(index) + 1 if index else own
    if num_layers < pp:
        raise InputError(
            f"--pipeline-parallel-size {pp}: the model has only {num_layers} decoder layers",
            hint="use at most one stage per layer",
        )
    sizes = stage_sizes(num_layers, pp, partition)
    per_decoder = list(chain.from_iterable(repeat(s, n) for s, n in enumerate(sizes)))
    stage_list = [per_decoder[i] for i in index] if index else per_decoder[:own]
    stage_list += [pp - 1] * (len(layers) - own)  # MTP and drafter layers: the last stage
    names = [layer.name for layer in layers]
    return Stages(tuple(sizes), dict(zip(names, stage_list, strict=True)))


def check_sharing(layers: list[Layer], stages: Stages) -> None:
    """Refuse a layer that shares the cache of a layer on another stage."""
    for layer in layers:
        target = layer.kv_sharing_target
        if target is None or target not in stages.stage_of:
            continue
        here, there = stages.stage_of[layer.name], stages.stage_of[target]
        if here != there:
            raise InputError(
                f"{layer.name} (pipeline stage {here}) shares the KV cache of {target} "
                f"(stage {there}): a stage can only alias caches it holds, and mmcli does "
                "not model sharing across stages",
                hint="plan with fewer stages, or a --pp-layer-partition that keeps each "
                "sharing layer on its target's stage",
            )


def stage_shares(layout: Layout, stages: Stages, rules: EngineRules) -> list[StageShare]:
    """Each stage's bytes per block and owning layers, with the layout's groups projected."""
    sums = [[0] * len(layout.groups) for _ in range(stages.count)]
    counts: list[Counter[Spec]] = [Counter() for _ in range(stages.count)]
    stage_of = stages.stage_of
    for g, group in enumerate(layout.groups):
        for name, spec in zip(group.layer_names, group.specs, strict=True):
            s = stage_of[name]
            sums[s][g] += spec.page_size_bytes
            counts[s][spec] += 1
    shares = []
    for s in range(stages.count):
        block = max(sums[s], default=0)
        if block == 0:
            first, last = stages.layer_range(s)
            raise InputError(
                f"pipeline stage {s} (decoder layers {first}–{last}) holds no layer with a KV "
                "cache, which mmcli does not model",
                hint="plan with fewer stages, or give that stage layers with a cache "
                "(--pp-layer-partition)",
            )
        if layout.kind == "uniform-type" and not rules.pp_stage_pages:
            block = layout.bytes_per_block  # the whole model's pages (vLLM 0.11–0.16)
        shares.append(StageShare(s, block, dict(counts[s])))
    return shares


def stage_request_bytes(
    layout: Layout, share: StageShare, max_model_len: int, reserve: int, rules: EngineRules
) -> int:
    """Bytes stage ``share`` must have free for one request at ``max_model_len``."""
    return layout.request_bytes(
        max_model_len, reserve, rules, counts=share.counts, bytes_per_block=share.bytes_per_block
    )
