"""A KV plan as a result: groups, per-side memory figures, findings, and its JSON document."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any, overload

from mmcli.errors import EXIT_FINDINGS, EXIT_OK
from mmcli.findings import Finding
from mmcli.kv.options import PlanOptions
from mmcli.kv.releases import EngineRules, rules_for
from mmcli.kv.spec import KVCacheSpec, Layer
from mmcli.kv.state import MambaSpec

#: Finding codes about the engine's capacity rather than the map: the start-up refusals.
ENGINE_CODES = frozenset({"memory-too-small", "state-blocks-below-max-num-seqs"})


@dataclass
class GroupPlan:
    """One KV-cache group: layers that share a block table (sharing layers appended last)."""

    index: int
    attention: str
    spec: KVCacheSpec | MambaSpec
    layer_names: list[str]


@dataclass(frozen=True)
class StagePlan:
    """One pipeline stage's share of the pool (figures per GPU of that stage)."""

    index: int
    #: The decoder layers it holds (inclusive).
    first_layer: int
    last_layer: int
    #: Its layers that own a cache.
    owners: int
    #: A page of each of its layers in its fullest group (every group is kept on every stage).
    bytes_per_block: int
    num_blocks: int | None = None
    #: Its start-up check (None when the release checks the whole model once).
    request_bytes: int | None = None
    check_memory_bytes: int | None = None


@dataclass(frozen=True)
class SidePlan:
    """Memory figures for one side (with or without sharing), per GPU."""

    owners: int
    num_groups: int
    group_size: int
    bytes_per_token: int
    #: One block of the pool: a page of every layer of the largest group.
    bytes_per_block: int
    block_size: int
    page_size_bytes: int
    #: One request's recurrent states over all state layers (padded pages; two per layer
    #: under prefix caching's "align" mode).
    state_bytes: int = 0
    #: Figures at max_model_len (None without one).
    per_sequence_bytes: int | None = None
    #: Blocks one request at max_model_len takes, counted over the groups (engine rule).
    blocks_per_request: int | None = None
    #: Bytes the engine requires free for one request at max_model_len (its start-up check).
    engine_request_bytes: int | None = None
    #: Figures that need --memory.
    num_blocks: int | None = None
    #: "GPU KV cache size" as the release prints it.
    max_tokens: int | None = None
    max_concurrency: float | None = None
    #: What the start-up check compares a request against (the null block held back).
    check_memory_bytes: int | None = None
    #: The largest max_model_len that fits, when the one asked for does not.
    largest_fitting_max_model_len: int | None = None
    #: With pipeline stages, each stage's figures (the block count is the smallest of theirs,
    #: and ``bytes_per_block`` the largest).
    stages: tuple[StagePlan, ...] = ()


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
    max_model_len: int | None
    options: PlanOptions
    with_sharing: SidePlan | None
    without_sharing: SidePlan | None
    owner_groups: list[GroupPlan] = field(default_factory=list)
    rules: EngineRules = field(default_factory=rules_for)
    #: Which side the engine runs: "with_sharing", or "without_sharing" when the map is a
    #: what-if the engine does not apply (or has errors).
    engine_side: str = "with_sharing"

    @property
    def has_errors(self) -> bool:
        """Whether any finding is an error (exit 1)."""
        return any(f.severity == "error" for f in self.findings)

    @property
    def has_map_errors(self) -> bool:
        """Whether the sharing map has errors (it cannot be applied)."""
        return any(f.severity == "error" and f.code not in ENGINE_CODES for f in self.findings)

    @property
    def savings_fraction(self) -> float | None:
        """1 − with/without of the per-sequence bytes."""
        if self.with_sharing is None or self.without_sharing is None:
            return None
        with_bytes = self.with_sharing.per_sequence_bytes
        without_bytes = self.without_sharing.per_sequence_bytes
        if with_bytes is None or without_bytes is None:
            with_bytes = self.with_sharing.bytes_per_token
            without_bytes = self.without_sharing.bytes_per_token
        if without_bytes == 0:
            return 0.0
        return 1 - with_bytes / without_bytes

    def sharing_map(self) -> dict[str, str]:
        """``{layer: target}`` for every sharing layer, in layer order."""
        return {
            layer.name: layer.kv_sharing_target
            for layer in self.layers
            if layer.kv_sharing_target is not None
        }

    def _pipeline_json(self) -> dict[str, Any] | None:
        """Each stage's figures per side (None for one stage)."""
        if self.options.pipeline_parallel_size == 1:
            return None

        def stages(side: SidePlan | None) -> list[dict[str, Any]] | None:
            return None if side is None else [asdict(stage) for stage in side.stages]

        return {
            "pipeline_parallel_size": self.options.pipeline_parallel_size,
            "stages": {
                "with_sharing": stages(self.with_sharing),
                "without_sharing": stages(self.without_sharing),
            },
        }

    def to_json(
        self,
        *,
        aliasing_verified: bool | None = None,
        exit_code: int | None = None,
        lazy_layers: bool = False,
    ) -> dict[str, Any]:
        """The plan as ``kv-share plan --format json`` prints it: plain JSON values, so
        ``json.dumps`` takes it.

        ``aliasing_verified`` is the aliasing check's verdict (None: not run, or the map has
        errors); ``exit_code`` the command's (default: 1 with an error finding, else 0).
        ``lazy_layers`` gives the layer rows as a sequence that builds each row when asked
        (the CLI streams a million rows so). Figures that need ``--memory`` are null without
        it; a side that was not planned has null figures.
        """
        if exit_code is None:
            errors = any(f.severity == "error" for f in self.findings)
            exit_code = EXIT_FINDINGS if errors else EXIT_OK
        with_side, without = self.with_sharing, self.without_sharing

        def pair(attr: str) -> dict[str, Any]:
            values = [getattr(s, attr) if s is not None else None for s in (with_side, without)]
            return {"with_sharing": values[0], "without_sharing": values[1]}

        has_memory = self.options.sizes_pool
        rows = LayerRows(self.layers, self.group_of)
        layers: Sequence[dict[str, Any]] = rows if lazy_layers else list(rows)
        return {
            "model": self.model,
            "source": self.source,
            "vllm_rules": {"release": self.rules.release, "mirrored": self.rules.mirrored},
            "engine_side": self.engine_side,
            "max_model_len": self.max_model_len,
            "layers": layers,
            "groups": [
                {"index": g.index, "attention": g.attention, "layer_names": g.layer_names}
                for g in self.groups
            ],
            "findings": [f.to_json(location="layer") for f in self.findings],
            "memory": {
                "page_size_bytes": self.page_size_bytes,
                "block_size": self.block_size,
                "bytes_per_block": pair("bytes_per_block"),
                "bytes_per_token": pair("bytes_per_token"),
                "state_bytes": pair("state_bytes"),
                "blocks_per_request": pair("blocks_per_request"),
                "engine_request_bytes": pair("engine_request_bytes"),
                "per_sequence_bytes": pair("per_sequence_bytes"),
                "savings_fraction": self.savings_fraction,
                "num_blocks": pair("num_blocks") if has_memory else None,
                "max_tokens": pair("max_tokens") if has_memory else None,
                "max_concurrency": pair("max_concurrency") if has_memory else None,
            },
            "pipeline": self._pipeline_json(),
            "aliasing_verified": aliasing_verified,
            "exit_code": exit_code,
        }


