"""Capture from a transformers vision-language model: ``mmcli.capture.transformers(model, dir)``.

Works with any model whose (inner) module defines ``get_placeholder_mask`` and one or more of
``get_image_features``, ``get_video_features``, ``get_audio_features`` (the transformers v5
API; in v4 the same methods exist from 4.54 on, where they return the features themselves
rather than an output whose ``pooler_output`` holds them; both are understood). Inside the
``with`` block, those methods and that module's ``forward`` are wrapped on the instance (the
class is untouched, and everything is restored on exit):

* each ``get_<modality>_features``: its per-item outputs (``pooler_output``; Qwen3-VL
  deepstack levels are concatenated to each item as vLLM does, with ``deepstack_levels``
  recorded). A prompt with several modalities is one dump: the items of each modality in
  the order the model encoded them, ``item_modalities`` naming each item's;
* ``get_placeholder_mask``: the prompt's token ids, from which each item's placeholder range
  and mask are found (runs of its modality's token, matched to items by length); a mask
  check that raises (``Video features and video tokens do not match``) is recorded with
  its error;
* ``forward``: the batch is recorded when the model raises (mode ``failure``: the dump
  carries the error text; the exception propagates unchanged), and in ``check``/``always``
  also after a clean call; a prefill whose prompt holds placeholder tokens but never called
  an encoder is recorded as an encoder that returned None.

For a batch of several sequences the token ids are concatenated row by row, which is the
order the model merges image features in.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from mmcli._version import __version__
from mmcli.capture._common import DEFAULT_MAX_DUMPS, Capturer, Mode
from mmcli.capture.context import CaptureContext
from mmcli.capture.model_config import MODALITIES, model_facts

_MISSING: Any = object()


@dataclass
class _Batch:
    """What one ``forward`` call has seen so far."""

    input_ids: torch.Tensor | None
    prefill: bool
    outputs: dict[str, Any] = field(default_factory=dict)  # modality → what it returned
    deepstack_levels: int | None = None
    recorded: bool = False
    masked: set[str] = field(default_factory=set)  # modalities whose mask check passed
    extra: dict[str, str] = field(default_factory=dict)

    def encoded(self, modality: str, out: Any) -> None:
        self.outputs[modality], levels = _items_of(out)
        self.deepstack_levels = self.deepstack_levels or levels


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


def _features_modality(name: str) -> str | None:
    """``image_features`` → ``image`` (a get_placeholder_mask parameter), else None."""
    stem = name.removesuffix("_features")
    return stem if stem != name and stem in MODALITIES else None


class _Session:
    """The wrappers of one ``with`` block over one model."""

    def __init__(self, model: Any, capturer: Capturer, context: CaptureContext) -> None:
        self.model = model
        self.capturer = capturer
        config = getattr(model, "config", None)
        facts = model_facts(config)
        self.tokens = facts.tokens
        #: 0 when the config has a vision tower without deepstack (rows are hidden-wide).
        self.no_deepstack = facts.deepstack_levels == 0
        versions = {"mmcli": __version__, "torch": torch.__version__}
        try:
            import transformers

            versions["transformers"] = transformers.__version__
        except ImportError:  # pragma: no cover - a duck-typed model without transformers
            pass
        tp = getattr(model, "_tp_size", None) or getattr(model, "tp_size", None)
        dtype = getattr(model, "dtype", None)
        extra = dict(context.extra)
        if context.hidden_size is None and facts.hidden_size_source:
            extra["hidden_size_source"] = facts.hidden_size_source
        self.context = context.with_(
            hidden_size=context.hidden_size or facts.hidden_size,
            extra=extra,
            dtype=context.dtype or (dtype if isinstance(dtype, torch.dtype) else None),
            model=context.model or getattr(config, "model_type", None),
            engine=context.engine or "transformers",
            versions={**versions, **context.versions},
            tp_size=context.tp_size or (int(tp) if isinstance(tp, int) and tp > 1 else None),
        )
        self.stack: list[_Batch] = []
        self.patched: list[tuple[Any, str, Any]] = []

    # ---------------------------------------------------------------- patching

    def install(self) -> int:
        """Wrap every module defining ``get_placeholder_mask`` and an encoder; return how many
        were wrapped."""
        targets = [
            m
            for m in self.model.modules()
            if callable(getattr(type(m), "get_placeholder_mask", None))
            and any(callable(getattr(type(m), f"get_{x}_features", None)) for x in MODALITIES)
        ]
        for module in targets:
            for modality in MODALITIES:
                if callable(getattr(type(module), f"get_{modality}_features", None)):
                    self._patch(module, f"get_{modality}_features", self._features(modality))
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

    def _features(self, modality: str) -> Any:
        def factory(original: Any) -> Any:
            @functools.wraps(original)  # generate() reads its signature
            def get_features(*args: Any, **kwargs: Any) -> Any:
                # generate() runs the encoder before the prefill, outside any forward
                batch = self.stack[-1] if self.stack else _Batch(None, True)
                try:
                    out = original(*args, **kwargs)
                except Exception as exc:
                    if not batch.recorded:
                        batch.extra["encoder_raised"] = "1"
                        batch.outputs[modality] = _Raised(type(exc).__name__)
                        self._record(batch, error=exc)
                    raise
                if self.stack:
                    batch.encoded(modality, out)
                return out

            return get_features

        return factory

    def _mask(self, original: Any) -> Any:
        signature = inspect.signature(original)

        @functools.wraps(original)
        def get_placeholder_mask(*args: Any, **kwargs: Any) -> Any:
            batch = self.stack[-1] if self.stack else None
            try:
                named = signature.bind(*args, **kwargs).arguments
            except TypeError:
                named = dict(kwargs)
            checked = {
                m for k, v in named.items() if v is not None and (m := _features_modality(k))
            }
            ids = named.get("input_ids")
            if batch is not None and isinstance(ids, torch.Tensor):
                batch.input_ids = ids
            try:
                result = original(*args, **kwargs)
            except Exception as exc:
                if batch is not None and checked and not batch.recorded:
                    self._record(batch, error=exc)
                raise
            if batch is not None:
                batch.masked |= checked
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
            if isinstance(encoded, dict):
                for modality in MODALITIES:
                    if encoded.get(modality) is not None:
                        batch.encoded(modality, encoded[modality])
            self.stack.append(batch)
            try:
                result = original(*args, **kwargs)
            except Exception as exc:
                if not batch.recorded and batch.outputs:
                    # Raised after every encoder's mask check passed: not the encoders' error.
                    merged = batch.masked >= set(batch.outputs)
                    self._record(batch, error=None if merged else exc)
                raise
            finally:
                self.stack.pop()
            if not batch.recorded:
                if batch.outputs:
                    self._record(batch)
                elif batch.prefill and self._holds_placeholders(batch):
                    batch.outputs[next(iter(self.tokens))] = None
                    self._record(batch)  # the encoder never ran for a prompt with items
            return result

        return forward

    # ---------------------------------------------------------------- recording

    def _holds_placeholders(self, batch: _Batch) -> bool:
        if self.capturer.mode == "failure" or batch.input_ids is None or not self.tokens:
            return False
        tokens = torch.tensor(list(self.tokens.values()), device=batch.input_ids.device)
        return bool(torch.isin(batch.input_ids, tokens).any())

    def _record(self, batch: _Batch, *, error: BaseException | None = None) -> None:
        batch.recorded = True
        modalities = list(batch.outputs)
        values = [batch.outputs[m] for m in modalities]
        ids = None if batch.input_ids is None else batch.input_ids.detach().reshape(-1).cpu()
        per_item = [_rows(v) for v in values]
        outputs: Any
        if len(values) == 1 or None in per_item:
            # one modality, or one that returned no tensors: that one is the record
            pick = next((i for i, rows in enumerate(per_item) if rows is None), 0)
            modalities, values, per_item = [modalities[pick]], [values[pick]], [per_item[pick]]
            outputs = values[0]
        else:
            outputs = [t for v in values for t in (list(v.unbind(0)) if _is_t(v) else v)]
        ranges: list[tuple[int, int]] | None = None
        masks = None
        if ids is not None and all(m in self.tokens for m in modalities):
            found = [
                item_ranges(runs_of(ids, self.tokens[m]), rows)
                for m, rows in zip(modalities, per_item, strict=True)
            ]
            if all(r is not None for r in found):
                ranges = [span for r in found for span in r or ()]
                masks = [torch.ones(n, dtype=torch.bool) for _, n in ranges]
        tagged = [m for m, rows in zip(modalities, per_item, strict=True) for _ in rows or ()]
        extra = {**self.context.extra, **batch.extra}
        if tagged:
            extra["item_modalities"] = ",".join(tagged)
        tokens = [self.tokens[m] for m in modalities if m in self.tokens]
        ctx = self.context.with_(
            input_ids=ids,
            placeholder_ranges=ranges,
            placeholder_token_ids=self.context.placeholder_token_ids or tokens or None,
            modality=self.context.modality or ",".join(modalities),
            deepstack_levels=self._levels(batch),
            phase="prefill" if batch.prefill else "decode",
            extra=extra,
        )
        self.capturer.record(outputs, is_embed=masks, context=ctx, error=error)

    def _levels(self, batch: _Batch) -> int | None:
        """The deepstack levels joined to this batch's rows (else the context's), or 0 when
        the config's vision tower has none; None when unknown (a config naming levels whose
        features did not come with the batch: its rows were not joined)."""
        levels = batch.deepstack_levels or self.context.deepstack_levels
        return 0 if levels is None and self.no_deepstack else levels


def _is_t(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


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
    """Capture ``model``'s encoder batches (image, video, audio) into ``directory`` while the
    block runs.

    ``when``: ``failure`` (only batches the model raised on), ``check`` (also batches
    mmcli's own diagnosis finds an error in) or ``always``. Yields the
    :class:`~mmcli.capture._common.Capturer` (``.written`` lists the files). Raises
    ``TypeError`` when no module of ``model`` has ``get_placeholder_mask`` and a
    ``get_image_features`` (or video, audio) encoder.
    """
    capturer = Capturer(directory, mode=when, max_dumps=max_dumps, engine="transformers")
    session = _Session(model, capturer, context or CaptureContext())
    try:
        if not session.install():
            raise TypeError(
                f"{type(model).__name__} has no module with get_image_features (or "
                "get_video_features, get_audio_features) and get_placeholder_mask "
                "(transformers >= 4.54 vision-language models have both)"
            )
        yield capturer
    finally:
        session.restore()
