"""Tiny randomly-initialised vision-language models built from configs (no downloads)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

transformers = pytest.importorskip("transformers")

from mmcli.check_embeddings import FileReport, check_file  # noqa: E402

IMAGE = 63  # the image token id of every tiny model below (Qwen2-VL: 99)


@dataclass
class Tiny:
    """A tiny model, and how to call it on one prompt holding one image per ``slots`` entry."""

    name: str
    model: Any
    token: int
    rows: int  # embedding rows per image
    hidden: int
    inputs: Callable[[list[int], int], dict[str, torch.Tensor]] = field(repr=False)

    def prompt(self, images: int = 1, stray: int = 0, drop: bool = False) -> list[int]:
        """``[1, 2, <image rows>…, 3]``; ``stray`` extra image tokens typed in the text;
        ``drop``: the image tokens truncated away."""
        ids = [1, 2]
        for _ in range(images):
            ids += [] if drop else [self.token] * self.rows
            ids += [3]
        ids += [4, self.token] * stray + [5]
        return ids


def _normal(model: Any) -> Any:
    """Every parameter N(0, 0.02): some families initialise norms or projections to zero."""
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    return model.eval()


def tiny_llava() -> Tiny:
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig
    from transformers import LlavaForConditionalGeneration as Llava

    vision = CLIPVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=8,
        patch_size=4,
        projection_dim=16,
    )
    text = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=64,
        max_position_embeddings=128,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=IMAGE,
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )
    model = _normal(Llava(config))

    def inputs(ids: list[int], images: int = 1) -> dict[str, torch.Tensor]:
        return {
            "input_ids": torch.tensor([ids]),
            "pixel_values": torch.randn(images, 3, 8, 8),
        }

    return Tiny("llava", model, IMAGE, 4, 32, inputs)


def tiny_qwen2_vl() -> Tiny:
    from transformers import Qwen2VLConfig
    from transformers import Qwen2VLForConditionalGeneration as Qwen2VL

    token = 99
    config = Qwen2VLConfig(
        text_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "vocab_size": 100,
            "max_position_embeddings": 256,
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        vision_config={
            "depth": 1,
            "embed_dim": 16,
            "hidden_size": 32,
            "num_heads": 2,
            "mlp_ratio": 2,
            "patch_size": 2,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "in_channels": 3,
        },
        image_token_id=token,
        video_token_id=98,
        vision_start_token_id=97,
        vision_end_token_id=96,
    )
    model = _normal(Qwen2VL(config))

    def inputs(ids: list[int], images: int = 1) -> dict[str, torch.Tensor]:
        tensor = torch.tensor([ids])
        return {
            "input_ids": tensor,
            # each image: a 4x4 grid of 2x2 patches -> 4 tokens after the 2x2 merge
            "pixel_values": torch.randn(16 * images, 3 * 2 * 2 * 2),
            "image_grid_thw": torch.tensor([[1, 4, 4]] * images),
            "mm_token_type_ids": (tensor == token).long(),
        }

    return Tiny("qwen2_vl", model, token, 4, 32, inputs)


def tiny_gemma3() -> Tiny:
    from transformers import Gemma3Config
    from transformers import Gemma3ForConditionalGeneration as Gemma3

    config = Gemma3Config(
        text_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 16,
            "vocab_size": 64,
            "max_position_embeddings": 256,
            "sliding_window": 16,
        },
        vision_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 16,
            "patch_size": 4,
        },
        mm_tokens_per_image=4,
        image_token_id=IMAGE,
        boi_token_index=62,
        eoi_token_index=61,
    )
    model = _normal(Gemma3(config))

    def inputs(ids: list[int], images: int = 1) -> dict[str, torch.Tensor]:
        tensor = torch.tensor([ids])
        return {
            "input_ids": tensor,
            "pixel_values": torch.randn(images, 3, 16, 16),
            "token_type_ids": (tensor == IMAGE).long(),
        }

    return Tiny("gemma3", model, IMAGE, 4, 32, inputs)


FAMILIES = {"llava": tiny_llava, "qwen2_vl": tiny_qwen2_vl, "gemma3": tiny_gemma3}
_BUILT: dict[str, Tiny] = {}


@pytest.fixture(params=sorted(FAMILIES))
def family(request: pytest.FixtureRequest) -> Tiny:
    """Each tiny model, built once per session (building is the slow part)."""
    name = request.param
    if name not in _BUILT:
        _BUILT[name] = FAMILIES[name]()
    return _BUILT[name]


def tiny(name: str) -> Tiny:
    if name not in _BUILT:
        _BUILT[name] = FAMILIES[name]()
    return _BUILT[name]


def check_dir(directory: Path) -> list[FileReport]:
    """``check-embeddings`` (its engine) on every dump written, in order."""
    files = sorted(directory.glob("*.safetensors"))
    return [check_file(p, device=torch.device("cpu")) for p in files]


def codes(report: FileReport, severity: str = "error") -> set[str]:
    return {f.code for f in report.findings if f.severity == severity}


# --------------------------------------------------------------------------------- tests

import mmcli.capture as capture  # noqa: E402


def run(
    t: Tiny, ids: list[int], tmp: Path, when: str, images: int = 1
) -> tuple[Any, Exception | None]:
    """Call the model inside a capture; return the capturer and what the model raised."""
    raised: Exception | None = None
    with capture.transformers(t.model, tmp, when=when) as cap, torch.no_grad():
        try:
            t.model(**t.inputs(ids, images))
        except Exception as exc:  # the model's own error, re-raised unchanged by capture
            raised = exc
    return cap, raised


def one_report(tmp: Path) -> FileReport:
    reports = check_dir(tmp)
    assert len(reports) == 1, [r.path for r in reports]
    return reports[0]


def test_healthy_dump_checks_clean(family: Tiny, tmp_path: Path) -> None:
    cap, raised = run(family, family.prompt(images=2), tmp_path, "always", images=2)
    assert raised is None
    report = one_report(tmp_path)
    assert report.status == "ok", [f.message for f in report.findings]
    assert not codes(report) and not codes(report, "warning")
    assert len(report.items) == 2 and all(
        s.shape == (family.rows, family.hidden) for s in report.items
    )
    from mmcli.dump.io import load_dump

    dump = load_dump(cap.written[0])
    meta = dump.metadata
    assert meta["format_version"] == "2" and meta["engine"] == "transformers"
    assert meta["placeholder_token_ids"] == str(family.token)
    # the language model's hidden size from the config, with its key, and the model dtype
    assert (meta["hidden_size"], meta["hidden_size_source"]) == (
        str(family.hidden),
        "text_config.hidden_size",
    )
    assert meta["dtype"] == "float32"
    # a vision tower without deepstack_visual_indexes: rows carry no deepstack levels
    assert meta["deepstack_levels"] == "0"
    assert meta["version_transformers"] == transformers.__version__
    assert dump.is_embed(1) is not None and bool(dump.is_embed(1).all())


def test_healthy_modes_failure_and_check_write_nothing(family: Tiny, tmp_path: Path) -> None:
    for when in ("failure", "check"):
        cap, raised = run(family, family.prompt(), tmp_path, when)
        assert raised is None and cap.written == []
    assert list(tmp_path.iterdir()) == []


def test_restored_on_exit(family: Tiny, tmp_path: Path) -> None:
    inner = [m for m in family.model.modules() if hasattr(type(m), "get_placeholder_mask")][0]
    before = dict(vars(inner))
    with capture.transformers(family.model, tmp_path):
        assert "forward" in vars(inner) and "get_image_features" in vars(inner)
    assert {k for k in vars(inner) if k not in before} == set()
    assert "forward" not in vars(inner)


def test_no_placeholder_truncated_prompt(family: Tiny, tmp_path: Path) -> None:
    # "Got 0 image tokens in the text but N tokens from image embeddings"
    cap, raised = run(family, family.prompt(drop=True), tmp_path, "failure")
    assert raised is not None  # the model's own mismatch error, re-raised unchanged
    report = one_report(tmp_path)
    assert "no-placeholder" in codes(report), [f.message for f in report.findings]


@pytest.mark.parametrize("name", ["llava", "gemma3"])
def test_stray_placeholder_typed_in_prompt(name: str, tmp_path: Path) -> None:
    # "Attempted to assign 702 = 702 multimodal tokens to 703 placeholders"
    t = tiny(name)
    cap, raised = run(t, t.prompt(stray=1), tmp_path, "failure")
    assert raised is not None  # the model's own mismatch error, unchanged
    report = one_report(tmp_path)
    assert "stray-placeholder" in codes(report)
    assert "engine-error" in codes(report, "info")
    assert str(raised).split(",")[0] in report.findings[-1].message or any(
        type(raised).__name__ in f.message for f in report.findings
    )


def test_encoder_returned_none(tmp_path: Path) -> None:
    t = tiny("llava")
    inner = t.model.model
    inner.get_image_features = lambda *a, **k: None  # a broken encoder path
    try:
        cap, raised = run(t, t.prompt(), tmp_path, "check")
    finally:
        del inner.get_image_features
    assert raised is None  # LLaVA merges nothing and carries on: only check mode sees it
    assert "encoder-returned-none" in codes(one_report(tmp_path))


def test_processor_outputs_never_reached_the_model(family: Tiny, tmp_path: Path) -> None:
    ids = family.prompt()
    with capture.transformers(family.model, tmp_path, when="check"), torch.no_grad():
        family.model(input_ids=torch.tensor([ids]))  # pixel_values dropped on the way
    report = one_report(tmp_path)
    assert "encoder-returned-none" in codes(report)


def _patched_features(t: Tiny, change: Callable[[Any], Any]) -> Any:
    inner = [m for m in t.model.modules() if hasattr(type(m), "get_placeholder_mask")][0]
    original = inner.get_image_features

    def features(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        out.pooler_output = change(out.pooler_output)
        return out

    inner.get_image_features = features
    return inner


def test_4d_stacked_grid(tmp_path: Path) -> None:
    t = tiny("gemma3")  # merges a stacked tensor by element count: a 4-D grid passes silently
    inner = _patched_features(t, lambda f: f.reshape(f.shape[0], 2, 2, f.shape[-1]))
    try:
        cap, raised = run(t, t.prompt(images=2), tmp_path, "check", images=2)
    finally:
        del inner.get_image_features
    assert raised is None
    report = one_report(tmp_path)
    assert "unflattened-grid" in codes(report)


def test_tp_sharded_projector(tmp_path: Path) -> None:
    t = tiny("llava")
    inner = _patched_features(t, lambda f: [x[:, : x.shape[-1] // 2] for x in f])
    t.model._tp_size = 2
    try:
        cap, raised = run(t, t.prompt(), tmp_path, "failure")
    finally:
        del inner.get_image_features, t.model._tp_size
    assert raised is not None
    report = one_report(tmp_path)
    assert "tp-sharded-width" in codes(report) and "hidden-size" not in codes(report)


def test_begin_end_rows_embedded(tmp_path: Path) -> None:
    t = tiny("qwen2_vl")

    def add_boundaries(items: Any) -> Any:
        return tuple(torch.cat([x[:1], x, x[:1]]) for x in items)

    inner = _patched_features(t, add_boundaries)
    try:
        cap, raised = run(t, t.prompt(images=2), tmp_path, "failure", images=2)
    finally:
        del inner.get_image_features
    assert raised is not None
    report = one_report(tmp_path)
    assert "boundary-rows" in codes(report)
    assert "exactly 2 more" in next(f.message for f in report.findings if f.code == "boundary-rows")


def test_fp16_overflow_in_the_projector(tmp_path: Path) -> None:
    t = tiny_llava()  # its own copy: it is turned to fp16 and broken
    t.model.half()
    with torch.no_grad():  # activations far above fp16's 65504 in the projector
        t.model.model.multi_modal_projector.linear_1.bias.fill_(10.0)
        t.model.model.multi_modal_projector.linear_2.weight.fill_(1000.0)
    inputs = t.inputs(t.prompt())
    inputs["pixel_values"] = inputs["pixel_values"].half()
    with capture.transformers(t.model, tmp_path, when="check"), torch.no_grad():
        t.model(**inputs)
    report = one_report(tmp_path)
    assert "fp16-overflow" in codes(report)


def test_budget_and_directory_mode(tmp_path: Path) -> None:
    t = tiny("llava")
    target = tmp_path / "new" / "dumps"
    with capture.transformers(t.model, target, when="always", max_dumps=2) as cap:
        with torch.no_grad():
            for _ in range(3):
                t.model(**t.inputs(t.prompt()))
    assert len(cap.written) == 2 and cap.skipped == 1
    assert (target.stat().st_mode & 0o777) == 0o700
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in cap.written)


def test_generate_captures_the_prefill_only(tmp_path: Path) -> None:
    t = tiny("llava")
    with capture.transformers(t.model, tmp_path, when="always") as cap, torch.no_grad():
        t.model.generate(**t.inputs(t.prompt()), max_new_tokens=3, do_sample=False)
    assert len(cap.written) == 1
    assert one_report(tmp_path).status == "ok"


def test_model_without_the_api_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="get_image_features"):
        with capture.transformers(torch.nn.Linear(2, 2), tmp_path):
            pass


VIDEO = 98  # tiny_qwen2_vl's video token id


def _qwen_av(ids: list[int], images: int, videos: int) -> dict[str, torch.Tensor]:
    """Qwen2-VL inputs for ``images`` images and ``videos`` two-frame videos (4 rows each)."""
    tensor = torch.tensor([ids])
    inputs = tiny("qwen2_vl").inputs(ids, images) if images else {"input_ids": tensor}
    # a 2-frame 8x8 video: one temporal patch, a 4x4 grid of 2x2 patches -> 4 rows
    inputs["pixel_values_videos"] = torch.randn(16 * videos, 3 * 2 * 2 * 2)
    inputs["video_grid_thw"] = torch.tensor([[1, 4, 4]] * videos)
    inputs["mm_token_type_ids"] = (tensor == IMAGE_QWEN).long() + 2 * (tensor == VIDEO).long()
    return inputs


IMAGE_QWEN = 99


def test_video_failure_writes_a_dump_tagged_video(tmp_path: Path) -> None:
    """One video token short: the model's own 'Video features and video tokens do not match'
    (the prompt holds no image), written with the video item tagged as such."""
    t = tiny("qwen2_vl")
    ids = [1, 2, 97] + [VIDEO] * 3 + [96, 5]
    with capture.transformers(t.model, tmp_path, when="failure") as cap, torch.no_grad():
        with pytest.raises(ValueError, match="Video features and video tokens do not match"):
            t.model(**_qwen_av(ids, 0, 1))
    (path,) = cap.written
    from mmcli.dump.io import load_dump

    meta = load_dump(path).metadata
    assert meta["item_modalities"] == "video" and meta["modality"] == "video"
    assert meta["placeholder_token_ids"] == str(VIDEO)
    assert meta["engine_error"].startswith("ValueError: Video features and video tokens")
    report = one_report(tmp_path)
    # 4 rows for 3 video tokens: one item cannot tell boundary rows from a tokens-per-item skew
    (finding,) = [f for f in report.findings if f.severity == "error"]
    assert finding.code == "boundary-rows" and "tokens per item" in finding.message


def test_image_and_video_prompt_records_both(tmp_path: Path) -> None:
    t = tiny("qwen2_vl")
    ids = [1, 97] + [IMAGE_QWEN] * 4 + [96, 3, 97] + [VIDEO] * 4 + [96, 5]
    with capture.transformers(t.model, tmp_path, when="always") as cap, torch.no_grad():
        t.model(**_qwen_av(ids, 1, 1))
    (path,) = cap.written
    from mmcli.dump.io import load_dump

    dump = load_dump(path)
    assert dump.num_items == 2 and dump.metadata["item_modalities"] == "image,video"
    assert dump.metadata["placeholder_token_ids"] == f"{IMAGE_QWEN},{VIDEO}"
    from safetensors.torch import load_file

    assert load_file(str(path))["placeholder_ranges"].tolist() == [[2, 4], [9, 4]]
    report = one_report(tmp_path)
    assert codes(report) == set() and codes(report, "warning") == set()
