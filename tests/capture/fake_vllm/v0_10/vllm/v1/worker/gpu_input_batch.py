"""Stand-in CachedRequestState (0.10-0.11: parallel lists per request)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CachedRequestState:
    req_id: str
    mm_kwargs: list[Any] = field(default_factory=list)
    mm_hashes: list[str] = field(default_factory=list)
    mm_positions: list[Any] = field(default_factory=list)
