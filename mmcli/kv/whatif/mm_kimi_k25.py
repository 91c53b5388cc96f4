"""Kimi K2.5's dummy vision chunk (``KimiK25ProcessingInfo`` / ``KimiK25DummyInputsBuilder``,
vLLM kimi_k25.py from 0.15), for the encoder profile's dummy batch
(:mod:`mmcli.kv.whatif.mm_dummy`).

The model has one modality, ``vision_chunk`` (``get_supported_mm_limits``, no count of its
own: ``get_mm_max_tokens_per_item`` is not defined, so the budget counts the dummy item's
encoder outputs, each placeholder token one). The dummy item is the larger of a 3,000 × 3,000
image and a video chunk of ``temporal_merge_kernel_size`` such frames (the video chunk on a
tie), each counted by the image processor's ``media_tokens_calculator``: the NaViT resize of
the checkpoint's ``media_proc_cfg`` (``preprocessor_config.json``). A frame of W × H pixels is
scaled by min(1, √(limit / (⌊W / patch⌋ ⌊H / patch⌋)), side-limit × patch / W, side-limit ×
patch / H) (truncated to whole pixels, at most side-limit × patch a side), padded up to a
multiple of patch × merge, and gives (padded / (patch × merge))² tokens; ``limit`` is
``in_patch_limit`` for an image, ``in_patch_limit_each_frame`` (or ``in_patch_limit``) for a
frame of a chunk, at most round(``in_patch_limit_video`` / frames). A chunk's frames are pooled
in time: one frame's tokens, every frame's patches through the encoder.

The encoder (MoonViT-3D, kimi_k25_vit.py): ``vt_num_hidden_layers`` blocks of
``vt_hidden_size`` with an fc0 → GELU → fc1 MLP ``vt_intermediate_size`` wide (not gated) over
the padded frames' patches, then the temporal pool, the 2 × 2 merge and the projector to the
text hidden size.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

from mmcli.kv.whatif.mm_common import FamilyItems, NotMirrored, Tower, num, vision_section

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules

#: The dummy frame's side (``MaxImageTokenMeta``, kimi_k25.py).
_SIDE: Final = 3000
#: The ``media_proc_cfg`` keys the dummy item's size depends on.
_KEYS: Final = (
    "patch_size",
    "merge_kernel_size",
    "in_patch_limit",
    "patch_limit_on_one_side",
    "temporal_merge_kernel_size",
)


def kimi_k25(
    doc: dict[str, Any],
    rules: EngineRules,
    processor: dict[str, Any] | None,
    kwargs: dict[str, Any],
    limits: dict[str, int],
) -> FamilyItems:
    """Tokens an item, (tower, patches) an item and encoder output rows an item."""
    if rules.kimi_k25_dummy != "image-or-chunk":
        raise NotMirrored(f"vLLM {rules.release} does not serve Kimi K2.5 (kimi_k25)")
    if kwargs:
        raise NotMirrored(
            f"--mm-processor-kwargs {', '.join(sorted(kwargs))} of Kimi K2.5's media processor"
        )
    if set(limits) - {"vision_chunk"}:
        raise NotMirrored(
            "--limit-mm-per-prompt for Kimi K2.5 other than vision_chunk (its one modality)"
        )
    cfg = (processor or {}).get("media_proc_cfg")
    if not isinstance(cfg, dict) or any(cfg.get(k) is None for k in _KEYS):
        raise NotMirrored(
            "Kimi K2.5's media processor settings are not known: give the model folder (with "
            "its preprocessor_config.json media_proc_cfg)"
        )
    if cfg.get("fixed_output_tokens") is not None:
        raise NotMirrored("Kimi K2.5's media_proc_cfg fixed_output_tokens is not mirrored")
    merge = cfg["merge_kernel_size"]
    merge = merge[0] if isinstance(merge, list) and merge else merge
    patch = num(cfg, "patch_size")
    merge = num({"merge_kernel_size": merge}, "merge_kernel_size")
    side_limit = num(cfg, "patch_limit_on_one_side")
    frames = num(cfg, "temporal_merge_kernel_size")
    image_limit = num(cfg, "in_patch_limit")
    frame_limit = cfg.get("in_patch_limit_each_frame") or image_limit
    if cfg.get("in_patch_limit_video") is not None:
        frame_limit = min(round(num(cfg, "in_patch_limit_video") / frames), frame_limit)
    image = _grid(image_limit, patch, merge, side_limit)
    chunk = _grid(frame_limit, patch, merge, side_limit)
    vision = vision_section(doc)
    tower = Tower(
        hidden=_vt(vision, "hidden_size"),
        intermediate=_vt(vision, "intermediate_size"),
        gated=False,
        layers=_vt(vision, "num_hidden_layers"),
        pixels_per_patch=3 * patch * patch,
        out_hidden=_text_hidden(doc),
    )
    if chunk**2 >= image**2:
        tokens, patches = chunk**2, frames * (chunk * merge) ** 2
    else:
        tokens, patches = image**2, (image * merge) ** 2
    return {"vision_chunk": tokens}, {"vision_chunk": (tower, patches)}, {"vision_chunk": tokens}


def _grid(limit: int, patch: int, merge: int, side_limit: int) -> int:
    """Tokens a side of the dummy square frame after the NaViT resize and padding."""
    cells = max(1.0, _SIDE // patch) ** 2
    scale = min(1.0, math.sqrt(limit / cells), side_limit * patch / _SIDE)
    side = min(max(1, int(_SIDE * scale)), side_limit * patch)
    return -(-side // (patch * merge))


def _vt(vision: dict[str, Any], key: str) -> int:
    """A MoonViT size: the published configs write ``vt_``-prefixed keys."""
    return num(vision, key) if key in vision else num(vision, f"vt_{key}")


def _text_hidden(doc: dict[str, Any]) -> int:
    text = doc.get("text_config")
    if not isinstance(text, dict):
        raise NotMirrored("the config has no text_config")
    return num(text, "hidden_size")


__all__ = ["kimi_k25"]
