"""What every capture path shares: modes, the dump directory, the file budget, naming, writing.

Engine integrations (transformers here; the vLLM and SGLang plugins) hand each encoder batch
to one :class:`Capturer`, which decides whether to write it and writes it as an ``mm_dump``
file (v2 when sequence context is given)::

    cap = Capturer.from_env(engine="vllm", rank=tp_rank)   # None unless MMCLI_DUMP_DIR is set
    if cap is not None:
        try:
            engine_check(outputs)                          # the engine's own check
        except Exception as exc:
            cap.record(outputs, is_embed=masks, context=ctx, error=exc)
            raise                                          # the engine's error, unchanged
        else:
            cap.record(outputs, is_embed=masks, context=ctx)

Modes: ``failure`` (default) writes only batches passed with ``error``; ``check`` also runs
mmcli's own diagnosis in memory and writes batches with an error finding; ``always`` writes
every batch. At most ``max_dumps`` files are written per :class:`Capturer` (per process;
``MMCLI_DUMP_MAX``, default 32; 0 writes none). The environment is read and checked in
:mod:`mmcli.capture.settings`. The directory is created with mode 0700; files appear whole
or not at all (:mod:`mmcli.atomic`), named
``{engine}-{phase}-r{rank}-p{pid}-{seq:04d}-{reason}.safetensors``. :meth:`Capturer.record`
never raises: a capture that fails warns once and the engine carries on.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import sys
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mmcli.capture.context import CaptureContext
from mmcli.capture.settings import (
    DEFAULT_MAX_DUMPS,
    ENV_DIR,
    ENV_MAX,
    ENV_MODE,
    ENV_RANKS,
    Mode,
    parse_max,
    parse_mode,
    parse_ranks,
    rank_selected,
)
from mmcli.errors import InputError

__all__ = [
    "DEFAULT_MAX_DUMPS",
    "CaptureContext",
    "Capturer",
    "Mode",
    "Settings",
    "make_dump_dir",
    "parse_max",
    "parse_mode",
    "rank_selected",
]

_SAFE = re.compile(r"[^A-Za-z0-9_.]+")


def make_dump_dir(directory: str | os.PathLike[str]) -> Path:
    """Create ``directory`` (and parents) with mode 0700 when missing; return it.

    An existing directory is used as it is (its mode is the owner's choice).
    """
    path = Path(directory)
    if not path.is_dir():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask
    return path


class Capturer:
    """Decides which encoder batches to write, and writes them (see the module docstring)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        mode: Mode | str = "failure",
        max_dumps: int = DEFAULT_MAX_DUMPS,
        engine: str = "mmcli",
        rank: int | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.mode: Mode = parse_mode(mode)
        self.max_dumps = max_dumps
        self.engine = engine
        self.rank = rank
        self.written: list[Path] = []
        self.skipped = 0  # batches that would have been written past the budget
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._warned = False

    @classmethod
    def from_env(
        cls,
        *,
        engine: str,
        rank: int | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Capturer | None:
        """A capturer configured by ``MMCLI_DUMP_DIR``/``_MODE``/``_MAX``/``_RANKS``, or None
        when ``MMCLI_DUMP_DIR`` is unset or empty, or ``rank`` is not selected."""
        env = os.environ if environ is None else environ
        directory = env.get(ENV_DIR, "")
        if not directory or not rank_selected(rank, env.get(ENV_RANKS)):
            return None
        return cls(
            directory,
            mode=parse_mode(env.get(ENV_MODE)),
            max_dumps=parse_max(env.get(ENV_MAX)),
            engine=engine,
            rank=rank,
        )

    @property
    def remaining(self) -> int:
        """How many more files this capturer may write."""
        return max(self.max_dumps - len(self.written), 0)

    @property
    def checks(self) -> bool:
        """Whether healthy-looking batches must be diagnosed (mode ``check``)."""
        return self.mode == "check"

    def next_path(self, reason: str, phase: str | None = None) -> Path | None:
        """Reserve the next file name (creating the directory), or None past the budget."""
        with self._lock:
            if len(self.written) >= self.max_dumps:
                self.skipped += 1
                return None
            seq = next(self._seq)
            rank = "x" if self.rank is None else str(self.rank)
            name = "-".join(
                _SAFE.sub("_", part)
                for part in (self.engine, phase or "batch", f"r{rank}", f"p{os.getpid()}")
            )
            path = make_dump_dir(self.directory) / f"{name}-{seq:04d}-{reason}.safetensors"
            self.written.append(path)
            return path

    def diagnose(
        self,
        outputs: object,
        *,
        is_embed: object = None,
        context: CaptureContext | None = None,
        item_counts: Sequence[int] | None = None,
    ) -> list[str]:
        """The codes of mmcli's error findings on this batch (in memory, nothing written)."""
        from mmcli.capture._check import error_codes

        codes: list[str] = error_codes(outputs, is_embed, context or CaptureContext(), item_counts)
        return codes

    def record(
        self,
        outputs: object,
        *,
        is_embed: object = None,
        context: CaptureContext | None = None,
        error: BaseException | str | None = None,
        item_counts: Sequence[int] | None = None,
    ) -> Path | None:
        """Write this batch if the mode says so; return the file written, or None.

        ``outputs``: per-item tensors, one stacked tensor, one merged 2-D tensor (with
        ``item_counts``: rows per item, as SGLang concatenates), or anything else the encoder
        returned (None included: its type is recorded). ``is_embed``: per-item 1-D bool masks
        over each item's placeholder range. ``error``: the engine's exception (or its text)
        when it failed; the batch is then written in every mode. Never raises.
        """
        try:
            if error is not None:
                reason = "failure"
            elif self.mode == "always":
                reason = "always"
            elif self.mode == "check" and self.diagnose(
                outputs, is_embed=is_embed, context=context, item_counts=item_counts
            ):
                reason = "check"
            else:
                return None
            return self.write(
                outputs,
                reason=reason,
                is_embed=is_embed,
                context=context,
                error=error,
                item_counts=item_counts,
            )
        except Exception as exc:  # capture must never break the engine
            self._warn(exc)
            return None

    def write(
        self,
        outputs: object,
        *,
        reason: str = "always",
        is_embed: object = None,
        context: CaptureContext | None = None,
        error: BaseException | str | None = None,
        item_counts: Sequence[int] | None = None,
    ) -> Path | None:
        """Write this batch now (within the budget; None past it). Raises on a bad input."""
        from mmcli.dump.io import dump_encoder_outputs

        ctx = context or CaptureContext()
        path = self.next_path(reason, ctx.phase)
        if path is None:
            return None
        kw = ctx.writer_kwargs()
        if kw.get("engine") is None:
            kw["engine"] = self.engine
        if kw.get("tp_rank") is None and self.rank is not None:
            kw["tp_rank"] = self.rank
        kw["capture_reason"] = reason
        if error is not None:
            kw["engine_error"] = error_text(error)
        try:
            return dump_encoder_outputs(
                path, outputs, is_embed=is_embed, item_counts=item_counts, **kw
            )
        except BaseException:
            with self._lock:
                self.written.remove(path)
            raise

    def _warn(self, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"mmcli capture could not write a dump ({type(exc).__name__}: {exc}); "
                "the engine carries on",
                RuntimeWarning,
                stacklevel=3,
            )


def _logger(engine: str) -> logging.Logger:
    return logging.getLogger(f"mmcli.capture.{engine}")


@dataclass
class Settings:
    """What an engine plugin's ``register`` read from the environment (checked there, used at
    capture): one :class:`~mmcli.capture._common.Capturer` per rank, made on first use."""

    environ: dict[str, str]
    capturers: dict[int | None, Capturer | None] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    engine: str = "vllm"

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, engine: str = "vllm"
    ) -> Settings | None:
        """Settings from the environment, or None when ``MMCLI_DUMP_DIR`` is unset/empty.

        A bad ``MMCLI_DUMP_MODE``/``_MAX``/``_RANKS`` is logged and leaves the plugin inert
        (a plugin must not stop the engine from starting).
        """
        env = dict(os.environ if env is None else env)
        if not env.get(ENV_DIR, "").strip():
            return None
        settings = cls(environ=env, engine=engine)
        # Check the other variables now when the engine has already imported torch (vLLM
        # and SGLang always have by the time they load plugins); else at the first capture.
        if "torch" in sys.modules and not settings.valid():
            return None
        return settings

    def valid(self) -> bool:
        """Whether the mode, budget and ranks parse; logs the problem when not."""
        try:
            parse_mode(self.environ.get(ENV_MODE))
            parse_max(self.environ.get(ENV_MAX))
            parse_ranks(self.environ.get(ENV_RANKS))
        except InputError as exc:
            _logger(self.engine).error("mmcli: capture disabled: %s", exc)
            return False
        return True

    def capturer(self, rank: int | None) -> Capturer | None:
        """This process's capturer for ``rank`` (None when the rank is not selected or the
        settings are bad)."""
        with self.lock:
            if rank not in self.capturers:
                self.capturers[rank] = (
                    Capturer.from_env(engine=self.engine, rank=rank, environ=self.environ)
                    if self.valid()
                    else None
                )
            return self.capturers[rank]

    @property
    def mode(self) -> str:
        """The capture mode as set (checked by :meth:`valid`)."""
        return (self.environ.get(ENV_MODE) or "failure").strip().lower()

    @property
    def directory(self) -> str:
        """Where the dumps go."""
        return self.environ.get(ENV_DIR, "")


def error_text(error: BaseException | str, limit: int = 4000) -> str:
    """``Type: message`` of an exception (or the text itself), at most ``limit`` characters."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def loaded_tp_rank(parallel_state: str) -> int | None:
    """The tensor-parallel rank from the engine's already-imported ``parallel_state`` module
    (``get_tensor_model_parallel_rank``), else ``RANK`` / ``LOCAL_RANK``; imports nothing."""
    import sys

    get = getattr(sys.modules.get(parallel_state), "get_tensor_model_parallel_rank", None)
    if callable(get):
        try:
            return int(get())
        except Exception:
            pass
    for key in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(key)
        if value is not None and value.isdigit():
            return int(value)
    return None


def loaded_version(*modules: str) -> str | None:
    """The ``__version__`` string of the first of ``modules`` already imported that has one
    (the engine's version, read without importing anything)."""
    import sys

    for name in modules:
        version = getattr(sys.modules.get(name), "__version__", None)
        if isinstance(version, str):
            return version
    return None
