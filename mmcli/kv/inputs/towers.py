"""The encoder towers' bytes that a checkpoint's weights figure counts and vLLM does not load.

From the release that marks them (``skip_unused_towers``), a multimodal model class builds its
encoder towers inside ``_mark_tower_model(vllm_config, modalities)`` contexts
(model_executor/models/interfaces.py): when ``--limit-mm-per-prompt`` is 0 for every modality
of a context (``--language-model-only``: all of them), its child modules are not built and their
weights are not loaded. The checkpoint's figure then counts tensors that never reach the GPU;
this module names them by their checkpoint prefixes (the modules wrapped in those contexts,
mapped back through each class's ``hf_to_vllm_mapper``) and sums their bytes from the
safetensors headers: a model folder's shard headers, or a Hub repo's through
``huggingface_hub.get_safetensors_metadata`` (headers only, no tensor data).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mmcli.errors import InputError
from mmcli.kv.inputs.model_source import ModelSource
from mmcli.text import printable

if TYPE_CHECKING:
    from mmcli.kv.releases import EngineRules
    from mmcli.kv.whatif.encoder import MmSettings


@dataclass(frozen=True)
class Towers:
    """One ``_mark_tower_model`` context: its modalities, the checkpoint tensor-name prefixes
    of the modules it wraps, and the config section the context is built for."""

    modalities: frozenset[str]
    prefixes: tuple[str, ...]
    section: str = "vision_config"


_IMAGE_VIDEO: Final = frozenset({"image", "video"})
_IMAGE: Final = frozenset({"image"})
#: ``visual`` (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5): ``model.visual.`` → ``visual.``.
_QWEN: Final = (Towers(_IMAGE_VIDEO, ("visual.", "model.visual.")),)
#: ``vision_tower`` and ``multi_modal_projector`` (Gemma 3, Mistral 3), both under ``model.``
#: in the newer checkpoint layout.
_PROJECTED: Final = (
    Towers(
        _IMAGE,
        ("vision_tower.", "multi_modal_projector.", "model.vision_tower.",
         "model.multi_modal_projector."),
    ),
)  # fmt: skip

#: ``vision_tower``, ``image_newline`` and ``multi_modal_projector`` (LLaVA-NeXT, LLaVA-OneVision),
#: under ``model.`` in the checkpoint layout of transformers 4.52 on.
_LLAVA: Final = (
    "vision_tower.", "multi_modal_projector.", "image_newline", "model.vision_tower.",
    "model.multi_modal_projector.", "model.image_newline",
)  # fmt: skip

#: Per model type, the tower contexts of its vLLM model class (the same modules in 0.15.0 and
#: 0.34.0 where the class exists in both).
TOWERS: Final[dict[str, tuple[Towers, ...]]] = {
    "qwen2_vl": _QWEN,
    "qwen2_5_vl": _QWEN,
    "qwen3_vl": _QWEN,
    "qwen3_vl_moe": _QWEN,
    "qwen3_5": _QWEN,
    "qwen3_5_moe": _QWEN,
    # glm4_1v.py 0.15.0 :1413, 0.34.0 :2037 (``visual``; the mapper's ``model.visual.``).
    "glm4v": _QWEN,
    "glm4v_moe": _QWEN,
    "gemma3": _PROJECTED,
    "mistral3": _PROJECTED,
    "llava_next": (Towers(_IMAGE, _LLAVA),),
    "llava_onevision": (Towers(_IMAGE_VIDEO, _LLAVA),),
    "llama4": (Towers(_IMAGE, ("vision_model.", "multi_modal_projector.")),),
    "internvl_chat": (Towers(_IMAGE_VIDEO, ("vision_model.", "mlp1.")),),
    "kimi_k25": (Towers(frozenset({"vision_chunk"}), ("vision_tower.", "mm_projector.")),),
    "gemma4": (
        Towers(
            _IMAGE_VIDEO,
            ("vision_tower.", "embed_vision.", "model.vision_tower.", "model.embed_vision."),
        ),
        Towers(
            frozenset({"audio"}),
            ("audio_tower.", "embed_audio.", "model.audio_tower.", "model.embed_audio."),
            "audio_config",
        ),
    ),
}
#: vLLM's count for a modality ``--limit-mm-per-prompt`` does not name.
_UNNAMED: Final = 999


@dataclass(frozen=True)
class LeftOut:
    """What the weights figure leaves out (``bytes`` 0 with ``reason``: nothing, and why)."""

    bytes: int = 0
    tensors: int = 0
    prefixes: tuple[str, ...] = ()
    reason: str | None = None


def every_modality_off(doc: dict[str, Any], settings: MmSettings) -> bool:
    """Whether every tower context of ``doc``'s model has all its modalities at limit 0."""
    if settings.language_model_only:
        return True
    modalities = {m for t in _contexts(doc) for m in t.modalities}
    return bool(modalities) and all(_count(settings.limits.get(m)) == 0 for m in modalities)


