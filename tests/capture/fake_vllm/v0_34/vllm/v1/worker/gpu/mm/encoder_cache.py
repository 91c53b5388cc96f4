"""Stand-in Model Runner V2 encoder cache: features per request and outputs per hash."""

from __future__ import annotations


class EncoderCache:
    def __init__(self) -> None:
        self.mm_features: dict = {}
        self.encoder_outputs: dict = {}

    def add_request(self, req_id, mm_features) -> None:
        self.mm_features[req_id] = mm_features
