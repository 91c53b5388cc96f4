"""The vLLM plugin's state: the settings read at registration, and what each thread has seen.

Kept apart from the wrappers so that the encoder-check wrappers (:mod:`.plugin`) and the merge
wrapper (:mod:`.merge`) share it without importing each other.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from mmcli.capture._common import Settings
from mmcli.capture.vllm.items import ItemInfo, RunnerInfo


@dataclass
class Checked:
    """The latest encoder batch the engine's check passed (references only, nothing copied):
    written with the merge's error if the merge of those outputs fails."""

    outputs: object
    expected: object
    infos: list[ItemInfo | None] | None
    phase: str


class Holder:
    """The settings the plugin runs with (None: inert)."""

    settings: Settings | None = None


class State(threading.local):
    def __init__(self) -> None:
        # id(kwargs item) -> (item, info), from the latest preparation step.
        self.items: dict[int, tuple[object, ItemInfo]] = {}
        self.batch: list[ItemInfo | None] | None = None
        self.batch_owner: object | None = None
        self.phase: str = "execute"
        self.runner = RunnerInfo()
        self.warned_no_masks = False
        self.checked: list[Checked] = []  # this step's batches, until their merge


holder = Holder()
state = State()
