"""The encoder towers vLLM does not load, left out of a checkpoint's weights figure.

vLLM 0.15.0 and 0.34.0 model_executor/models/interfaces.py ``_mark_tower_model``: the child
modules assigned inside the context are not built (``no_init_weights`` → ``StageMissingLayer``)
when ``all(mm_config.get_limit_per_prompt(m) == 0 for m in modalities)``; 0.34.0
config/multimodal.py ``get_limit_per_prompt``: 0 for every modality under
``language_model_only``, 999 for a modality ``--limit-mm-per-prompt`` does not name.
qwen2_5_vl.py (0.15.0 and 0.34.0): ``with self._mark_tower_model(vllm_config, {"image",
"video"}): self.visual = Qwen2_5_VisionTransformer(...)``; its ``hf_to_vllm_mapper`` maps the
checkpoint's ``model.visual.`` to ``visual.`` (the older layout names ``visual.`` itself).
kimi_k25.py: no ``_mark_tower_model`` in 0.15.0, ``vision_tower`` and ``mm_projector`` inside
one (``"vision_chunk"``) from 0.16.0.

Tensor names: Qwen2.5-VL-7B-Instruct's checkpoint (``visual.patch_embed.proj.weight``,
``visual.blocks.N.attn.qkv.weight``, ``visual.merger.mlp.0.weight``,
``model.embed_tokens.weight``, ``model.layers.N.self_attn.q_proj.weight``, ``lm_head.weight``),
as the module tree vendored in github.com/acproject/duorou docs/qwen2.5vl_graph.md prints them
(the checkpoint's names are the module paths); the shapes here are tiny, the sums are taken
from the headers written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from mmcli.kv import PlanRequest, plan_run
from mmcli.kv.inputs.model_source import ModelSource
from mmcli.kv.inputs.towers import towers_left_out
from mmcli.kv.releases import rules_for
from mmcli.kv.whatif.encoder import MmSettings

QWEN25VL = Path(__file__).resolve().parents[1] / "whatif/models/qwen2_5_vl_7b"
TOWER = {
    "visual.patch_embed.proj.weight": (16, 3, 2, 2, 2),
    "visual.blocks.0.attn.qkv.weight": (48, 16),
    "visual.merger.mlp.0.weight": (64, 64),
}
TEXT = {
    "model.embed_tokens.weight": (64, 32),
    "model.layers.0.self_attn.q_proj.weight": (32, 32),
    "lm_head.weight": (64, 32),
}


def _folder(tmp_path: Path, names: dict[str, tuple[int, ...]], index: bool = False) -> Path:
    folder = tmp_path / "qwen25vl"
    folder.mkdir()
    for name in ("config.json", "preprocessor_config.json"):
        shutil.copy(QWEN25VL / name, folder / name)
    items = list(names.items())
    shards = [items[: len(items) // 2], items[len(items) // 2 :]] if index else [items]
    weight_map = {}
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({n: np.zeros(s, dtype=np.float16) for n, s in shard}, str(folder / file))
        weight_map |= dict.fromkeys((n for n, _ in shard), file)
    if index:
        total = sum(2 * int(np.prod(s)) for s in names.values())
        doc = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (folder / "model.safetensors.index.json").write_text(json.dumps(doc))
    return folder


def _bytes(names: dict[str, tuple[int, ...]]) -> int:
    return sum(2 * int(np.prod(s)) for s in names.values())  # float16


def _plan(folder: Path, flags: str = "", version: str = "0.33", **fields: Any) -> Any:
    line = f"vllm serve {folder} --max-model-len 32768 {flags}"
    result = plan_run(PlanRequest(serve=line, gpu="H100", vllm_version=version, **fields))
    assert result.estimate is not None
    return result.estimate


@pytest.mark.parametrize("index", [False, True])
def test_language_model_only_leaves_the_tower_out(tmp_path: Path, index: bool) -> None:
    folder = _folder(tmp_path, TOWER | TEXT, index)
    whole = _plan(folder)
    text = _plan(folder, "--language-model-only")
    assert whole.weights_bytes == _bytes(TOWER | TEXT)
    assert text.weights_bytes == _bytes(TEXT)
    doc = text.to_json()
    assert doc["towers_left_out_bytes"] == _bytes(TOWER)
    assert "towers_left_out_bytes" not in whole.to_json()
    assert "encoder towers not loaded" in doc["weights_source"]
    assert any("less the encoder towers" in label for label, _ in text.terms())
    notes = " ".join(text.notes)
    assert "the weights figure leaves out their" in notes
    assert "3 tensors under visual., model.visual." in notes


def test_a_given_weights_size_is_taken_as_given(tmp_path: Path) -> None:
    folder = _folder(tmp_path, TOWER | TEXT)
    est = _plan(folder, "--language-model-only", weights="16GiB")
    assert est.weights_bytes == 16 * 2**30
    assert "the --weights size is taken as given" in " ".join(est.notes)
    from_path = _plan(folder, "--language-model-only", weights=str(folder))
    assert from_path.weights_bytes == _bytes(TOWER | TEXT)
    assert "the --weights checkpoint's figure counts them" in " ".join(from_path.notes)


def test_every_modality_of_the_context_must_be_off(tmp_path: Path) -> None:
    """Qwen2.5-VL's context is {"image", "video"}: an image limit of 0 leaves video at 999."""
    folder = _folder(tmp_path, TOWER | TEXT)
    image_off = _plan(folder, version="0.16", limit_mm_per_prompt={"image": 0})
    both_off = _plan(folder, version="0.16", limit_mm_per_prompt={"image": 0, "video": 0})
    assert image_off.weights_bytes == _bytes(TOWER | TEXT)
    assert both_off.weights_bytes == _bytes(TEXT)
    assert "--limit-mm-per-prompt disables every modality" in " ".join(both_off.notes)


