"""Capture from a transformers vision-language model: ``mmcli.capture.transformers(model, dir)``.

Works with any model whose (inner) module defines ``get_image_features`` and
``get_placeholder_mask`` (the transformers v5 API; in v4 the same methods exist from 4.54 on,
where ``get_image_features`` returns the features themselves rather than an output whose
``pooler_output`` holds them; both are understood). Inside the ``with`` block, those
methods and that module's ``forward`` are wrapped on the instance (the class is untouched,
and everything is restored on exit):

* ``get_image_features``: its per-item outputs (``pooler_output``; Qwen3-VL deepstack levels
  are concatenated to each item as vLLM does, with ``deepstack_levels`` recorded);
* ``get_placeholder_mask``: the prompt's token ids, from which each item's placeholder range
  and mask are found (runs of the image token, matched to items by length);
* ``forward``: the batch is recorded when the model raises (mode ``failure``: the dump
  carries the error text; the exception propagates unchanged), and in ``check``/``always``
  also after a clean call; a prefill whose prompt holds image tokens but never called the
  encoder is recorded as an encoder that returned None.

For a batch of several sequences the token ids are concatenated row by row, which is the
order the model merges image features in.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from mmcli._version import __version__
from mmcli.capture._common import DEFAULT_MAX_DUMPS, Capturer, Mode
from mmcli.capture.context import CaptureContext

_MISSING: Any = object()


@dataclass
class _Batch:
    """What one ``forward`` call has seen so far."""

    input_ids: torch.Tensor | None
    prefill: bool
    outputs: Any = _MISSING
    deepstack_levels: int | None = None
    recorded: bool = False
    extra: dict[str, str] = field(default_factory=dict)


def _items_of(out: Any) -> tuple[Any, int | None]:
    """Per-item features from what ``get_image_features`` returned (v5 output or v4 value)."""
    if out is None or isinstance(out, torch.Tensor | list):
        return out, None
    feats = getattr(out, "pooler_output", _MISSING)
    if feats is _MISSING:
        return out, None  # a tuple (return_dict=False) or something else: kept as it is
    deepstack = getattr(out, "deepstack_features", None)
    if isinstance(feats, tuple):
        feats = list(feats)
    elif isinstance(feats, torch.Tensor) and feats.ndim == 3:
        feats = list(feats.unbind(0))  # (images, tokens, hidden), e.g. Gemma 3: per item
    if deepstack and isinstance(feats, list):
        levels = [list(level) for level in deepstack]
        if all(len(level) == len(feats) for level in levels):
            joined = [
                torch.cat([item, *(level[i] for level in levels)], dim=-1)
                for i, item in enumerate(feats)
            ]
            return joined, len(levels)
    return feats, None


def _rows(outputs: Any) -> list[int] | None:
    """Rows per item (all dims but the last), or None when not tensors."""
    if isinstance(outputs, torch.Tensor):
        items = list(outputs.unbind(0)) if outputs.ndim >= 2 else [outputs]
    elif isinstance(outputs, list) and all(isinstance(t, torch.Tensor) for t in outputs):
        items = outputs
    else:
        return None
    return [int(torch.Size(t.shape[:-1]).numel()) if t.ndim else 1 for t in items]


def runs_of(ids: torch.Tensor, token: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of each run of ``token`` in 1-D ``ids``."""
    hit = (ids == token).to(torch.int8)
    if not bool(hit.any()):
        return []
    edges = torch.diff(torch.cat([hit.new_zeros(1), hit, hit.new_zeros(1)])).nonzero().flatten()
    bounds = edges.tolist()
    return [(bounds[k], bounds[k + 1] - bounds[k]) for k in range(0, len(bounds), 2)]


def item_ranges(
    runs: list[tuple[int, int]], rows: list[int] | None
) -> list[tuple[int, int]] | None:
    """Each item's placeholder range: runs matched to items by length in order (runs left
    over are stray placeholders); else the runs themselves when there is one per item."""
    if rows is None:
        return None
    matched: list[tuple[int, int]] = []
    j = 0
    for n in rows:
        while j < len(runs) and runs[j][1] != n:
            j += 1
        if j == len(runs):
            break
        matched.append(runs[j])
        j += 1
    if len(matched) == len(rows):
        return matched
    return list(runs) if len(runs) == len(rows) else None