def _spec_fields(spec: KVCacheSpec | MambaSpec | None) -> dict[str, Any]:
    """A layer's JSON fields that come from its spec."""
    return {
        "attention": "none" if spec is None else spec.attention,
        "num_kv_heads": getattr(spec, "num_kv_heads", None),
        "head_size": getattr(spec, "head_size", None),
        "dtype": spec.dtype if spec is not None else None,
        "sliding_window": getattr(spec, "sliding_window", None),
        "attention_chunk_size": getattr(spec, "attention_chunk_size", None),
        "state_bytes": spec.state_bytes if isinstance(spec, MambaSpec) else None,
    }


#: Compact JSON, as one row of a long list is printed.
_ROW = json.JSONEncoder(allow_nan=False, separators=(", ", ": "))


class LayerRows(Sequence[dict[str, Any]]):
    """A plan's ``layers`` rows, made when asked for.

    A million-layer plan never holds a million dicts: a row is built on indexing, and
    :meth:`json_rows` writes the JSON text of every row straight from the layers, encoding
    the fields a spec gives once per spec (a model has a handful).
    """

    def __init__(self, layers: list[Layer], group_of: list[int | None]) -> None:
        self._layers = layers
        self._group_of = group_of

    def __len__(self) -> int:
        return len(self._layers)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        layer = self._layers[i]
        return {
            "index": i,
            "name": layer.name,
            **_spec_fields(layer.spec),
            "kv_sharing_target": layer.kv_sharing_target,
            "group": self._group_of[i],
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def json_rows(self) -> Iterator[str]:
        """Each row as compact JSON (``", "`` and ``": "`` separators), in order."""
        encode = encode_basestring_ascii  # what the encoder writes for a str (ASCII-safe)
        middles: dict[int, str] = {}
        for i, (layer, group) in enumerate(zip(self._layers, self._group_of, strict=True)):
            spec = layer.spec
            middle = middles.get(id(spec))
            if middle is None:
                middle = middles[id(spec)] = _ROW.encode(_spec_fields(spec))[1:-1]
            target = layer.kv_sharing_target
            yield (
                f'{{"index": {i}, "name": {encode(layer.name)}, {middle}, "kv_sharing_target": '
                f"{'null' if target is None else encode(target)}, "
                f'"group": {"null" if group is None else group}}}'
            )