def test_before_the_release_that_marks_towers_the_figure_is_whole(tmp_path: Path) -> None:
    folder = _folder(tmp_path, TOWER | TEXT)
    off = {"image": 0, "video": 0}
    assert _plan(folder, version="0.14", limit_mm_per_prompt=off).weights_bytes == _bytes(
        TOWER | TEXT
    )
    assert _plan(folder, version="0.15", limit_mm_per_prompt=off).weights_bytes == _bytes(TEXT)


def _source(folder: Path) -> ModelSource:
    return ModelSource(folder / "config.json", "folder", folder)


def test_the_newer_layout_names_the_tower_under_model(tmp_path: Path) -> None:
    tower = {f"model.{name}": shape for name, shape in TOWER.items()}
    text = {"model.language_model.embed_tokens.weight": (64, 32), "lm_head.weight": (64, 32)}
    folder = _folder(tmp_path, tower | text)
    doc = json.loads((folder / "config.json").read_text())
    got = towers_left_out(
        doc, _source(folder), rules_for("0.20"), MmSettings(limits={}, language_model_only=True)
    )
    assert got is not None and got.bytes == _bytes(tower) and got.tensors == len(tower)


def test_a_family_not_mapped_keeps_the_figure_whole(tmp_path: Path) -> None:
    folder = _folder(tmp_path, TOWER | TEXT)
    doc = {"model_type": "phi4mm", "vision_config": {}}
    got = towers_left_out(
        doc, _source(folder), rules_for("0.20"), MmSettings(language_model_only=True)
    )
    assert got is not None and got.bytes == 0
    assert got.reason == "the tower tensors of model_type phi4mm are not mapped"


def test_llama4_leaves_out_its_vision_model_and_projector(tmp_path: Path) -> None:
    """vLLM 0.15.0 mllama4.py:774 / 0.34.0 :750: ``with self._mark_tower_model(vllm_config,
    "image")`` wraps ``vision_model`` and ``multi_modal_projector`` (the checkpoint's own
    top-level names; no mapper rewrites them); the language model stays."""
    tower = {"vision_model.patch_embedding.linear.weight": (32, 48),
             "multi_modal_projector.linear_1.weight": (64, 32)}  # fmt: skip
    text = {"language_model.model.layers.0.self_attn.q_proj.weight": (32, 32)}
    folder = _folder(tmp_path, tower | text)
    doc = {"model_type": "llama4", "vision_config": {}}
    got = towers_left_out(
        doc, _source(folder), rules_for("0.20"), MmSettings(language_model_only=True)
    )
    assert got is not None and (got.bytes, got.tensors) == (_bytes(tower), 2)


