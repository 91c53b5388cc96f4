"""The encoder-profile tests' model folders (tests/kv/whatif/models, PROVENANCE.md there): a
folder's JSON files, and the dummy batch of a config on the settings the family tests derive
their numbers at."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from mmcli.kv.releases import rules_for
from mmcli.kv.whatif.mm_dummy import DummyBatch, dummy_batch

#: max_model_len 32,768, ``vllm serve``'s 8,192 batched tokens on an H100, 256 sequences.
BATCH: Final = {"max_model_len": 32768, "max_num_batched_tokens": 8192, "max_num_seqs": 256}


def model_json(folder: Path, name: str = "config.json") -> dict[str, Any]:
    """The JSON object in ``folder``'s file ``name``."""
    return dict(json.loads((folder / name).read_text()))


def folder_batch(doc: dict[str, Any], version: str, **fields: Any) -> DummyBatch | None:
    """``doc``'s dummy batch on vLLM ``version``'s rules: :data:`BATCH` and ``fields``."""
    return dummy_batch(doc, rules_for(version), **(BATCH | fields))
