"""The vLLM plugin's registration and its wrappers of the engine's encoder step.

Installed as the entry point ``vllm.general_plugins: mmcli = mmcli.capture.vllm:register``;
vLLM calls :func:`register` in every process it starts. The plugin is **inert unless
``MMCLI_DUMP_DIR`` is set**, and registering it imports neither torch nor vLLM: it adds an
import hook that patches the runner modules when vLLM imports them (and patches at once
any that are already imported).

Environment (read at :func:`register`):

* ``MMCLI_DUMP_DIR`` — where dumps go (created ``0700``); unset: the plugin does nothing.
* ``MMCLI_DUMP_MODE`` — ``failure`` (default: dump when the engine's check raises, then
  re-raise the engine's own error unchanged), ``check`` (also run mmcli's diagnosis on every
  encoder batch and dump the batches with an error finding), ``always`` (dump every batch).
* ``MMCLI_DUMP_MAX`` — at most this many dumps per process (default 32; 0: none).
* ``MMCLI_DUMP_RANKS`` — comma-separated tensor-parallel ranks that dump (default: all).

What it sees. The engine checks every encoder batch with ``sanity_check_mm_encoder_outputs``,
which each runner module imports *by name* from ``vllm.v1.worker.utils``; the plugin
replaces that name in ``vllm.v1.worker.utils`` and in every runner module below, so the
wrapper receives exactly the outputs the engine checks. Each item's placeholder range
(``offset``, ``length``, ``is_embed``) comes from the runner's own preparation step, matched
to the batch by the identity of the item's kwargs as they pass through the engine's batching
generator (``group_and_batch_mm_kwargs`` / ``group_mm_kwargs_by_modality``), so batches,
modality sorting and sequential video encoding are followed as the engine ran them. Start-up
profiling runs dummy items that have no placeholder range: those dumps have no masks and
``phase=profile``.

The merge of the checked outputs into the prompt's embeddings (``_merge_multimodal_embeddings``)
is wrapped too (:mod:`mmcli.capture.vllm.merge`): an output the check passes but the merge
refuses (a wrong hidden size) is written with the merge's error.

Releases covered (0.10.2 to 0.34, V1 runner and Model Runner V2): see ``docs/capture-vllm.md``.

Every name is probed with ``getattr``; on a release where the preparation step or the
batching generator differs, the plugin still dumps what the check sees but without masks
(and says so once in the log). The engine's exception is never replaced: mmcli's own
failures while capturing are logged and swallowed.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from mmcli.capture import import_hook
from mmcli.capture._common import Settings
from mmcli.capture.model_config import model_facts
from mmcli.capture.vllm import merge
from mmcli.capture.vllm.items import (
    ItemInfo,
    RunnerInfo,
    item_info,
    item_of,
    prompt_of,
    unpack,
)
from mmcli.capture.vllm.state import Checked, holder, state
from mmcli.capture.vllm.write import capture as _capture

__all__ = ["register", "unregister", "patch_module", "RUNNER_MODULES"]

logger = logging.getLogger("mmcli.capture.vllm")


CHECK_NAME = "sanity_check_mm_encoder_outputs"
UTILS_MODULE = "vllm.v1.worker.utils"
BATCHING_NAMES = ("group_and_batch_mm_kwargs", "group_mm_kwargs_by_modality")
# Methods that list the scheduled items with their placeholder ranges (see the table above).
PREPARE_METHODS = (
    "_batch_mm_inputs_from_scheduler",
    "_batch_mm_kwargs_from_scheduler",
    "prepare_mm_inputs",
)
PROFILE_METHODS = ("profile_run", "profile_encoder_cache")
RUNNER_MODULES = (
    "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.worker.tpu_model_runner",
    "vllm.v1.worker.cpu_model_runner",
    "vllm.v1.worker.gpu.mm.encoder_runner",
    "vllm.v1.worker.gpu.model_runner",
    "vllm.v1.worker.cpu.encoder_runner",
    "vllm.v1.worker.cpu.model_runner",
    "vllm.v1.worker.cpu.standalone_model_runner",
)
_TARGETS = frozenset((UTILS_MODULE, *RUNNER_MODULES))
_MARK = "__mmcli_wrapped__"
_OWNER = "vllm"
#: Checked batches kept for the merge (a step's; bounded where no preparation step is seen
#: to start a new one).
MAX_CHECKED = 8


# --------------------------------------------------------------------------- registration


def register() -> None:
    """vLLM's entry point: install the hooks when ``MMCLI_DUMP_DIR`` is set; else do nothing.

    Cheap and idempotent: no torch or vLLM import here.
    """
    settings = Settings.from_env(engine="vllm")
    if settings is None:
        return
    if holder.settings is None:
        holder.settings = settings
    import_hook.watch(_OWNER, patch_module, names=_TARGETS, prefixes=(merge.MODELS_PREFIX,))
    for module in import_hook.loaded(_TARGETS, (merge.MODELS_PREFIX,)):
        patch_module(module)
    logger.info(
        "mmcli: capturing encoder outputs to %s (mode %s)",
        holder.settings.directory,
        holder.settings.mode,
    )


def unregister() -> None:
    """Remove the import hook and forget the settings (for tests; patched modules stay)."""
    holder.settings = None
    import_hook.forget(_OWNER)


# --------------------------------------------------------------------------- patching


def patch_module(module: ModuleType) -> list[str]:
    """Wrap the check, the batching generator and the runner methods found in ``module``.

    Returns the names wrapped (already-wrapped names are skipped, so this is idempotent).
    """
    if module.__name__.startswith(merge.MODELS_PREFIX):
        return merge.patch_module(module)
    done: list[str] = []
    check = getattr(module, CHECK_NAME, None)
    if callable(check) and not getattr(check, _MARK, False):
        setattr(module, CHECK_NAME, _wrap_check(check))
        done.append(CHECK_NAME)
    if module.__name__ == UTILS_MODULE:
        return done
    for name in BATCHING_NAMES:
        batching = getattr(module, name, None)
        if callable(batching) and not getattr(batching, _MARK, False):
            setattr(module, name, _wrap_batching(batching))
            done.append(name)
    for cls in list(vars(module).values()):
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        for name in PREPARE_METHODS:
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, _MARK, False):
                setattr(cls, name, _wrap_prepare(method, name, module.__name__))
                done.append(f"{cls.__name__}.{name}")
        for name in PROFILE_METHODS:
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, _MARK, False):
                setattr(cls, name, _wrap_profile(method))
                done.append(f"{cls.__name__}.{name}")
    if done:
        logger.debug("mmcli: patched %s: %s", module.__name__, ", ".join(done))
    return done


def _marked(fn: Callable[..., Any]) -> Callable[..., Any]:
    setattr(fn, _MARK, True)
    return fn


def _runner_info(runner: object, module_name: str) -> RunnerInfo:
    """The model's facts as this runner sees them. The hidden size is the language model's,
    read from the model's config (``model_config.hf_config``; a V2 encoder runner has no
    ``model_config``: its model's ``config``), else the runner's own ``hidden_size`` (vLLM
    sets it from ``model_config.get_hidden_size()`` or the inputs-embeds size)."""
    model_config = getattr(runner, "model_config", None)
    hf_config = getattr(model_config, "hf_config", None)
    if hf_config is None:
        hf_config = getattr(getattr(runner, "model", None), "config", None)
    facts = model_facts(hf_config)
    hidden = facts.hidden_size
    source = facts.hidden_size_source
    if hidden is None:
        hidden = getattr(runner, "hidden_size", None)
        if not isinstance(hidden, int) and model_config is not None:
            get = getattr(model_config, "get_hidden_size", None)
            try:
                hidden = get() if callable(get) else None
            except Exception:
                hidden = None
        source = "runner" if isinstance(hidden, int) else None
    model = getattr(model_config, "model", None)
    if model is None:
        previous = state.runner.model
        model = previous
    kind = "v2" if ".gpu." in module_name or ".cpu." in module_name else "v1"
    return RunnerInfo(
        hidden_size=hidden if isinstance(hidden, int) else None,
        dtype=getattr(runner, "dtype", None),
        model=model if isinstance(model, str) else None,
        runner=kind,
        hidden_size_source=source,
        tokens=dict(facts.tokens),
        deepstack_levels=facts.deepstack_levels,
    )


def _record(method: str, runner: object, args: tuple[Any, ...], result: object) -> None:
    """Map each scheduled item's kwargs to its placeholder range, from the preparation step."""
    items: dict[int, tuple[object, ItemInfo]] = {}
    if method == "_batch_mm_inputs_from_scheduler":  # (hashes, [(modality, item)], [(req, pos)])
        hashes, kwargs, refs = unpack(result, 3)
        for mm_hash, entry, ref in zip(hashes, kwargs, refs, strict=False):
            req_id, position = ref
            modality = entry[0] if isinstance(entry, tuple) else None
            item = item_of(entry)
            prompt = prompt_of(runner, req_id)
            info = item_info(
                position, modality=modality, identifier=mm_hash, req_id=req_id, prompt=prompt
            )
            items[id(item)] = (item, info)
    elif method == "_batch_mm_kwargs_from_scheduler":  # ([item], [(hash, pos)])
        kwargs, hashes_pos = unpack(result, 2)
        for item, (mm_hash, position) in zip(kwargs, hashes_pos, strict=False):
            modality = getattr(item, "modality", None)
            info = item_info(position, modality=modality, identifier=mm_hash, req_id=None)
            items[id(item)] = (item, info)
    elif method == "prepare_mm_inputs":  # V2: (hashes, [(modality, item)]); ranges on features
        scheduled = args[0] if args else None
        features = getattr(runner, "req_id_to_mm_features", None)
        if features is None:
            features = getattr(getattr(runner, "encoder_cache", None), "mm_features", None)
        if isinstance(scheduled, dict) and features is not None:
            for req_id, input_ids in scheduled.items():
                req_features = features.get(req_id) if hasattr(features, "get") else None
                if req_features is None:
                    continue
                for index in input_ids:
                    feature = req_features[index]
                    item = getattr(feature, "data", None)
                    if item is None:
                        continue
                    info = item_info(
                        getattr(feature, "mm_position", None),
                        modality=getattr(feature, "modality", None),
                        identifier=getattr(feature, "identifier", None),
                        req_id=req_id,
                        prompt=prompt_of(runner, req_id),
                    )
                    items[id(item)] = (item, info)
    state.items = items


