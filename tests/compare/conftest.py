"""Pairs for the compare tests: the repository's sample encoder outputs, transformed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

import mmcli
from mmcli.compare import CompareReport

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "dumps" / "healthy.safetensors"


@pytest.fixture(scope="session")
def base() -> list[torch.Tensor]:
    """samples/dumps/healthy.safetensors' three bf16 items: 24 rows (a 4×6 grid), 16, and 36
    (a 6×6 grid), 64 wide."""
    with mmcli.load_dump(SAMPLE) as dump:
        return dump.items()


Compare = Callable[..., CompareReport]


@pytest.fixture
def compare(tmp_path: Path) -> Compare:
    """``compare(ref_items, cand_items, **options)``: write both dumps, compare them."""
    count = iter(range(1000))

    def run(
        ref: Sequence[torch.Tensor],
        cand: Sequence[torch.Tensor],
        *,
        ref_meta: dict[str, Any] | None = None,
        cand_meta: dict[str, Any] | None = None,
        **options: Any,
    ) -> CompareReport:
        n = next(count)
        a = mmcli.dump_encoder_outputs(
            tmp_path / f"ref{n}.safetensors", list(ref), **(ref_meta or {})
        )
        b = mmcli.dump_encoder_outputs(
            tmp_path / f"cand{n}.safetensors", list(cand), **(cand_meta or {})
        )
        options.setdefault("device", "cpu")
        return mmcli.compare_dumps(a, b, **options)

    return run