def towers_left_out(
    doc: dict[str, Any], source: ModelSource, rules: EngineRules, settings: MmSettings
) -> LeftOut | None:
    """The towers' bytes the checkpoint counts and vLLM does not load (None: vLLM loads them,
    or the release builds them model by model; a reason where they are not read)."""
    if not rules.skip_unused_towers or not every_modality_off(doc, settings):
        return None
    kind = str(doc.get("model_type", ""))
    # A Mistral own-format checkpoint (params.json's vision_encoder) names its tensors apart.
    if kind not in TOWERS or "vision_encoder" in doc:
        return LeftOut(reason=f"the tower tensors of model_type {printable(kind)} are not mapped")
    if kind in rules.towers_unmarked:
        return None
    prefixes = tuple(p for t in _contexts(doc) for p in t.prefixes)
    sizes = _tensor_bytes(source)
    left = [n for name, n in sizes.items() if name.startswith(prefixes)]
    if not left:
        return LeftOut(reason=f"no tensor of the checkpoint is named {', '.join(prefixes)}…")
    return LeftOut(sum(left), len(left), prefixes)


def _contexts(doc: dict[str, Any]) -> tuple[Towers, ...]:
    every = TOWERS.get(str(doc.get("model_type", "")), ())
    return tuple(t for t in every if isinstance(doc.get(t.section), dict))


def _count(limit: Any) -> Any:
    if limit is None:
        return _UNNAMED
    return limit.get("count", _UNNAMED) if isinstance(limit, dict) else limit


def _tensor_bytes(source: ModelSource) -> dict[str, int]:
    """Each tensor's bytes by name, from the checkpoint's safetensors headers."""
    if source.kind == "hub" and source.repo is not None:
        return _hub_tensor_bytes(source.repo, source.revision)
    if source.folder is None:
        return {}
    from mmcli.kv.inputs.weights import tensor_sizes

    index = source.folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted({str(f) for f in _weight_map(index).values()})
        paths = [source.folder / name for name in shards]
    else:
        paths = sorted(source.folder.glob("*.safetensors"))
    out: dict[str, int] = {}
    for path in paths:
        out |= tensor_sizes(path)
    return out


def _weight_map(index: Path) -> dict[str, Any]:
    try:
        doc = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        doc = None
    found = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(found, dict):
        raise InputError(
            f"--gpu weights: {printable(str(index))} has no weight_map object",
            hint="give the weights with --weights (the size vLLM's log prints)",
        )
    return found


def _hub_tensor_bytes(repo: str, revision: str | None) -> dict[str, int]:
    from mmcli.kv.inputs.hub import call_hub

    def read() -> dict[str, int]:
        from huggingface_hub import get_safetensors_metadata

        meta = get_safetensors_metadata(repo, revision=revision)
        return {
            name: t.data_offsets[1] - t.data_offsets[0]
            for file in meta.files_metadata.values()
            for name, t in file.tensors.items()
        }

    return call_hub(repo, revision, read)
