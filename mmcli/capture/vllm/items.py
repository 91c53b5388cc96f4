"""What the vLLM plugin reads from the engine: each item's placeholder range, and the context.

Pure helpers (no plugin state): unpack the runner's preparation results into
:class:`ItemInfo` records, and build the dump's context for one encoder batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mmcli.capture._common import loaded_tp_rank, loaded_version
from mmcli.capture.model_config import ModelFacts, tokens_for


@dataclass(frozen=True)
class ItemInfo:
    """One scheduled multimodal item and its placeholder range, as the runner listed it."""

    modality: str | None
    identifier: str | None
    req_id: str | None
    offset: int | None
    length: int | None
    is_embed: Any  # a 1-D bool tensor over the range, or None (every position is an embed)
    prompt_token_ids: tuple[int, ...] | None = None  # the item's request's prompt


@dataclass
class RunnerInfo:
    """Facts about the runner that the dump's metadata records."""

    hidden_size: int | None = None
    dtype: Any = None
    model: str | None = None
    runner: str | None = None
    #: Where ``hidden_size`` was read (``text_config.hidden_size``, ``runner``, …).
    hidden_size_source: str | None = None
    #: modality → placeholder token id, from the model's config.
    tokens: dict[str, int] = field(default_factory=dict)
    #: Deepstack levels the encoder's rows carry, from the model's config (0: none; None:
    #: unknown).
    deepstack_levels: int | None = None


def item_of(entry: object) -> object:
    """The kwargs item of a batching entry: ``(modality, item)`` (0.15+) or the item itself."""
    if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str):
        return entry[1]
    return entry


def prompt_of(runner: object, req_id: object) -> tuple[int, ...] | None:
    """The prompt's token ids of request ``req_id``, from the V1 runner's ``requests`` (their
    ``CachedRequestState.prompt_token_ids``); None when unknown (prompt embeddings, V2)."""
    requests = getattr(runner, "requests", None)
    state = requests.get(req_id) if isinstance(requests, dict) else None
    ids = getattr(state, "prompt_token_ids", None)
    if not isinstance(ids, list | tuple) or not all(isinstance(i, int) for i in ids):
        return None
    return tuple(ids)


def item_info(
    position: object,
    *,
    modality: object,
    identifier: object,
    req_id: object,
    prompt: tuple[int, ...] | None = None,
) -> ItemInfo:
    offset = getattr(position, "offset", None)
    length = getattr(position, "length", None)
    return ItemInfo(
        modality=modality if isinstance(modality, str) else None,
        identifier=identifier if isinstance(identifier, str) else None,
        req_id=req_id if isinstance(req_id, str) else None,
        offset=offset if isinstance(offset, int) else None,
        length=length if isinstance(length, int) else None,
        is_embed=getattr(position, "is_embed", None),
        prompt_token_ids=prompt,
    )


def unpack(result: object, size: int) -> list[Sequence[Any]]:
    """The ``size`` sequences a preparation step returned (ValueError on another shape)."""
    if not isinstance(result, tuple | list) or len(result) != size:
        raise ValueError(f"expected {size} sequences, got {type(result).__name__}")
    return [part if isinstance(part, Sequence) else list(part) for part in result]


def tp_rank() -> int | None:
    """The tensor-parallel rank, without importing anything new."""
    return loaded_tp_rank("vllm.distributed.parallel_state")


def engine_version() -> str | None:
    """The vLLM release running (None when unknown)."""
    return loaded_version("vllm")


def batch_context(
    outputs: Any,
    expected: int | None,
    infos: list[ItemInfo | None] | None,
    *,
    runner: RunnerInfo,
    phase: str,
    rank: int | None,
) -> tuple[list[Any] | None, Any]:
    """Each item's ``is_embed`` mask (None when no item's range is known) and the dump's
    :class:`~mmcli.capture._common.CaptureContext` for one encoder batch."""
    import torch

    from mmcli._version import __version__
    from mmcli.capture.context import CaptureContext

    masks: list[Any] | None = None
    ranges: list[tuple[int, int]] | None = None
    modality = None
    if infos and any(info is not None for info in infos):
        masks = []
        ranges = []
        for info in infos:
            if info is None or info.length is None:
                masks.append(None)
                continue
            mask = info.is_embed
            if isinstance(mask, torch.Tensor):
                mask = mask.detach().to("cpu", torch.bool)
            else:  # no mask: every position of the range is an embedding
                mask = torch.ones(info.length, dtype=torch.bool)
            masks.append(mask)
            if info.offset is not None:
                ranges.append((info.offset, info.length))
            modality = modality or info.modality
        if len(ranges) != len(infos):
            ranges = None
    dtype = runner.dtype if isinstance(runner.dtype, torch.dtype) else None
    versions = {"mmcli": __version__}
    vllm_version = engine_version()
    if vllm_version:
        versions["vllm"] = vllm_version
    extra = {"runner": runner.runner} if runner.runner else {}
    if runner.hidden_size is not None and runner.hidden_size_source:
        extra["hidden_size_source"] = runner.hidden_size_source
    modalities = sorted({i.modality for i in infos or () if i is not None and i.modality})
    # The prompt's token ids when the batch is one request's (what `mmcli compare` pairs by,
    # as the transformers capture records them).
    input_ids = None
    known = [info for info in infos or () if info is not None]
    if known and len(known) == len(infos or ()) and len({i.req_id for i in known}) == 1:
        prompt = known[0].prompt_token_ids
        input_ids = torch.tensor(prompt, dtype=torch.int64) if prompt else None
    identifiers = [info.identifier for info in infos or () if info is not None]
    if identifiers and all(identifiers):
        extra["mm_hashes"] = ",".join(i for i in identifiers if i)
    context = CaptureContext(
        input_ids=input_ids,
        placeholder_ranges=ranges,
        expected_num_items=expected,
        hidden_size=runner.hidden_size,
        deepstack_levels=runner.deepstack_levels,
        placeholder_token_ids=tokens_for(ModelFacts(tokens=runner.tokens), modalities),
        tp_rank=rank,
        dtype=dtype,
        modality=modality,
        model=runner.model,
        engine="vllm",
        versions=versions,
        phase=phase,
        extra=extra,
    )
    return masks, context
