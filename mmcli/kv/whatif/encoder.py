"""The multimodal encoder's part of vLLM's profile run, in the ``--gpu`` estimate.

``profile_run`` (v1/worker/gpu_model_runner.py; Model Runner V2's ``profile_encoder_cache`` from
0.29) first runs the encoder on a dummy batch (:mod:`mmcli.kv.whatif.mm_dummy`: the modality
with the most tokens an item, as many items as the encoder budget holds) and keeps its outputs
in the encoder cache through the text forward and the sampler, unless ``--skip-mm-profiling``
is given. The torch peak of the whole run is then max(encoder forward, encoder outputs + the
text peak), so the encoder adds max(encoder forward − text peak, encoder outputs) to it.
The encoder forward holds the processor's float32 pixel values (moved to the GPU as they are:
``_get_mm_dummy_batch`` casts no dtype; the image's ``uint8`` bytes where the release normalises
them on the GPU, :func:`raw_pixels`) and, per patch, the same envelope as the text forward
(:func:`mmcli.kv.whatif.components.activation_peak`): the residual and the normed hidden states,
q/k/v (3 × hidden) and the MLP's wide tensors (fc1 and its activation, 2 × intermediate; a
gated MLP's gate/up and product, 3 ×), the projections split over the tensor-parallel ranks.
Attention is a memory-efficient kernel (no patches² matrix). Families whose dummy items are not
mirrored keep the component named but not estimated, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mmcli.kv.whatif.components import Component

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules
    from mmcli.kv.whatif.mm_dummy import DummyBatch

#: The config sections of an encoder vLLM profiles (``vision_config``, ``audio_config``).
ENCODER_SECTIONS: Final = ("vision_config", "audio_config")
#: The encoder keys shown as the inputs of a component that is not estimated.
ENCODER_KEYS: Final = (
    "model_type",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "image_size",
    "patch_size",
)
#: Top-level keys that give an item's token count (Gemma 3's ``mm_tokens_per_image``).
ITEM_KEYS: Final = ("mm_tokens_per_image",)
#: The image processor's settings file of a model folder or Hub repo.
PROCESSOR_FILE: Final = "preprocessor_config.json"
#: The video processor's settings file (read for Qwen3-VL's dummy video).
VIDEO_PROCESSOR_FILE: Final = "video_preprocessor_config.json"
#: Bytes of one pixel value as the processors return them (float32).
PIXEL_BYTES: Final = 4
#: Bytes of one raw pixel value (``uint8``), where the GPU rescales and normalises them.
RAW_PIXEL_BYTES: Final = 1
SOURCE: Final = (
    "profile_run (v1/worker/gpu_model_runner.py): the encoder on a dummy batch of the "
    "largest item under --limit-mm-per-prompt, its outputs kept in the encoder cache "
    "(budget: max_num_encoder_input_tokens); skipped by --skip-mm-profiling"
)


@dataclass(frozen=True)
class MmSettings:
    """What the encoder profile depends on beyond the batch limits."""

    #: The ``max_model_len`` vLLM runs with (None: not known).
    max_model_len: int | None = None
    #: ``--limit-mm-per-prompt`` counts by modality (absent: vLLM's 999).
    limits: dict[str, int] = field(default_factory=dict)
    #: ``--mm-processor-kwargs`` (``max_pixels``, ``do_pan_and_scan``, …).
    mm_kwargs: dict[str, Any] = field(default_factory=dict)
    #: The model's ``preprocessor_config.json`` where the model folder has one.
    processor: dict[str, Any] | None = None
    #: The model's ``video_preprocessor_config.json`` (Qwen3-VL's video processor's size).
    video_processor: dict[str, Any] | None = None
    #: ``--mm-device-do-normalize`` (None: the release's default for the model).
    device_normalize: bool | None = None
    #: ``--language-model-only``: every modality off (vLLM's limits all 0).
    language_model_only: bool = False
    #: What the weights figure does with the towers vLLM leaves out (:func:`off_note`).
    weights_note: str | None = None
    video_tokens: frozenset[str] | None = None  # InternVL's tokenizer's (None: not read)


def encoder_sections(doc: dict[str, Any]) -> tuple[str, ...]:
    """The encoder sections the config has (empty: a text-only model)."""
    return tuple(key for key in ENCODER_SECTIONS if isinstance(doc.get(key), dict))


def encoder_profile(
    doc: dict[str, Any],
    rules: EngineRules,
    *,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    tp: int,
    dtype_bytes: int,
    text_peak: int,
    settings: MmSettings,
    enforce_eager: bool = False,
) -> tuple[Component | None, str | None]:
    """The encoder profile of ``doc`` (None: no encoder, or every modality disabled) and a note
    (where it is not estimated, or nothing is profiled). ``enforce_eager``: no inductor, so
    the fused residual norm runs its in-place kernel (:data:`OUT_OF_PLACE_NORM`)."""
    from mmcli.kv.whatif.mm_dummy import QWEN3_VL, NotMirrored, dummy_batch
    from mmcli.kv.whatif.mm_qwen3 import vision_peak as qwen3_peak

    if not encoder_sections(doc):
        return None, None
    if settings.language_model_only:
        return None, off_note(rules, "--language-model-only turns every modality off", settings)
    try:
        batch = dummy_batch(
            doc,
            rules,
            max_model_len=settings.max_model_len,
            max_num_batched_tokens=max_num_batched_tokens,
            max_num_seqs=max_num_seqs,
            limits=settings.limits,
            processor=settings.processor,
            mm_kwargs=settings.mm_kwargs,
            video_processor=settings.video_processor,
            tokenizer=settings.video_tokens,
        )
    except NotMirrored as exc:
        return _named(doc, max_num_batched_tokens), NOTE.format(reason=str(exc))
    if batch is None:
        return None, off_note(rules, "--limit-mm-per-prompt disables every modality", settings)
    if batch.forward_note is not None:
        named = _named(doc, max_num_batched_tokens)
        named.inputs.update(_batch_inputs(batch))
        return named, NOTE.format(reason=batch.forward_note)
    tower, d = batch.tower, dtype_bytes
    patches = batch.items * batch.patches
    wide = (3 if tower.gated else 2) * tower.intermediate
    raw = raw_pixels(doc, rules, settings.device_normalize)
    pixels = patches * tower.pixels_per_patch * (RAW_PIXEL_BYTES if raw else PIXEL_BYTES)
    per_patch = (2 * tower.hidden + (3 * tower.hidden + wide) // tp) * d
    qwen3 = doc.get("model_type") in QWEN3_VL
    stage = {
        "qwen2_5_vl": rules.qwen_vl_vision_stage,
        "gemma3": rules.siglip_vision_stage,
    }.get(str(doc.get("model_type")), rules.qwen3_vl_vision_stage if qwen3 else "envelope")
    if enforce_eager and stage in OUT_OF_PLACE_NORM:
        stage = OUT_OF_PLACE_NORM[stage]
    if qwen3 and stage != "envelope":
        attention = VISION_STAGES[stage]
        per_patch = qwen3_peak(doc["vision_config"], attention, stage in REDUCES, tp, d)
    elif stage in SIGLIP_STAGES:
        per_patch = siglip_peak(tower.hidden, tower.intermediate, tp, d)
    elif stage != "envelope":
        per_patch = vision_peak(stage, tower.hidden, tower.intermediate, tp, d)
    forward = pixels + patches * per_patch
    rows = batch.tokens if batch.embeds is None else batch.embeds
    outputs = batch.items * rows * tower.out_hidden * d
    inputs = {
        **_batch_inputs(batch),
        "max_model_len": settings.max_model_len,
        "max_num_batched_tokens": max_num_batched_tokens,
        "max_num_seqs": max_num_seqs,
        "tensor_parallel_size": tp,
        "encoder_hidden_size": tower.hidden,
        "encoder_intermediate_size": tower.intermediate,
        "encoder_mlp_gated": tower.gated,
        "encoder_forward_rule": stage,
        "pixel_values_dtype": "uint8" if raw else "float32",
        "pixel_values_bytes": pixels,
        "forward_bytes": forward,
        "outputs_bytes": outputs,
        "text_peak_bytes": text_peak,
    }
    size = max(forward - text_peak, outputs)
    return Component("encoder profile", size, inputs, SOURCE), None


#: Qwen2.5-VL's vision attention stage by release rule (``qwen_vl_vision_stage``): the tensors
#: live a patch at its peak (the rotary call), in hidden-size units: (whole, in the model dtype;
#: per rank, in the model dtype; per rank, float32; whether tp > 1 gathers the whole qkv).
#: Whole in every variant: the block's input (the encoder loop holds it) and its normed copy
#: (``nn.Module._call_impl``'s ``*args`` holds a module's input through its forward).
VISION_STAGES: Final[dict[str, tuple[int, int, int, bool]]] = {
    # qkv output 3, contiguous q/k/v copies 3 less q's freed when rebound, q rotated 1,
    # k's type_as result 1; k's float32 copy and the kernel's float32 output 1 + 1.
    "rotary-each-fp32": (2, 7, 2, True),
    # qkv output 3, contiguous q/k/v copies 3, cat([q, k]) 2, its type_as result 2; the
    # float32 copy of the cat and the kernel's float32 output 2 + 2.
    "rotary-cat-fp32": (2, 10, 4, True),
    # qkv output 3, the rearranged (copied) q/k 2, its type_as result 2; float32 2 + 2.
    "rotary-reshape-fp32": (2, 7, 4, False),
    # At the output projection: qkv output 3, the contiguous q/k copy 2, its rotated copy 2
    # (model dtype), the attention output 1; whole: the projection's output 1 more.
    "rotary-copy-model": (3, 8, 0, False),
    "rotary-copy-native-norm": (3, 8, 0, False),
    # The same tensors at the output projection: the rearranged (copied) q/k 2 rotated out of
    # place in the model dtype 2 (no float32 copy), beside qkv 3 and the attention output 1.
    "rotary-reshape-model": (3, 8, 0, False),
    "rotary-reshape-native-norm": (3, 8, 0, False),
}

#: The rules whose attention stage peaks at the output projection: at tp > 1 its all-reduce
#: returns a new tensor beside the rank's partial sum (one hidden-size unit more, whole).
REDUCES: Final = frozenset(
    {"rotary-copy-model", "rotary-copy-native-norm", "rotary-reshape-model",
     "rotary-reshape-native-norm"}
)  # fmt: skip

#: The rules whose fused residual norm returns new tensors: at the MLP stage the attention's
#: output and the block input stay beside the normed copy and the new residual (5 whole). The
#: native kernel comes first in the kernel priority only when inductor compiles
#: (platforms/cuda.py, 0.21.0:576); before that inductor turns the custom ops off (custom_ops
#: "none", config/vllm.py) so RMSNorm runs its native forward. With ``--enforce-eager`` the
#: in-place kernel runs, as in the rule each maps to.
OUT_OF_PLACE_NORM: Final = {
    "rotary-copy-native-norm": "rotary-copy-model",
    "rotary-reshape-native-norm": "rotary-reshape-model",
}


def vision_peak(stage: str, hidden: int, intermediate: int, tp: int, d: int) -> int:
    """Bytes a patch holds at the peak of a Qwen2.5-VL vision block under release rule
    ``stage``: the larger of the attention stage (:data:`VISION_STAGES`) and the MLP stage
    (the block's input, normed in place by the fused residual RMSNorm, the residual and the
    MLP's output whole, two more where the norm is out of place (:data:`OUT_OF_PLACE_NORM`);
    gate/up and its product per rank)."""
    whole, rank, fp32, gathers = VISION_STAGES[stage]
    attention = whole * hidden * d + (rank * hidden * d + fp32 * hidden * 4) // tp
    if stage in REDUCES and tp > 1:
        attention += hidden * d
    mlp_whole = 5 if stage in OUT_OF_PLACE_NORM else 3
    stages = [attention, mlp_whole * hidden * d + 3 * intermediate * d // tp]
    if gathers and tp > 1:
        # The gathered qkv (3 hidden) stays live through the views q/k/v are cut from; while
        # it is built, the gathered list and their cat (3 + 3) sit beside the rank's qkv.
        stages[0] += 3 * hidden * d
        stages.append((whole + 6) * hidden * d + 3 * hidden * d // tp)
    return max(stages)


#: Gemma 3's SigLIP vision block by release rule (``siglip_vision_stage``): q/k/v stay views of
#: the qkv projection's output (chunk, view, flatten: no copy) into the flash-attention
#: kernel, which writes one new output; LayerNorm and the tanh GELU return new tensors (no
#: custom op on CUDA, so ``--enforce-eager`` changes nothing); the encoder keeps its input
#: embeddings in a list through every layer.
SIGLIP_STAGES: Final = frozenset({"siglip-qkv-views"})


def siglip_peak(hidden: int, intermediate: int, tp: int, d: int) -> int:
    """Bytes a patch holds at the peak of a SigLIP vision block (:data:`SIGLIP_STAGES`).
    Whole: the kept embeddings, the block's input (the encoder loop and ``_call_impl``'s
    ``*args`` hold it) and its normed copy. Attention stage, at the output projection: qkv (3)
    and the attention output (1) per rank, the projection's output whole. MLP stage: the
    attention's output (the new residual) and its normed copy whole beside the first linear's
    output and its GELU (per rank), or, at the second linear, the GELU beside its output
    whole. At tp > 1 each row-parallel all-reduce returns a new whole tensor beside the rank's
    partial sum."""
    reduce = 1 if tp > 1 else 0
    attention = (4 + reduce) * hidden * d + 4 * hidden * d // tp
    activation = 4 * hidden * d + 2 * intermediate * d // tp
    projection = (5 + reduce) * hidden * d + intermediate * d // tp
    return max(attention, activation, projection)


def off_note(rules: EngineRules, why: str, settings: MmSettings | None = None) -> str:
    """The note of a plan whose every modality is off: no encoder profile, and, from the
    release that leaves unused towers out, no encoder weights either (``weights_note``: what
    the weights figure does with them; by default it counts them)."""
    weights = None if settings is None else settings.weights_note
    note = f"{why}: no encoder profile"
    if rules.skip_unused_towers:
        note += f"; vLLM {rules.release} does not load the encoder towers then, so " + (
            weights
            or "weights read from the checkpoint count them (give --weights the size "
            "its log's 'Model loading took' line prints)"
        )
    return note


def raw_pixels(doc: dict[str, Any], rules: EngineRules, asked: bool | None) -> bool:
    """Whether the dummy batch's pixel values stay the image's ``uint8`` bytes on the GPU: the
    model supports normalising them there (``rules.mm_device_normalize``) and
    ``--mm-device-do-normalize`` leaves it on (vLLM turns it off for a model without it)."""
    supported = str(doc.get("model_type")) in rules.mm_device_normalize
    return supported and asked is not False


def _batch_inputs(batch: DummyBatch) -> dict[str, Any]:
    """The dummy batch as a component's inputs (what explain sets beside the log's line)."""
    return {
        "modality": batch.modality,
        "items": batch.items,
        "tokens_per_item": batch.tokens,
        "encoder_budget": batch.budget,
        "patches_per_item": batch.patches,
        **batch.inputs,
    }


def _named(doc: dict[str, Any], max_num_batched_tokens: int) -> Component:
    """The encoder profile named with its inputs, not estimated."""
    inputs: dict[str, Any] = {
        section: {k: doc[section][k] for k in ENCODER_KEYS if k in doc[section]}
        for section in encoder_sections(doc)
    }
    inputs |= {key: doc[key] for key in ITEM_KEYS if key in doc}
    inputs["max_num_batched_tokens"] = max_num_batched_tokens
    return Component("encoder profile", 0, inputs, SOURCE, estimated=False)


NOTE: Final = (
    "the multimodal encoder's profile is not estimated ({reason}): vLLM's profile run encodes "
    "a dummy batch of the largest item under --limit-mm-per-prompt first, so the KV memory may "
    "be lower than shown; give --skip-mm-profiling where vLLM runs with it, or plan from the "
    "server's log (--from-log)"
)


def parse_limits(value: Any, flag: str = "--limit-mm-per-prompt") -> dict[str, Any]:
    """vLLM's ``--limit-mm-per-prompt``: a JSON object (text or dict) of counts or of dummy
    options (``{"count": 1, "width": 512}``, from 0.11), or the older ``image=2,video=1``."""
    import json

    from mmcli.errors import InputError

    doc = value
    if isinstance(value, str):
        try:
            doc = json.loads(value)
        except ValueError:
            pairs = [part.partition("=") for part in value.split(",") if part.strip()]
            if not pairs or any(not sep or not v.strip().isdigit() for _, sep, v in pairs):
                doc = None
            else:
                doc = {k.strip(): int(v) for k, _, v in pairs}
    hint = f'{flag} \'{{"image": 2, "video": 0}}\' (counts by modality)'
    if not isinstance(doc, dict):
        raise InputError(f"{flag}: expected a JSON object of counts, got {value!r}", hint=hint)
    for modality, limit in doc.items():
        count = limit.get("count", 999) if isinstance(limit, dict) else limit
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InputError(
                f"{flag}: {modality}'s count must be an integer ≥ 0, got {count!r}", hint=hint
            )
    return dict(doc)


def parse_kwargs(value: Any, flag: str = "--mm-processor-kwargs") -> dict[str, Any]:
    """vLLM's ``--mm-processor-kwargs``: a JSON object (text or dict)."""
    import json

    from mmcli.errors import InputError

    doc = value
    if isinstance(value, str):
        try:
            doc = json.loads(value)
        except ValueError:
            doc = None
    if not isinstance(doc, dict):
        raise InputError(
            f"{flag}: expected a JSON object, got {value!r}",
            hint=f"{flag} '{{\"max_pixels\": 1003520}}'",
        )
    return dict(doc)


