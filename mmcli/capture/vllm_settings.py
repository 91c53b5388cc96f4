"""The engine plugins' settings: the MMCLI_DUMP_* environment, checked once, and its capturers.

Shared by the vLLM plugin (:mod:`mmcli.capture.vllm`) and the SGLang plugin
(:mod:`mmcli.capture.sglang`); ``engine`` names the dumps' engine and the logger.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ENV_DIR = "MMCLI_DUMP_DIR"
ENV_MODE = "MMCLI_DUMP_MODE"
ENV_MAX = "MMCLI_DUMP_MAX"
ENV_RANKS = "MMCLI_DUMP_RANKS"

logger = logging.getLogger("mmcli.capture.vllm")


def _logger(engine: str) -> logging.Logger:
    return logger if engine == "vllm" else logging.getLogger(f"mmcli.capture.{engine}")


@dataclass
class Settings:
    """What :func:`register` read from the environment (checked there, used at capture)."""

    environ: dict[str, str]
    capturers: dict[int | None, Any] = field(default_factory=dict)  # rank -> Capturer | None
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
        from mmcli.capture import _common

        try:
            _common.parse_mode(self.environ.get(ENV_MODE))
            _common.parse_max(self.environ.get(ENV_MAX))
            _common.rank_selected(0, self.environ.get(ENV_RANKS))
        except Exception as exc:
            _logger(self.engine).error("mmcli: capture disabled: %s", exc)
            return False
        return True

    def capturer(self, rank: int | None) -> Any:
        """This process's :class:`~mmcli.capture._common.Capturer` for ``rank`` (None when
        the rank is not selected)."""
        with self.lock:
            if rank not in self.capturers:
                from mmcli.capture._common import Capturer

                self.capturers[rank] = (
                    Capturer.from_env(engine=self.engine, rank=rank, environ=self.environ)
                    if self.valid()
                    else None
                )
            return self.capturers[rank]

    @property
    def mode(self) -> str:
        return (self.environ.get(ENV_MODE) or "failure").strip().lower()