class _Session:
    """The wrappers of one ``with`` block over one model."""

    def __init__(self, model: Any, capturer: Capturer, context: CaptureContext) -> None:
        self.model = model
        self.capturer = capturer
        config = getattr(model, "config", None)
        text = getattr(config, "text_config", None) or config
        token = getattr(config, "image_token_id", None)
        if token is None:
            token = getattr(config, "image_token_index", None)
        self.token = None if token is None else int(token)
        versions = {"mmcli": __version__, "torch": torch.__version__}
        try:
            import transformers

            versions["transformers"] = transformers.__version__
        except ImportError:  # pragma: no cover - a duck-typed model without transformers
            pass
        tp = getattr(model, "_tp_size", None) or getattr(model, "tp_size", None)
        dtype = getattr(model, "dtype", None)
        self.context = context.with_(
            placeholder_token_ids=context.placeholder_token_ids
            or ([self.token] if self.token is not None else None),
            hidden_size=context.hidden_size or getattr(text, "hidden_size", None),
            dtype=context.dtype or (dtype if isinstance(dtype, torch.dtype) else None),
            model=context.model or getattr(config, "model_type", None),
            modality=context.modality or "image",
            engine=context.engine or "transformers",
            versions={**versions, **context.versions},
            tp_size=context.tp_size or (int(tp) if isinstance(tp, int) and tp > 1 else None),
        )
        self.stack: list[_Batch] = []
        self.patched: list[tuple[Any, str, Any]] = []

    # ---------------------------------------------------------------- patching

    def install(self) -> int:
        """Wrap every module defining both methods; return how many were wrapped."""
        targets = [
            m
            for m in self.model.modules()
            if callable(getattr(type(m), "get_placeholder_mask", None))
            and callable(getattr(type(m), "get_image_features", None))
        ]
        for module in targets:
            self._patch(module, "get_image_features", self._features)
            self._patch(module, "get_placeholder_mask", self._mask)
            self._patch(module, "forward", self._forward)
        return len(targets)

    def _patch(self, module: Any, name: str, factory: Any) -> None:
        had = name in vars(module)
        self.patched.append((module, name, vars(module)[name] if had else _MISSING))
        setattr(module, name, factory(getattr(module, name)))

    def restore(self) -> None:
        for module, name, previous in reversed(self.patched):
            if previous is _MISSING:
                delattr(module, name)
            else:
                setattr(module, name, previous)
        self.patched.clear()

    # ---------------------------------------------------------------- wrappers

    def _features(self, original: Any) -> Any:
        @functools.wraps(original)  # generate() reads its signature
        def get_image_features(*args: Any, **kwargs: Any) -> Any:
            # generate() runs the encoder before the prefill, outside any forward
            batch = self.stack[-1] if self.stack else _Batch(None, True)
            try:
                out = original(*args, **kwargs)
            except Exception as exc:
                if not batch.recorded:
                    batch.extra["encoder_raised"] = "1"
                    self._record(batch, error=exc, outputs=type(exc).__name__)
                raise
            if self.stack:
                batch.outputs, batch.deepstack_levels = _items_of(out)
            return out

        return get_image_features

    def _mask(self, original: Any) -> Any:
        @functools.wraps(original)
        def get_placeholder_mask(*args: Any, **kwargs: Any) -> Any:
            batch = self.stack[-1] if self.stack else None
            image = kwargs.get("image_features", args[2] if len(args) > 2 else None)
            ids = kwargs.get("input_ids", args[0] if args else None)
            if batch is not None and isinstance(ids, torch.Tensor):
                batch.input_ids = ids
            try:
                result = original(*args, **kwargs)
            except Exception as exc:
                if batch is not None and image is not None and not batch.recorded:
                    self._record(batch, error=exc)
                raise
            if batch is not None and image is not None and not batch.recorded:
                self._record(batch)
            return result

        return get_placeholder_mask

    def _forward(self, original: Any) -> Any:
        @functools.wraps(original)  # generate() reads its signature
        def forward(*args: Any, **kwargs: Any) -> Any:
            ids = kwargs.get("input_ids", args[0] if args else None)
            cache = kwargs.get("cache", kwargs.get("past_key_values"))
            length = getattr(cache, "get_seq_length", None)
            prefill = cache is None or not callable(length) or int(length()) == 0
            batch = _Batch(ids if isinstance(ids, torch.Tensor) else None, prefill)
            encoded = kwargs.get("mm_encoder_outputs")  # v5 generate(): encoded beforehand
            if isinstance(encoded, dict) and encoded.get("image") is not None:
                batch.outputs, batch.deepstack_levels = _items_of(encoded["image"])
            self.stack.append(batch)
            try:
                result = original(*args, **kwargs)
            except Exception as exc:
                if not batch.recorded and batch.outputs is not _MISSING:
                    self._record(batch, error=exc)
                raise
            finally:
                self.stack.pop()
            if not batch.recorded:
                if batch.outputs is not _MISSING:
                    self._record(batch)
                elif batch.prefill and self._holds_placeholders(batch):
                    batch.outputs = None  # the encoder never ran for a prompt with images
                    self._record(batch)
            return result

        return forward

    # ---------------------------------------------------------------- recording

    def _holds_placeholders(self, batch: _Batch) -> bool:
        if self.capturer.mode == "failure" or batch.input_ids is None or self.token is None:
            return False
        return bool((batch.input_ids == self.token).any())

    def _record(
        self, batch: _Batch, *, error: BaseException | None = None, outputs: Any = _MISSING
    ) -> None:
        batch.recorded = True
        outputs = batch.outputs if outputs is _MISSING else outputs
        if isinstance(outputs, str):  # the encoder raised: record that, not a None return
            outputs = _Raised(outputs)
        ids = None if batch.input_ids is None else batch.input_ids.detach().reshape(-1).cpu()
        ranges = masks = None
        if ids is not None and self.token is not None:
            ranges = item_ranges(runs_of(ids, self.token), _rows(outputs))
            if ranges is not None:
                masks = [torch.ones(n, dtype=torch.bool) for _, n in ranges]
        ctx = self.context.with_(
            input_ids=ids,
            placeholder_ranges=ranges,
            deepstack_levels=batch.deepstack_levels or self.context.deepstack_levels,
            phase="prefill" if batch.prefill else "decode",
            extra={**self.context.extra, **batch.extra},
        )
        self.capturer.record(outputs, is_embed=masks, context=ctx, error=error)


class _Raised:
    """Stands for an encoder that raised instead of returning (its type is what is recorded)."""

    def __init__(self, name: str) -> None:
        self.name = name


@contextmanager
def transformers(
    model: Any,
    directory: str | os.PathLike[str],
    *,
    when: Mode | str = "failure",
    max_dumps: int = DEFAULT_MAX_DUMPS,
    context: CaptureContext | None = None,
) -> Iterator[Capturer]:
    """Capture ``model``'s image-encoder batches into ``directory`` while the block runs.

    ``when``: ``failure`` (only batches the model raised on), ``check`` (also batches
    mmcli's own diagnosis finds an error in) or ``always``. Yields the
    :class:`~mmcli.capture._common.Capturer` (``.written`` lists the files). Raises
    ``TypeError`` when no module of ``model`` has ``get_image_features`` and
    ``get_placeholder_mask``.
    """
    capturer = Capturer(directory, mode=when, max_dumps=max_dumps, engine="transformers")
    session = _Session(model, capturer, context or CaptureContext())
    try:
        if not session.install():
            raise TypeError(
                f"{type(model).__name__} has no module with get_image_features and "
                "get_placeholder_mask (transformers >= 4.54 vision-language models have both)"
            )
        yield capturer
    finally:
        session.restore()
