"""The dummy batch vLLM's profile run sends through a multimodal encoder: which modality, how
many items, and each item's placeholder tokens and encoder patches, derived per model family
from the config (and, for dynamic-resolution models, the image processor's ``max_pixels``).

vLLM (``MultiModalBudget``, multimodal/encoder_budget.py from 0.16, v1/worker/utils.py before;
0.10.0 in ``profile_run`` itself) takes each enabled modality's largest item
(``get_mm_max_tokens_per_item`` at ``max_model_len``, one item of each), the modality with the
most tokens an item, an encoder budget of max(``max_num_batched_tokens``, that item's tokens),
and max(1, min(budget // tokens, max_num_seqs × items a prompt)) items, where items a prompt is
the ``--limit-mm-per-prompt`` count (999 by default) and, from 0.10.1, at most
``max_model_len // tokens``. The families mirrored are Gemma 3 (a fixed SigLIP grid),
Qwen2-VL / Qwen2.5-VL (dynamic resolution, images and videos), Qwen3-VL
(:mod:`mmcli.kv.whatif.mm_qwen3`; Qwen3.5 / 3.6 too), Mistral 3
(:mod:`mmcli.kv.whatif.mm_mistral3`),
Gemma 4's dummy items (:mod:`mmcli.kv.whatif.mm_gemma4`, its forward not mirrored), Kimi K2.5
(:mod:`mmcli.kv.whatif.mm_kimi_k25`), LLaVA-NeXT (:mod:`mmcli.kv.whatif.mm_llava_next`),
LLaVA-OneVision (:mod:`mmcli.kv.whatif.mm_llava_onevision`), InternVL's original format
(:mod:`mmcli.kv.whatif.mm_internvl`), Llama 4 (:mod:`mmcli.kv.whatif.mm_llama4`) and
GLM-4.1V / 4.5V / 4.6V's dummy image and video (:mod:`mmcli.kv.whatif.mm_glm4v`); for
any other the caller names the encoder profile without estimating it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from mmcli.kv.whatif.mm_common import NotMirrored, Tower, image_shape, vision_section, vision_tower
from mmcli.kv.whatif.mm_common import num as _num
from mmcli.kv.whatif.mm_mistral3 import mistral3, own_format

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules

#: vLLM's default ``--limit-mm-per-prompt`` count on the V1 engine (config/multimodal.py).
DEFAULT_LIMIT: Final = 999
#: The most frames a dummy video has (``_MAX_FRAMES_PER_VIDEO``, qwen2_vl.py), by release rule.
_VIDEO_FRAME_CAP: Final = {"less-image-16": 16, "seq-16": 16, "seq-14": 14}
#: The model types with Qwen3-VL's processing and vision tower: Qwen3-VL (dense and MoE;
#: Qwen3-VL-Embedding is a ``qwen3_vl``) and Qwen3.5 / Qwen3.6 (``qwen3_5``, ``qwen3_5_moe``,
#: whose ``Qwen3_5ProcessingInfo`` and dummy builder are Qwen3-VL's and whose tower is
#: ``Qwen3_VisionTransformer``, qwen3_5.py of every release that serves them).
QWEN3_VL: Final = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")


@dataclass(frozen=True)
class DummyBatch:
    """What the profile run encodes: ``items`` items of ``modality``, each ``tokens``
    placeholder tokens from ``patches`` encoder patches, under an encoder ``budget``."""

    modality: str
    tokens: int
    items: int
    patches: int
    budget: int
    tower: Tower
    #: The family rule applied and its inputs, printed with the component.
    inputs: dict[str, Any]
    #: Rows of encoder output an item (None: one a placeholder token; Qwen3-VL's video item
    #: before its timestamps were counted apart has 12.5 placeholder tokens a row).
    embeds: int | None = None
    #: Why the encoder forward of this batch is not estimated (None: it is).
    forward_note: str | None = None


def dummy_batch(
    doc: dict[str, Any],
    rules: EngineRules,
    *,
    max_model_len: int | None,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    limits: dict[str, int] | None = None,
    processor: dict[str, Any] | None = None,
    mm_kwargs: dict[str, Any] | None = None,
    video_processor: dict[str, Any] | None = None,
    tokenizer: frozenset[str] | None = None,
) -> DummyBatch | None:
    """The dummy batch of ``doc``'s model (None: every modality disabled by ``limits``;
    ``tokenizer``: InternVL's video tokens its tokenizer has, None where not read).
    Raises :class:`NotMirrored` for a family or setting not mirrored."""
    kind = str(doc.get("model_type", ""))
    limits = _counts(limits or {})
    kwargs = dict(mm_kwargs or {})
    rows: dict[str, int] = {}
    note: str | None = None
    #: The processor's own item limits (get_supported_mm_limits), under the user's.
    supported: dict[str, int] = {}
    if kind == "gemma3":
        per_item, towers = _gemma3(doc, rules, kwargs)
    elif kind in ("qwen2_vl", "qwen2_5_vl"):
        if max_model_len is None:
            raise NotMirrored("the video of most features needs max_model_len")
        per_item, towers = _qwen_vl(doc, rules, max_model_len, limits, processor, kwargs)
    elif kind in QWEN3_VL:
        from mmcli.kv.whatif.mm_qwen3 import qwen3_vl

        if max_model_len is None:
            raise NotMirrored("the video of most features needs max_model_len")
        if kwargs:
            raise NotMirrored("--mm-processor-kwargs of Qwen3-VL's processors")
        per_item, towers, rows = qwen3_vl(
            doc, rules, max_model_len, limits, processor, video_processor, DEFAULT_LIMIT
        )
    elif kind == "mistral3" and not own_format(doc):
        per_item, towers, rows = mistral3(doc, rules, processor, kwargs, _text_hidden(doc))
    elif kind == "llava_next":
        from mmcli.kv.whatif.mm_llava_next import llava_next

        per_item, towers = llava_next(doc, processor, kwargs, _text_hidden(doc))
    elif kind == "internvl_chat":
        from mmcli.kv.whatif.mm_internvl import internvl_chat

        lengths = (max_model_len, max_num_batched_tokens)
        per_item, towers, rows = internvl_chat(
            doc, rules, limits, kwargs, DEFAULT_LIMIT, lengths, tokenizer
        )
    elif own_format(doc):
        raise NotMirrored(
            "a Mistral own-format checkpoint (params.json, tokenizer_mode mistral): its "
            "mistral_common processor's dummy items are not mirrored"
        )
    elif kind == "gemma4":
        from mmcli.kv.whatif.mm_gemma4 import FORWARD_NOTE, gemma4

        per_item, towers, rows = gemma4(
            doc, rules, processor, kwargs, _text_hidden(doc), limits, DEFAULT_LIMIT
        )
        note = FORWARD_NOTE
    elif kind == "kimi_k25":
        from mmcli.kv.whatif.mm_kimi_k25 import kimi_k25

        per_item, towers, rows = kimi_k25(doc, rules, processor, kwargs, limits)
    elif kind == "llama4":
        from mmcli.kv.whatif.mm_llama4 import llama4

        per_item, towers, rows = llama4(doc, rules, processor, kwargs, _text_hidden(doc))
    elif kind == "llava_onevision":
        from mmcli.kv.whatif.mm_llava_onevision import llava_onevision

        if max_model_len is None:
            raise NotMirrored("the video of most features needs max_model_len")
        per_item, towers = llava_onevision(
            doc, rules, max_model_len, limits, processor, video_processor, kwargs,
            _text_hidden(doc), DEFAULT_LIMIT,
        )  # fmt: skip
    elif kind in ("glm4v", "glm4v_moe"):
        from mmcli.kv.whatif.mm_glm4v import SUPPORTED_LIMITS, glm4v

        supported = dict(SUPPORTED_LIMITS)

        per_item, towers, rows = glm4v(
            doc, rules, processor, kwargs, limits, DEFAULT_LIMIT, video_processor, max_model_len
        )
    else:
        raise NotMirrored(f"model_type {kind!r}: its processor's dummy items are not mirrored")
    enabled = {m: t for m, t in per_item.items() if limits.get(m, DEFAULT_LIMIT) > 0}
    if not enabled:
        return None
    order = (lambda m: (enabled[m], m)) if rules.mm_tie_later_name else (lambda m: enabled[m])
    modality = max(enabled, key=order)
    tokens = enabled[modality]
    budget = max(max_num_batched_tokens, max(enabled.values()))
    limit = min(limits.get(modality, DEFAULT_LIMIT), supported.get(modality, DEFAULT_LIMIT))
    per_prompt = limit
    if rules.mm_items_per_prompt == "length" and max_model_len is not None:
        per_prompt = max(1, min(limit, max_model_len // tokens))
    items = max(1, min(budget // tokens, max_num_seqs * per_prompt))
    tower, patches = towers[modality]
    inputs = {"tokens_by_modality": dict(per_item), "limit_mm_per_prompt": limit}
    return DummyBatch(
        modality, tokens, items, patches, budget, tower, inputs, rows.get(modality), note
    )


def _counts(limits: dict[str, Any]) -> dict[str, int]:
    """The counts of ``--limit-mm-per-prompt``; its dummy sizes (0.11's ``width`` / ``height``
    / ``num_frames`` options) are not mirrored."""
    counts: dict[str, int] = {}
    for modality, limit in limits.items():
        if isinstance(limit, dict):
            if set(limit) - {"count"}:
                raise NotMirrored(f"--limit-mm-per-prompt's dummy options for {modality}")
            limit = limit.get("count", DEFAULT_LIMIT)
        counts[modality] = int(limit)
    return counts


def _text_hidden(doc: dict[str, Any]) -> int:
    text = doc.get("text_config") if isinstance(doc.get("text_config"), dict) else doc
    assert isinstance(text, dict)
    return _num(text, "hidden_size", doc.get("hidden_size"))


def _gemma3(
    doc: dict[str, Any], rules: EngineRules, kwargs: dict[str, Any]
) -> tuple[dict[str, int], dict[str, tuple[Tower, int]]]:
    """Gemma 3: each image is resized to the SigLIP tower's ``image_size`` and becomes
    ``mm_tokens_per_image`` tokens (gemma3_mm.py ``get_num_image_tokens``: (crops + 1) × the
    processor's ``image_seq_length``, no crops unless pan-and-scan is turned on)."""
    if kwargs.get("do_pan_and_scan"):
        raise NotMirrored("pan-and-scan crops (do_pan_and_scan) are not mirrored")
    if rules.mm_dummy_tokens == "placeholder":
        # gemma3_mm.py get_image_repl (0.11.0:192): the placeholder is the processor's
        # full_image_sequence, newlines and begin/end-of-image tokens around the image's.
        raise NotMirrored(
            f"vLLM {rules.release} counts an image by its whole placeholder (begin/end-of-image "
            "and newline tokens around mm_tokens_per_image), which the tokenizer decides"
        )
    vision = vision_section(doc)
    # Gemma3Config's default mm_tokens_per_image and SiglipVisionConfig's defaults are not
    # taken: a published Gemma 3 config writes them all.
    tokens = _num(doc, "mm_tokens_per_image")
    size, patch = _num(vision, "image_size"), _num(vision, "patch_size")
    tower = vision_tower(vision, gated=False, patch=patch, out_hidden=_text_hidden(doc))
    return {"image": tokens}, {"image": (tower, (size // patch) ** 2)}


def _qwen_vl(
    doc: dict[str, Any],
    rules: EngineRules,
    max_model_len: int,
    limits: dict[str, int],
    processor: dict[str, Any] | None,
    kwargs: dict[str, Any],
) -> tuple[dict[str, int], dict[str, tuple[Tower, int]]]:
    """Qwen2-VL / Qwen2.5-VL: the image of most features at the processor's ``max_pixels``
    and the video of as many such frames as ``max_model_len`` holds (qwen2_vl.py
    ``Qwen2VLProcessingInfo``), each token ``spatial_merge_size``² patches."""
    vision = vision_section(doc)
    patch, merge = _num(vision, "patch_size", 14), _num(vision, "spatial_merge_size", 2)
    temporal = _num(vision, "temporal_patch_size", 2)
    max_pixels = kwargs.get("max_pixels")
    if max_pixels is None and processor is not None:
        size: dict[str, Any] = processor.get("size") or {}
        size = size if isinstance(size, dict) else {}
        max_pixels = processor.get("max_pixels", size.get("longest_edge"))
    if not isinstance(max_pixels, int) or max_pixels <= 0:
        raise NotMirrored(
            "the image processor's max_pixels is not known: give the model folder (with its "
            "preprocessor_config.json) or mm_processor_kwargs max_pixels"
        )
    unit = patch * merge
    frame = _image_tokens(max_pixels, unit, rules.qwen_vl_image)
    per_item = {"image": frame}
    if limits.get("video", DEFAULT_LIMIT) > 0:
        image_enabled = limits.get("image", DEFAULT_LIMIT) > 0
        per_item["video"] = _video_tokens(
            frame, temporal, max_model_len, rules.qwen_vl_video, frame if image_enabled else 0
        )
    if str(doc.get("model_type")) == "qwen2_5_vl":
        tower = Tower(
            _num(vision, "hidden_size"),
            _num(vision, "intermediate_size"),
            True,
            _num(vision, "depth"),
            3 * temporal * patch * patch,
            _text_hidden(doc),
        )
    else:
        embed = _num(vision, "embed_dim")
        ratio = vision.get("mlp_ratio", 4)
        if not isinstance(ratio, int | float) or ratio <= 0:
            raise NotMirrored("the encoder config lacks mlp_ratio as a positive number")
        width = int(embed * ratio)
        tower = Tower(
            embed, width, False, _num(vision, "depth"), 3 * temporal * patch**2, _text_hidden(doc)
        )
    towers = {m: (tower, t * merge * merge) for m, t in per_item.items()}
    return per_item, towers


def _image_tokens(max_pixels: int, unit: int, rule: str) -> int:
    """The tokens of the image with most features (:func:`image_shape`), a token a unit²."""
    height, width = image_shape(max_pixels, unit, rule)
    return (height // unit) * (width // unit)


def _video_tokens(frame: int, temporal: int, max_len: int, rule: str, image: int) -> int:
    """The video of most features: as many frames of the largest size as ``max_len`` (less
    one image's tokens before 0.10.2) holds, at most 16 (14 from 0.11) frames; frames are
    padded to a multiple of ``temporal_patch_size`` and each group of them is one frame's
    tokens."""

    def tokens(frames: int) -> int:
        padded = frames + frames % temporal
        return max(padded // temporal, 1) * frame

    cap = _VIDEO_FRAME_CAP[rule]
    budget, count = (max_len - image, 0) if rule == "less-image-16" else (max_len, 1)
    while count < cap and tokens(count + 1) <= budget:  # frames past the cap change nothing
        count += 1
    return tokens(max(min(count, cap), 1))


__all__ = ["DEFAULT_LIMIT", "QWEN3_VL", "DummyBatch", "NotMirrored", "Tower", "dummy_batch"]