def test_kimi_k25_marks_its_towers_from_0_16(tmp_path: Path) -> None:
    """Kimi K2.5's checkpoint: ``vision_tower.*``, ``mm_projector.proj.0`` / ``.2`` (its
    0.34.0 ``hf_to_vllm_mapper`` maps ``mm_projector.proj.0`` to ``mm_projector.linear_1``)."""
    names = {
        "vision_tower.patch_embed.proj.weight": (16, 3, 2, 2),
        "mm_projector.proj.0.weight": (32, 16),
        "language_model.model.embed_tokens.weight": (64, 32),
    }
    folder = tmp_path / "kimi"
    folder.mkdir()
    save_file(
        {n: np.zeros(s, dtype=np.float16) for n, s in names.items()},
        str(folder / "model.safetensors"),
    )
    doc = {"model_type": "kimi_k25", "vision_config": {}}
    off = MmSettings(limits={"vision_chunk": 0})
    assert towers_left_out(doc, _source(folder), rules_for("0.15"), off) is None
    got = towers_left_out(doc, _source(folder), rules_for("0.16"), off)
    assert got is not None and got.bytes == 2 * (16 * 3 * 2 * 2 + 32 * 16)


def test_the_hub_headers_are_read_without_the_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub's ``get_safetensors_metadata(repo_id, revision=...)`` returns each
    file's ``tensors`` (``TensorInfo``: dtype, shape, ``data_offsets``), faked here."""
    import huggingface_hub

    asked: list[tuple[str, str | None]] = []

    def info(shape: tuple[int, ...], start: int) -> SimpleNamespace:
        return SimpleNamespace(data_offsets=(start, start + 2 * int(np.prod(shape))))

    def fake(repo: str, revision: str | None = None, **_: Any) -> SimpleNamespace:
        asked.append((repo, revision))
        files = {
            "model-00001-of-00002.safetensors": SimpleNamespace(
                tensors={n: info(s, 0) for n, s in TOWER.items()}
            ),
            "model-00002-of-00002.safetensors": SimpleNamespace(
                tensors={n: info(s, 0) for n, s in TEXT.items()}
            ),
        }
        return SimpleNamespace(files_metadata=files)

    monkeypatch.setattr(huggingface_hub, "get_safetensors_metadata", fake)
    doc = json.loads((QWEN25VL / "config.json").read_text())
    source = ModelSource(
        QWEN25VL / "config.json", "hub", QWEN25VL, "Qwen/Qwen2.5-VL-7B-Instruct", "main"
    )
    got = towers_left_out(doc, source, rules_for("0.20"), MmSettings(language_model_only=True))
    assert got is not None and got.bytes == _bytes(TOWER)
    assert asked == [("Qwen/Qwen2.5-VL-7B-Instruct", "main")]


@pytest.mark.parametrize("model_type", ["glm4v", "glm4v_moe"])
def test_glm4v_leaves_out_its_visual_tower(tmp_path: Path, model_type: str) -> None:
    """vLLM 0.15.0 glm4_1v.py:1413 / 0.34.0 :2037: ``with self._mark_tower_model(vllm_config,
    {"image", "video"}): self.visual = Glm4vVisionTransformer(...)``; the class's
    ``hf_to_vllm_mapper`` maps the checkpoint's ``model.visual.`` to ``visual.``
    (Glm4vMoeForConditionalGeneration subclasses it)."""
    tower = {"model.visual.patch_embed.proj.weight": (16, 3, 2, 2, 2),
             "model.visual.merger.proj.weight": (32, 32)}  # fmt: skip
    text = {"model.language_model.layers.0.self_attn.q_proj.weight": (32, 32)}
    folder = _folder(tmp_path, tower | text)
    doc = {"model_type": model_type, "vision_config": {}}
    got = towers_left_out(
        doc, _source(folder), rules_for("0.20"), MmSettings(language_model_only=True)
    )
    assert got is not None and (got.bytes, got.tensors) == (_bytes(tower), 2)
