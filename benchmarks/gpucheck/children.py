"""What runs inside the script's own children (``--child``): the public API under the sync
debug mode, and the big dump written with the public API."""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .sizes import FULL, QUICK

#: What CUDA's sync debug mode warns for each synchronising call (mmcli.bench.timing).
SYNC_WARNING = "called a synchronizing CUDA operation"


def grid(rows: int, cols: int) -> list[bool]:
    """Interleaved: ``rows`` runs of ``cols`` embeddings, each followed by a break token."""
    return ([True] * cols + [False]) * rows


def child_sync_api(device: str, quick: bool) -> int:
    """Call the public fast scatter/gather under ``set_sync_debug_mode("error")``; print JSON."""
    import random

    import torch

    import mmcli

    dev = torch.device(device)
    cuda = dev.type == "cuda"
    rng = random.Random(0)
    masks: dict[str, list[bool]] = {
        "empty": [],
        "all-false-9": [False] * 9,
        "all-true-9": [True] * 9,
        "pattern-35": [True, False, True, True, False] * 7,
        "interleaved-576": grid(24, 23),
        "tail-break-2304": [True] * 2303 + [False],
        "random90-2304": [rng.random() < 0.9 for _ in range(2304)],
    }
    if not quick:
        masks["interleaved-9216"] = grid(96, 95)
        masks["contiguous-9216"] = [False] + [True] * 9214 + [False]
    hiddens = (64, 130) if quick else (4096, 130)
    dtypes = (torch.bfloat16, torch.float16, torch.float32)

    @contextlib.contextmanager
    def sync_mode(mode: str) -> Iterator[None]:
        if not cuda:
            yield
            return
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode(mode)
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode(previous)

    def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.numel() == 0:
            return True
        wa = a.contiguous().reshape(-1).view(torch.uint8)
        wb = b.contiguous().reshape(-1).view(torch.uint8)
        return bool(torch.equal(wa, wb))

    def synchronize() -> None:
        if cuda:
            torch.cuda.synchronize(dev)

    cases: list[dict[str, Any]] = []
    seed = 0
    for mask_name, mask in masks.items():
        for hidden in hiddens:
            for dtype in dtypes:
                seed += 1
                name = f"{mask_name} x {hidden} {str(dtype).removeprefix('torch.')}"
                case: dict[str, Any] = {"name": name, "sync_error": None, "bit_equal": None}
                try:
                    gen = torch.Generator().manual_seed(seed)
                    n = sum(mask)
                    is_embed = torch.tensor(mask, dtype=torch.bool).to(dev)
                    embeds = torch.randn(n, hidden, generator=gen).to(dtype).to(dev)
                    placeholders = torch.randn(len(mask), hidden, generator=gen).to(dtype).to(dev)
                    synchronize()
                    try:
                        with sync_mode("error"):
                            scattered = mmcli.scatter_mm_placeholders(embeds, is_embed, impl="fast")
                            gathered = mmcli.gather_mm_placeholders(
                                placeholders, is_embed, impl="fast", num_embeds=n
                            )
                            roundtrip = mmcli.gather_mm_placeholders(
                                scattered, is_embed, impl="fast", num_embeds=n
                            )
                    except RuntimeError as err:
                        case["sync_error"] = str(err).splitlines()[0][:300]
                        cases.append(case)
                        continue
                    synchronize()
                    ref_scattered = mmcli.scatter_mm_placeholders(embeds, is_embed)
                    ref_gathered = mmcli.gather_mm_placeholders(placeholders, is_embed)
                    case["bit_equal"] = (
                        same_bits(scattered, ref_scattered)
                        and same_bits(gathered, ref_gathered)
                        and same_bits(roundtrip, embeds)
                    )
                except Exception as err:  # recorded, and the other cases still run
                    case["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
                    case["bit_equal"] = False
                cases.append(case)
    doc: dict[str, Any] = {
        "device": str(dev),
        "torch": torch.__version__,
        "sync_debug_mode": "error" if cuda else "n/a (cpu)",
        "cases": cases,
        "control_reference_raises": None,
        "gather_without_count_syncs": None,
    }
    if cuda:
        # Control: the reference reads the mask (nonzero): the mode must catch that.
        mask_t = torch.tensor(grid(4, 5), dtype=torch.bool, device=dev)
        rows = torch.randn(20, 8, device=dev)
        synchronize()
        try:
            with sync_mode("error"):
                mmcli.scatter_mm_placeholders(rows, mask_t)
            doc["control_reference_raises"] = False
        except RuntimeError:
            doc["control_reference_raises"] = True
        synchronize()
        placeholders_t = torch.randn(24, 8, device=dev)
        synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with sync_mode("warn"):
                mmcli.gather_mm_placeholders(placeholders_t, mask_t, impl="fast")
        synchronize()
        doc["gather_without_count_syncs"] = sum(SYNC_WARNING in str(w.message) for w in caught)
    print(json.dumps(doc))
    return 0


def child_build_dump(path: Path, quick: bool) -> int:
    """Write the big dump with the public API: each item (rows, hidden) bf16, break every 64."""
    import torch

    import mmcli

    s = QUICK if quick else FULL
    gen = torch.Generator().manual_seed(0)
    embeds = [
        torch.randn(s.dump_rows, s.dump_hidden, generator=gen, dtype=torch.bfloat16)
        for _ in range(s.dump_items)
    ]
    breaks = (s.dump_rows + 63) // 64
    mask = torch.ones(s.dump_rows + breaks, dtype=torch.bool)
    mask[64::65] = False
    if int(mask.sum()) != s.dump_rows:
        raise SystemExit(f"mask has {int(mask.sum())} True positions, not {s.dump_rows}")
    path.parent.mkdir(parents=True, exist_ok=True)
    mmcli.dump_encoder_outputs(
        path,
        embeds,
        is_embed=[mask] * s.dump_items,
        expected_num_items=s.dump_items,
        hidden_size=s.dump_hidden,
        dtype=torch.bfloat16,
        model="gpu_check",
    )
    print(json.dumps({"path": str(path), "bytes": path.stat().st_size}))
    return 0