def _wrap_prepare(method: Callable[..., Any], name: str, module_name: str) -> Callable[..., Any]:
    @functools.wraps(method)
    def prepare(self: object, *args: Any, **kwargs: Any) -> Any:
        result = method(self, *args, **kwargs)
        if holder.settings is not None:
            state.checked = []  # a new step: the previous step's batches were merged
            try:
                if name == "prepare_mm_inputs" and not args and kwargs:
                    args = tuple(kwargs.values())
                state.runner = _runner_info(self, module_name)
                _record(name, self, args, result)
            except Exception:
                state.items = {}
                logger.debug("mmcli: could not read placeholder ranges", exc_info=True)
        return result

    return _marked(prepare)


def _wrap_profile(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def profile(self: object, *args: Any, **kwargs: Any) -> Any:
        previous = state.phase
        state.phase = "profile"
        try:
            if holder.settings is not None:
                try:
                    state.runner = _runner_info(self, type(self).__module__)
                except Exception:
                    pass
            return method(self, *args, **kwargs)
        finally:
            state.phase = previous

    return _marked(profile)


def _wrap_batching(batching: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(batching)
    def batched(mm_kwargs: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if holder.settings is None or state.batch_owner is not None:
            # Off, or nested inside a batching loop the outer call already follows
            # (e.g. sequential video encoding in the V1 runner).
            yield from batching(mm_kwargs, *args, **kwargs)
            return
        entries = list(mm_kwargs)
        known = state.items
        infos: list[ItemInfo | None] = []
        for entry in entries:
            item = item_of(entry)
            found = known.get(id(item))
            infos.append(found[1] if found is not None and found[0] is item else None)
        token = object()
        state.batch_owner = token
        position = 0
        try:
            for group in batching(entries, *args, **kwargs):
                count = group[1] if isinstance(group, tuple) and len(group) == 3 else None
                if isinstance(count, int):
                    state.batch = infos[position : position + count]
                    position += count
                else:
                    state.batch = None
                yield group
        finally:
            if state.batch_owner is token:
                state.batch_owner = None
                state.batch = None
                state.items = {}

    return _marked(batched)


def _wrap_check(check: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(check)
    def sanity_check_mm_encoder_outputs(mm_embeddings: Any, *args: Any, **kwargs: Any) -> Any:
        settings = holder.settings
        if settings is None:
            return check(mm_embeddings, *args, **kwargs)
        expected = kwargs.get("expected_num_items", args[0] if args else None)
        batch, state.batch = state.batch, None
        phase = state.phase
        infos = None if phase == "profile" else batch
        try:
            result = check(mm_embeddings, *args, **kwargs)
        except Exception as error:
            _capture(settings, mm_embeddings, expected, infos, phase, error)
            raise  # the engine's own error, unchanged
        if settings.mode != "failure":
            _capture(settings, mm_embeddings, expected, infos, phase, None)
        if phase != "profile":  # kept (by reference) for the merge that follows
            kept = state.checked[-(MAX_CHECKED - 1) :] if MAX_CHECKED > 1 else []
            state.checked = [*kept, Checked(mm_embeddings, expected, infos, phase)]
        return result

    return _marked(sanity_check_mm_encoder_outputs)
