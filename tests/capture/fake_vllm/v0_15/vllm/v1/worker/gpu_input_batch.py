"""Stand-in CachedRequestState (0.15+: one feature spec per item)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CachedRequestState:
    req_id: str
    mm_features: list[Any] = field(default_factory=list)
    prompt_token_ids: list[int] | None = None
