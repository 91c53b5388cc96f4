"""Serve-line flags around the encoder profile: ``--language-model-only`` (every modality off),
``--mm-encoder-only`` (no KV cache at all) and ``--mm-encoder-attn-dtype`` (another vision
attention kernel)."""

from __future__ import annotations

from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv import PlanRequest, plan_run
from mmcli.kv.releases import rules_for
from mmcli.kv.whatif.encoder import off_note

QWEN25VL = "tests/kv/whatif/models/qwen2_5_vl_7b"
LINE = f"vllm serve {QWEN25VL} --max-model-len 32768"
FIELDS: dict[str, Any] = {"gpu": "H100", "weights": "15.6GiB", "vllm_version": "0.33"}


def _encoder(result: Any) -> list[Any]:
    assert result.estimate is not None
    return [p for p in result.estimate.components if p.name == "encoder profile"]


def test_language_model_only_leaves_the_encoder_out() -> None:
    """vLLM 0.20.0 config/multimodal.py: ``language_model_only`` "disables all multimodal
    inputs by setting all modality limits to 0" (``get_limit_per_prompt`` returns 0), so the
    profile run encodes nothing; from 0.15 ``_mark_tower_model`` (interfaces.py) skips the
    towers whose modalities are all off, so their weights are not loaded either: the note says
    a checkpoint's figure still counts them. On 0.33 (no extensible cache, whose margin also
    follows the encoder's transient) the KV estimate gains exactly the encoder component."""
    with_encoder = plan_run(PlanRequest(serve=LINE, **FIELDS))
    without = plan_run(PlanRequest(serve=f"{LINE} --language-model-only", **FIELDS))
    assert _encoder(with_encoder) and not _encoder(without)
    assert without.estimate is not None
    notes = " ".join(without.estimate.notes)
    assert "--language-model-only turns every modality off: no encoder profile" in notes
    assert "does not load the encoder towers" in notes
    gained = without.estimate.kv_bytes - with_encoder.estimate.kv_bytes  # type: ignore[union-attr]
    assert gained == _encoder(with_encoder)[0].bytes


def test_the_weights_caveat_follows_the_release() -> None:
    """0.14's generic code builds every tower whatever the limits (Qwen2.5-VL skipped its own
    since 0.12, which is not modelled apart): the caveat is said from 0.15."""
    assert "does not load" not in off_note(rules_for("0.14.0"), "x")
    assert "vLLM 0.15.0 does not load" in off_note(rules_for("0.15.0"), "x")


def test_an_encoder_only_instance_is_refused() -> None:
    """vLLM 0.34.0 v1/worker/gpu_worker.py ``_make_model_runner``: ``mm_encoder_only`` runs
    ``MMEncoderModelRunner`` ("skips the language component", config/multimodal.py): no KV."""
    with pytest.raises(InputError, match="encoder-only instance"):
        plan_run(PlanRequest(serve=f"{LINE} --mm-encoder-only", **FIELDS))


def test_fp8_encoder_attention_is_refused_where_the_encoder_is_estimated() -> None:
    """vLLM 0.34.0 config/multimodal.py ``mm_encoder_attn_dtype``: "fp8" runs the ViT's
    attention through FlashInfer's cuDNN FP8 kernel, another forward than the one tallied."""
    with pytest.raises(InputError, match="encoder's forward") as info:
        plan_run(PlanRequest(serve=f"{LINE} --mm-encoder-attn-dtype fp8", **FIELDS))
    assert "--mm-encoder-attn-dtype" in info.value.message


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"language_model_only": True, "vllm_version": "0.16"}, "--language-model-only"),
        ({"mm_device_do_normalize": False, "vllm_version": "0.29"}, "--mm-device-do-normalize"),
    ],
)
def test_flags_of_later_releases_are_refused(fields: dict[str, Any], said: str) -> None:
    """vLLM 0.17.0 config/multimodal.py adds ``language_model_only`` (0.16.0 has none) and
    0.30.0 ``mm_device_do_normalize`` (0.29.0 has none): an older release's parser refuses
    them, and so does the request, naming the first release that has the flag."""
    with pytest.raises(InputError, match=f"{said}: vLLM") as info:
        PlanRequest(model=QWEN25VL, **fields)
    assert "--vllm-version" in info.value.hint
