"""The multimodal encoder's profile in the ``--gpu`` estimate: named with its inputs, not
estimated, and left out under ``--skip-mm-profiling``."""

from __future__ import annotations

import pytest

from mmcli.errors import InputError
from mmcli.kv import PlanRequest, plan_run
from mmcli.kv.releases import first_release
from mmcli.kv.whatif.encoder import encoder_profile

#: google/gemma-3-27b-it's published config.json (tests/kv/realworld/configs/PROVENANCE.md):
#: a SigLIP vision_config (hidden 1,152, 27 layers, 896-pixel images in 14-pixel patches)
#: and mm_tokens_per_image 256.
GEMMA3 = "tests/kv/realworld/configs/google--gemma-3-27b-it_config.json"
TEXT_ONLY = "samples/kv/qwen3-14b-like.json"


def _estimate(model: str = GEMMA3, **extra: object) -> object:
    request = PlanRequest(
        model,
        gpu="H100",
        weights="54GiB",
        vllm_version="0.20",
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
        **extra,  # type: ignore[arg-type]
    )
    est = plan_run(request).estimate
    assert est is not None
    return est


def test_a_multimodal_config_names_the_encoder_profile() -> None:
    """vLLM 0.20.0 vllm/v1/worker/gpu_model_runner.py profile_run: with multimodal inputs (and
    no skip_mm_profiling) the encoder runs on a dummy batch of the largest item before the
    text forward, its outputs kept in the encoder cache. It is named, with the encoder's
    geometry and the item's token count as inputs, and not taken off (bytes null in JSON)."""
    est = _estimate()
    (part,) = [p for p in est.components if p.name == "encoder profile"]  # type: ignore[attr-defined]
    assert part.estimated is False and part.bytes == 0
    doc = part.to_json()
    assert doc["bytes"] is None and doc["estimated"] is False
    assert doc["inputs"]["vision_config"]["hidden_size"] == 1152
    assert doc["inputs"]["vision_config"]["patch_size"] == 14
    assert doc["inputs"]["mm_tokens_per_image"] == 256
    assert doc["inputs"]["max_num_batched_tokens"] == 8192
    assert "skip-mm-profiling" in part.source
    terms = dict(est.terms())  # type: ignore[attr-defined]
    assert terms["− encoder profile"] is None
    assert any("not estimated" in note for note in est.notes)  # type: ignore[attr-defined]


def test_skip_mm_profiling_leaves_it_out() -> None:
    """--skip-mm-profiling (MultiModalConfig.skip_mm_profiling, vLLM 0.20.0
    vllm/config/multimodal.py) makes profile_run log "Skipping memory profiling for multimodal
    encoder and encoder cache." and run the text forward only."""
    with_encoder = _estimate()
    skipped = _estimate(skip_mm_profiling=True)
    names = [p.name for p in skipped.components]  # type: ignore[attr-defined]
    assert "encoder profile" not in names and "activation peak" in names
    assert any("--skip-mm-profiling" in note for note in skipped.notes)  # type: ignore[attr-defined]
    assert not any("not estimated" in note for note in skipped.notes)  # type: ignore[attr-defined]
    # Not estimated, so nothing was taken off for it: the same KV memory either way.
    assert skipped.kv_bytes == with_encoder.kv_bytes  # type: ignore[attr-defined]


def test_skip_mm_profiling_from_a_serve_line() -> None:
    """The serve line's flag (vLLM 0.20.0 engine/arg_utils.py ``--skip-mm-profiling``) sets
    the same field."""
    request = PlanRequest(
        serve=f"vllm serve {GEMMA3} --skip-mm-profiling",
        gpu="H100",
        weights="54GiB",
        vllm_version="0.20",
    )
    assert request.skip_mm_profiling is True
    est = plan_run(request).estimate
    assert est is not None
    assert "encoder profile" not in [p.name for p in est.components]


def test_the_flag_is_refused_before_its_release() -> None:
    """skip_mm_profiling first appears in vLLM 0.10.1's engine/arg_utils.py (absent from
    0.10.0's)."""
    assert first_release("skip_mm_profiling_flag", True) == "0.10.1"
    with pytest.raises(InputError, match="--skip-mm-profiling") as info:
        PlanRequest(GEMMA3, vllm_version="0.10.0", skip_mm_profiling=True)
    assert "0.10.1" in info.value.hint


def test_a_text_only_config_has_no_encoder_profile() -> None:
    """No vision_config / audio_config: no encoder part of the profile run."""
    assert encoder_profile({"hidden_size": 64}, 8192) is None
    est = _estimate(TEXT_ONLY)
    assert "encoder profile" not in [p.name for p in est.components]  # type: ignore[attr-defined]