def mm_settings(
    doc: dict[str, Any],
    max_model_len: Callable[[], int | None],
    side_file: Callable[[str], Path | None] | None,
    limits: Any = None,
    kwargs: Any = None,
    device_normalize: bool | None = None,
    language_model_only: bool = False,
) -> MmSettings:
    """The encoder profile's settings for a plan: the requests' limits and processor kwargs,
    the ``max_model_len`` vLLM runs with, and the model's ``preprocessor_config.json`` and,
    for Qwen3-VL, LLaVA-OneVision and GLM-4.1V, its ``video_preprocessor_config.json``
    (InternVL: its tokenizer's video tokens), each asked of ``side_file`` (None where none)."""
    from mmcli.kv.whatif.mm_common import read_json
    from mmcli.kv.whatif.mm_dummy import QWEN3_VL
    from mmcli.kv.whatif.mm_internvl import video_tokens

    if not encoder_sections(doc):
        return MmSettings()

    def read(name: str) -> dict[str, Any] | None:
        return None if side_file is None else read_json(side_file(name))

    videos = (*QWEN3_VL, "llava_onevision", "glm4v", "glm4v_moe")
    video = read(VIDEO_PROCESSOR_FILE) if doc.get("model_type") in videos else None
    return MmSettings(
        max_model_len=max_model_len(),
        limits={} if limits is None else parse_limits(limits),
        mm_kwargs={} if kwargs is None else parse_kwargs(kwargs),
        processor=read(PROCESSOR_FILE),
        video_processor=video,
        device_normalize=device_normalize,
        language_model_only=language_model_only,
        video_tokens=video_tokens(read) if doc.get("model_type") == "internvl_chat" else None,
    )
