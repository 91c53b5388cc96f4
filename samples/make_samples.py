"""Write the sample dumps: samples/dumps/ (one healthy, one per common failure) and
samples/compare/ (a reference and three candidates for `mmcli compare`).

Run from the repository root: ``python samples/make_samples.py``. The output is deterministic
(seeded), tiny (hidden size 64), and written with ``mmcli.dump_encoder_outputs``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from mmcli import dump_encoder_outputs

OUT = Path(__file__).resolve().parent / "dumps"
COMPARE = OUT.parent / "compare"
HIDDEN = 64
META = {"dtype": "bfloat16", "modality": "image", "model": "toy-vlm"}


def grid_mask(rows: int, cols: int) -> torch.Tensor:
    """An image-break style mask: ``cols`` patch tokens, then one break token, per grid row."""
    mask = torch.ones(rows, cols + 1, dtype=torch.bool)
    mask[:, -1] = False
    return mask.flatten()


def items(gen: torch.Generator, counts: list[int], hidden: int = HIDDEN) -> list[torch.Tensor]:
    """Per-item encoder outputs of the given row counts."""
    return [torch.randn(n, hidden, generator=gen).to(torch.bfloat16) for n in counts]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(0)
    # Three images: a 4x6 grid with break tokens, a plain 16-token image, a 6x6 grid.
    masks = [grid_mask(4, 6), torch.ones(16, dtype=torch.bool), grid_mask(6, 6)]
    healthy = items(gen, [24, 16, 36])
    scattered = healthy[0].new_full((masks[0].numel(), HIDDEN), float("nan"))
    scattered[masks[0]] = healthy[0]
    common = {"expected_num_items": 3, "hidden_size": HIDDEN, **META}
    dump_encoder_outputs(
        OUT / "healthy.safetensors",
        healthy,
        is_embed=masks,
        placeholders=[scattered, None, None],
        **common,
    )
    # Precomputed embeddings passed with their batch dim: (1, tokens, hidden) per item.
    dump_encoder_outputs(
        OUT / "batch_dim_kept.safetensors",
        [t.unsqueeze(0) for t in items(gen, [24, 16, 36])],
        is_embed=masks,
        **common,
    )
    # The encoder dropped the last image.
    dump_encoder_outputs(
        OUT / "wrong_count.safetensors", items(gen, [24, 16]), is_embed=masks[:2], **common
    )
    # The vision tower's own width (32) returned: the projector to 64 was skipped.
    dump_encoder_outputs(
        OUT / "hidden_size_mismatch.safetensors",
        items(gen, [24, 16, 36], hidden=32),
        is_embed=masks,
        **common,
    )
    # fp16 overflow in the encoder: NaN in two rows of item 1.
    with_nan = items(gen, [24, 16, 36])
    with_nan[1][3, 5] = float("nan")
    with_nan[1][7] = float("nan")
    dump_encoder_outputs(OUT / "nan.safetensors", with_nan, is_embed=masks, **common)
    # The prompt carries one placeholder too many: 25 True positions for 24 rows.
    off = grid_mask(4, 6)
    off[-1] = True
    dump_encoder_outputs(
        OUT / "mask_off_by_one.safetensors",
        items(gen, [24, 16, 36]),
        is_embed=[off, masks[1], masks[2]],
        **common,
    )
    compare_samples()
    for path in sorted([*OUT.glob("*.safetensors"), *COMPARE.glob("*.safetensors")]):
        print(f"{path.relative_to(OUT.parent.parent)}  {path.stat().st_size} bytes")


def compare_samples() -> None:
    """A reference encoder output and three candidates: a second kernel's rounding (within
    the port and kernel profiles), rows scaled by 1/sqrt(hidden), patches in block-major order."""
    COMPARE.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(1)
    ref = items(gen, [16, 36])  # 16 tokens, a 6x6 grid of patches
    meta = {"hidden_size": HIDDEN, **META}
    dump_encoder_outputs(COMPARE / "ref.safetensors", ref, **meta)
    noise = [torch.randn(t.shape, generator=gen, dtype=torch.float64).clamp(-3, 3) for t in ref]
    port = [(t.double() + 2e-3 * n).to(torch.bfloat16) for t, n in zip(ref, noise, strict=True)]
    dump_encoder_outputs(COMPARE / "port.safetensors", port, **meta)
    scaled = [(t.double() / HIDDEN**0.5).to(torch.bfloat16) for t in ref]
    dump_encoder_outputs(COMPARE / "scaled.safetensors", scaled, **meta)
    block_major = torch.arange(36).reshape(3, 2, 3, 2).permute(0, 2, 1, 3).flatten()
    patches = [ref[0], ref[1][block_major]]
    dump_encoder_outputs(COMPARE / "patch_order.safetensors", patches, **meta)


if __name__ == "__main__":
    main()
