"""The SGLang plugin: registration, and its wrappers of the engine's embedding step.

Installed as the entry point ``sglang.srt.plugins: mmcli = mmcli.capture.sglang:register``;
SGLang 0.5.11 and later call :func:`register` from ``sglang.srt.plugins.load_plugins()``, which
each scheduler process (where the model runs) calls first thing. Earlier releases have no
plugin mechanism: there, call :func:`register` at the top level of the script that starts
``sglang.Engine`` (SGLang starts its schedulers with ``spawn``, which re-runs that top level in
each of them), or start the server with ``python -m mmcli.capture.sglang.launch`` in place of
``python -m sglang.launch_server``. The plugin is **inert unless ``MMCLI_DUMP_DIR`` is set**,
and registering it imports neither torch nor SGLang: it adds an import hook that patches the
embedding modules when SGLang imports them (and patches at once any already imported).

Environment: ``MMCLI_DUMP_DIR``, ``MMCLI_DUMP_MODE`` (``failure``, the default: dump when the
engine raises, then re-raise its own error unchanged; ``check``; ``always``),
``MMCLI_DUMP_MAX``, ``MMCLI_DUMP_RANKS`` (tensor-parallel ranks), as for the vLLM plugin.

What it sees. For each modality of a prefill batch, ``embed_mm_inputs`` calls
``get_embedding_and_mask``, which runs the encoder (the model's ``data_embedding_func``),
concatenates the rows of every item in the batch's chunk into one merged 2-D embedding, builds
the placeholder mask over the batch's ``input_ids`` and checks the two agree in
``_adjust_embedding_length`` (which raises when the embedding is short). The plugin wraps
``get_embedding_and_mask`` where it is defined and wherever it was imported by name
(``mm_utils`` imports it from ``mm_schedule`` from 0.5.18 on), ``_adjust_embedding_length`` in
the defining module's globals (to see the merged embedding before the engine trims it), the
encoder passed in (to see its outputs), and ``embed_mm_inputs`` (so an error in the scatter that
follows still dumps the step it failed on). Each item's rows and mask come from its pad values
in ``input_ids`` (:mod:`mmcli.capture.sglang.items`). Releases covered: ``docs/capture-sglang.md``.

Every name is probed with ``getattr``; where a release differs the plugin captures what it can
(without masks, or the returned embedding rather than the untrimmed one) and says so once in
the log. The engine's exception is never replaced: mmcli's own failures while capturing are
logged and swallowed.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from mmcli.capture import import_hook
from mmcli.capture._common import Settings
from mmcli.capture.sglang.calls import (
    ints,
    named_arguments,
    rebind,
    replace_argument,
    signature_of,
)
from mmcli.capture.sglang.items import Step, build_dump, tp_rank

__all__ = ["register", "unregister", "patch_module", "TARGET_MODULES"]

logger = logging.getLogger("mmcli.capture.sglang")

ENGINE = "sglang"
STEP_NAME = "get_embedding_and_mask"
ADJUST_NAME = "_adjust_embedding_length"
EMBED_NAME = "embed_mm_inputs"
MM_UTILS = "sglang.srt.managers.mm_utils"
MM_SCHEDULE = "sglang.srt.managers.mm_schedule"
#: Patched in this order (``mm_schedule`` defines the step that ``mm_utils`` imports, 0.5.18+).
TARGET_MODULES = (MM_SCHEDULE, MM_UTILS)
_MARK = "__mmcli_wrapped__"

_OWNER = "sglang"
_settings: Settings | None = None


# --------------------------------------------------------------------------- per-thread state


@dataclass
class _Scope:
    """One ``embed_mm_inputs`` call: the steps it ran that are not written yet."""

    steps: list[Step] = field(default_factory=list)
    dumped: bool = False  # the error came from a step, which dumped itself
    use_deepstack: Any = None  # as the model passed it: a bool (0.5.3), {modality: bool} later


class _State(threading.local):
    def __init__(self) -> None:
        self.step: Step | None = None
        self.scope: _Scope | None = None
        self.warned: set[str] = set()


_state = _State()


# --------------------------------------------------------------------------- registration


def register() -> None:
    """SGLang's entry point: install the hooks when ``MMCLI_DUMP_DIR`` is set; else nothing.

    Cheap and idempotent: no torch or SGLang import here.
    """
    global _settings
    settings = Settings.from_env(engine=ENGINE)
    if settings is None:
        return
    if _settings is None:
        _settings = settings
    import_hook.watch(_OWNER, patch_module, names=TARGET_MODULES)
    for name in TARGET_MODULES:  # mm_schedule first: it defines what mm_utils imports
        module = sys.modules.get(name)
        if module is not None:
            patch_module(module)
    logger.info(
        "mmcli: capturing multimodal embeddings to %s (mode %s)",
        _settings.directory,
        _settings.mode,
    )


def unregister() -> None:
    """Remove the import hook and forget the settings (for tests; patched modules stay)."""
    global _settings
    _settings = None
    import_hook.forget(_OWNER)


# --------------------------------------------------------------------------- patching


def patch_module(module: ModuleType) -> list[str]:
    """Wrap the embedding step, its length check and ``embed_mm_inputs`` found in ``module``,
    and rebind every ``sglang`` module that imported them by name.

    Returns the names wrapped (already-wrapped names are skipped, so this is idempotent).
    """
    done: list[str] = []
    for name, wrap in ((STEP_NAME, _wrap_step), (EMBED_NAME, _wrap_embed)):
        original = getattr(module, name, None)
        if not callable(original) or getattr(original, _MARK, False):
            continue
        wrapped = wrap(original)
        setattr(module, name, wrapped)
        rebind(original, wrapped)
        done.append(name)
        if name == STEP_NAME and _patch_adjust(original):
            done.append(ADJUST_NAME)
    if module.__name__ == MM_UTILS and not callable(getattr(module, STEP_NAME, None)):
        _warn_once(f"{MM_UTILS} has no {STEP_NAME} (a release not covered?): nothing is captured")
    if done:
        logger.debug("mmcli: patched %s: %s", module.__name__, ", ".join(done))
    return done


def _patch_adjust(step: Callable[..., Any]) -> bool:
    """Wrap the length check where the step looks it up (its defining module's globals)."""
    namespace = getattr(step, "__globals__", None)
    adjust = namespace.get(ADJUST_NAME) if isinstance(namespace, dict) else None
    if not callable(adjust) or getattr(adjust, _MARK, False):
        return False
    assert isinstance(namespace, dict)
    namespace[ADJUST_NAME] = _wrap_adjust(adjust)
    return True


def _marked(fn: Callable[..., Any]) -> Callable[..., Any]:
    setattr(fn, _MARK, True)
    return fn


def _wrap_step(step: Callable[..., Any]) -> Callable[..., Any]:
    signature = signature_of(step)

    @functools.wraps(step)
    def get_embedding_and_mask(*args: Any, **kwargs: Any) -> Any:
        settings = _settings
        if settings is None or signature is None:
            return step(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return step(*args, **kwargs)  # let the engine raise its own error
        arguments = named_arguments(signature, args, kwargs)
        encoder = arguments.get("data_embedding_func")
        items = arguments.get("embedding_items")
        seen = Step(
            items=list(items) if isinstance(items, list | tuple) else [],
            input_ids=arguments.get("input_ids"),
            placeholder_tensor=arguments.get("placeholder_tensor"),
            prefix_lens=ints(arguments.get("prefix_length")),
            extend_lens=ints(arguments.get("extend_length")),
            encoder=encoder,
            deepstack=_deepstack(seen_items=items),
        )
        if callable(encoder):
            replace_argument(signature, bound, "data_embedding_func", _recording(encoder))
        outer, _state.step = _state.step, seen
        try:
            result = step(*bound.args, **bound.kwargs)
        except Exception as error:
            _state.step = outer
            if _state.scope is not None:
                _state.scope.dumped = True  # the error is this step's, not the earlier ones'
            _capture(settings, seen, error)
            raise  # the engine's own error, unchanged
        _state.step = outer
        _after(settings, seen, result)
        return result

    return _marked(get_embedding_and_mask)


def _deepstack(seen_items: object) -> bool | None:
    """Whether the model asked for deepstack rows on this step's modality (None: unknown)."""
    scope = _state.scope
    flags = scope.use_deepstack if scope is not None else None
    if isinstance(flags, bool):  # 0.5.3: one flag for every modality
        return flags
    if not isinstance(flags, dict) or not isinstance(seen_items, list | tuple) or not seen_items:
        return None
    return bool(flags.get(getattr(seen_items[0], "modality", None)))


def _after(settings: Settings, seen: Step, result: object) -> None:
    """Record a step that returned: ``(embedding, mask)``, or ``(embedding, mask,
    input_ids)`` from 0.5.8 on."""
    if not isinstance(result, tuple) or len(result) not in (2, 3) or result[0] is None:
        return
    if seen.merged is None:
        _warn_once(f"{ADJUST_NAME} not seen: dumping the embedding as the step returned it")
        seen.merged = result[0]
    seen.mask = result[1]
    if len(result) == 3:
        seen.input_ids = result[2]  # pruned video (EVS) rewrites them
    seen.calls = []  # the merged embedding is what counts now; drop the references
    if settings.mode != "failure":
        _capture(settings, seen, None)
    elif _state.scope is not None:
        clone = getattr(seen.input_ids, "clone", None)
        if callable(clone):  # embed_mm_inputs clamps them in place before its scatter
            seen.input_ids = clone()
        _state.scope.steps.append(seen)  # written if the scatter that follows fails


def _recording(encoder: Callable[..., Any]) -> Callable[..., Any]:
    """The encoder, recording each call's items and output in the current step."""

    @functools.wraps(encoder)
    def encode(*args: Any, **kwargs: Any) -> Any:
        output = encoder(*args, **kwargs)
        step = _state.step
        if step is not None:
            items = args[0] if args else next(iter(kwargs.values()), None)
            step.calls.append((list(items) if isinstance(items, list | tuple) else [], output))
        return output

    owner = getattr(encoder, "__self__", None)
    if owner is not None:
        # SGLang 0.5.18+ reads the encoder's __self__ (and __name__, kept by wraps) to decide
        # whether the model moves its features to the device itself.
        setattr(encode, "__self__", owner)  # noqa: B010
    return encode


def _wrap_adjust(adjust: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(adjust)
    def _adjust_embedding_length(embedding: Any, *args: Any, **kwargs: Any) -> Any:
        step = _state.step
        if step is not None:
            step.merged = embedding
        return adjust(embedding, *args, **kwargs)

    return _marked(_adjust_embedding_length)


def _wrap_embed(embed: Callable[..., Any]) -> Callable[..., Any]:
    signature = signature_of(embed)

    @functools.wraps(embed)
    def embed_mm_inputs(*args: Any, **kwargs: Any) -> Any:
        settings = _settings
        if settings is None or _state.scope is not None:
            return embed(*args, **kwargs)
        scope = _Scope(use_deepstack=named_arguments(signature, args, kwargs).get("use_deepstack"))
        _state.scope = scope
        try:
            return embed(*args, **kwargs)
        except Exception as error:
            if not scope.dumped:
                for seen in scope.steps:
                    _capture(settings, seen, error)
            raise  # the engine's own error, unchanged
        finally:
            _state.scope = None

    return _marked(embed_mm_inputs)


# --------------------------------------------------------------------------- capture


def _capture(settings: Settings, seen: Step, error: BaseException | None) -> bool:
    """Hand one step to this rank's capturer, which writes it when the mode says so.

    Returns whether a file was written. Never raises.
    """
    try:
        rank = tp_rank()
        capturer = settings.capturer(rank)
        if capturer is None:
            return False
        dump = build_dump(seen, rank=rank)
        if dump is None:
            return False
        for note in dump.notes:
            _warn_once(note)
        path = capturer.record(
            dump.outputs,
            is_embed=dump.masks,
            context=dump.context,
            error=error,
            item_counts=dump.item_counts,
        )
        if path is not None:
            logger.warning("mmcli: wrote %s", path)
        return path is not None
    except Exception:
        logger.exception("mmcli: could not capture the multimodal embedding")
        return False


def _warn_once(message: str) -> None:
    if message not in _state.warned:
        _state.warned.add(message)
        logger.warning("mmcli: %s", message)
