"""The multimodal encoder's profile in the ``--gpu`` estimate: the dummy batch vLLM encodes
(:mod:`mmcli.kv.whatif.mm_dummy`), what it adds to the profile's torch peak, and where it is
left out (``--skip-mm-profiling``, ``--limit-mm-per-prompt`` 0, families not mirrored)."""

from __future__ import annotations

from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv import PlanRequest, plan_run
from mmcli.kv.releases import first_release, rules_for
from mmcli.kv.whatif.encoder import MmSettings, encoder_profile, parse_limits

#: google/gemma-3-27b-it's published config.json (tests/kv/realworld/configs/PROVENANCE.md):
#: a SigLIP vision_config (hidden 1,152, intermediate 4,304, 27 layers, 896-pixel images in
#: 14-pixel patches), mm_tokens_per_image 256, text hidden 5,376.
GEMMA3 = "tests/kv/realworld/configs/google--gemma-3-27b-it_config.json"
#: Qwen/Qwen2.5-VL-7B-Instruct's config.json and preprocessor_config.json as a model folder
#: (tests/kv/whatif/models/PROVENANCE.md): vision hidden 1,280, intermediate 3,420 (gated
#: SiLU), patch 14, merge 2, temporal 2; text hidden 3,584; max_pixels 12,845,056.
QWEN25VL = "tests/kv/whatif/models/qwen2_5_vl_7b"
TEXT_ONLY = "samples/kv/qwen3-14b-like.json"


def _estimate(model: str = GEMMA3, **extra: Any) -> Any:
    fields: dict[str, Any] = {
        "gpu": "H100",
        "weights": "54GiB",
        "vllm_version": "0.20",
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 1024,
    }
    est = plan_run(PlanRequest(model, **(fields | extra))).estimate
    assert est is not None
    return est


def _part(est: Any, name: str = "encoder profile") -> Any:
    (part,) = [p for p in est.components if p.name == name]
    return part


def test_gemma3_dummy_batch_and_what_it_adds() -> None:
    """vLLM 0.20.0 multimodal/encoder_budget.py: budget max(8192, 256) = 8192; items
    max(1, min(8192 // 256, 1024 × min(999, 131072 // 256))) = 32 images, each 256 tokens
    (gemma3_mm.py get_num_image_tokens, no pan-and-scan) from (896 / 14)² = 4,096 SigLIP
    patches. Forward: 32 × 3 × 896² float32 pixels = 308,281,344 B, plus 131,072 patches ×
    the SigLIP block's peak at its GELU (test_siglip_vision_block_tally) (4 × 1152 + 2 × 4304)
    × 2 B = 3,464,495,104 B; outputs 32 × 256 × 5376 × 2 B = 88,080,384 B. The torch peak is
    max(forward, outputs + text peak)."""
    est = _estimate()
    part, text = _part(est), _part(est, "activation peak")
    got = part.inputs
    assert (got["modality"], got["items"], got["tokens_per_item"]) == ("image", 32, 256)
    assert (got["patches_per_item"], got["encoder_budget"]) == (4096, 8192)
    assert got["pixel_values_bytes"] == 308_281_344
    assert got["forward_bytes"] == 308_281_344 + 3_464_495_104
    assert got["encoder_forward_rule"] == "siglip-qkv-views"
    assert got["outputs_bytes"] == 88_080_384
    assert got["text_peak_bytes"] == text.bytes
    peak = max(308_281_344 + 3_464_495_104, 88_080_384 + text.bytes)
    assert part.estimated and part.bytes == peak - text.bytes
    assert part.to_json()["bytes"] == part.bytes
    assert dict(est.terms())["− encoder profile (estimate)"] == -part.bytes


def test_the_outputs_count_when_the_forward_is_below_the_text_peak() -> None:
    """With 4 sequences the sampler's logits are small but the budget still takes 32 images;
    at tp 8 the forward's projections shrink: what is added is never less than the outputs
    kept in the encoder cache through the text forward."""
    rules = rules_for("0.20")
    doc = {
        "model_type": "gemma3",
        "mm_tokens_per_image": 256,
        "text_config": {"hidden_size": 5376},
        "vision_config": {
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_hidden_layers": 27,
            "image_size": 896,
            "patch_size": 14,
        },
    }
    kwargs: dict[str, Any] = {"max_num_batched_tokens": 8192, "max_num_seqs": 1024, "tp": 1}
    part, note = encoder_profile(
        doc, rules, dtype_bytes=2, text_peak=10 * 2**30, settings=MmSettings(131072), **kwargs
    )
    assert note is None and part is not None
    assert part.bytes == part.inputs["outputs_bytes"] == 88_080_384


def test_skip_mm_profiling_leaves_it_out() -> None:
    """--skip-mm-profiling (vLLM 0.20.0 vllm/config/multimodal.py): profile_run logs
    "Skipping memory profiling for multimodal encoder and encoder cache."; the KV memory
    grows by exactly the component."""
    with_encoder = _estimate()
    skipped = _estimate(skip_mm_profiling=True)
    assert "encoder profile" not in [p.name for p in skipped.components]
    assert any("--skip-mm-profiling" in note for note in skipped.notes)
    assert skipped.kv_bytes - with_encoder.kv_bytes == _part(with_encoder).bytes


def test_limits_from_a_serve_line() -> None:
    """--limit-mm-per-prompt (JSON, vLLM 0.20.0 engine/arg_utils.py) is applied: image 0
    disables the only modality (encoder_budget.py: no tower modality, no encoder profile);
    image 2 with 4 sequences caps the batch at 4 × 2 = 8 items."""
    off = PlanRequest(
        serve=f"vllm serve {GEMMA3} --limit-mm-per-prompt '{{\"image\": 0}}'",
        gpu="H100",
        weights="54GiB",
        vllm_version="0.20",
    )
    assert off.limit_mm_per_prompt == {"image": 0}
    est = plan_run(off).estimate
    assert est is not None and "encoder profile" not in [p.name for p in est.components]
    assert any("disables every modality" in note for note in est.notes)
    two = _estimate(limit_mm_per_prompt='{"image": 2}', max_num_seqs=4)
    assert _part(two).inputs["items"] == 8


def test_skip_mm_profiling_from_a_serve_line() -> None:
    """The serve line's flag (vLLM 0.20.0 engine/arg_utils.py ``--skip-mm-profiling``)."""
    request = PlanRequest(
        serve=f"vllm serve {GEMMA3} --skip-mm-profiling",
        gpu="H100",
        weights="54GiB",
        vllm_version="0.20",
    )
    assert request.skip_mm_profiling is True
    est = plan_run(request).estimate
    assert est is not None and "encoder profile" not in [p.name for p in est.components]


def test_limits_are_read_as_vllm_reads_them() -> None:
    """JSON counts, 0.11's per-modality options ({"count": …}) and the older
    ``image=2,video=1`` text; anything else is refused naming the flag."""
    assert parse_limits('{"image": 2}') == {"image": 2}
    assert parse_limits("image=2,video=1") == {"image": 2, "video": 1}
    assert parse_limits({"video": {"count": 0}}) == {"video": {"count": 0}}
    for bad in ("image", '{"image": -1}', '["image"]'):
        with pytest.raises(InputError, match="--limit-mm-per-prompt"):
            parse_limits(bad)


def test_dummy_sizes_are_named_not_estimated() -> None:
    """0.11's dummy options (width / height) shrink the profiled item: not mirrored, so the
    component is named, not estimated, and the note says why."""
    est = _estimate(limit_mm_per_prompt={"image": {"count": 1, "width": 512, "height": 512}})
    part = _part(est)
    assert part.estimated is False and part.to_json()["bytes"] is None
    assert any("dummy options for image" in note for note in est.notes)


@pytest.mark.parametrize(
    ("version", "length", "expected"),
    [
        # 0.20.0 qwen2_vl.py: image of most features 12845056 // 28² = 16,384 tokens; the video
        # of most features: frames 1..4 fit 32,768 (padded to pairs: 2 × 16,384), 5 does not.
        ("0.20", 32768, ("video", 32768, 1, 32768 * 4)),
        # 128,000: 14 frames (the 0.11+ cap) = 7 pairs = 114,688 tokens.
        ("0.20", 128000, ("video", 114688, 1, 114688 * 4)),
        # 4,096 holds no frame pair: one frame (padded to a pair), tied with the image; from
        # 0.17 the tie goes to the later name (max keyed on (tokens, name)).
        ("0.20", 4096, ("video", 16384, 1, 16384 * 4)),
        # 0.10.1: the video budget is 32,768 less one image = 16,384: 2 frames, tied; the
        # first listed (image) wins before 0.17.
        ("0.10.1", 32768, ("image", 16384, 1, 16384 * 4)),
    ],
)
def test_qwen25_vl_dummy_item(version: str, length: int, expected: tuple[Any, ...]) -> None:
    est = _estimate(QWEN25VL, weights="15.6GiB", vllm_version=version, max_model_len=length)
    got = _part(est).inputs
    assert (got["modality"], got["tokens_per_item"], got["items"], got["patches_per_item"]) == (
        expected[0],
        expected[1],
        expected[2],
        expected[3],
    )
    # 1,176 float32 pixel values a patch (3 × 2 × 14²). 0.20's vision block peaks at its MLP
    # stage (block input, attention output, the out-of-place norm's two results and the MLP
    # output 5 × 1280, gated SiLU MLP 3 × 3420, see test_qwen25_vision_stage_from_012); 0.10's
    # at the rotary of k (13 hidden-size units of 2 bytes, see
    # test_qwen25_vision_stage_tallies) above its MLP stage.
    patches = expected[3]
    per_patch = (5 * 1280 + 3 * 3420) * 2 if version == "0.20" else 13 * 1280 * 2
    forward = patches * 1176 * 4 + patches * per_patch
    assert got["forward_bytes"] == forward and got["encoder_mlp_gated"] is True
    assert _part(est).bytes == max(forward - got["text_peak_bytes"], got["outputs_bytes"])


def test_qwen_max_pixels_by_release() -> None:
    """mm_processor_kwargs max_pixels 1,003,520 (28 × 28 × 1280): from 0.13 (qwen2_vl.py
    get_image_size_with_most_features, closest_factor_pair) the closest factor pair of
    1003520 // 784 = 1,280 tokens (32 × 40); 0.12's resizes a huge square by smart_resize:
    floor(√1003520 / 28) = 35, 35² = 1,225 tokens. Video off."""
    kwargs: dict[str, Any] = {
        "max_model_len": 32768,
        "mm_processor_kwargs": {"max_pixels": 1003520},
        "limit_mm_per_prompt": {"video": 0},
    }
    new = _estimate(QWEN25VL, weights="15.6GiB", vllm_version="0.20", **kwargs)
    old = _estimate(QWEN25VL, weights="15.6GiB", vllm_version="0.12", **kwargs)
    assert first_release("qwen_vl_image", "factor") == "0.13"
    assert _part(new).inputs["tokens_per_item"] == 1280
    assert _part(old).inputs["tokens_per_item"] == 1225
    # 8192 // 1280 = 6 images in the batch, 8192 // 1225 = 6 too.
    assert _part(new).inputs["items"] == _part(old).inputs["items"] == 6


def test_a_config_file_without_its_processor_is_named_not_estimated() -> None:
    """A bare config.json gives no max_pixels: the note names what to give."""
    est = _estimate(f"{QWEN25VL}/config.json", weights="15.6GiB", max_model_len=32768)
    assert _part(est).estimated is False
    assert any("max_pixels is not known" in note for note in est.notes)


def test_families_not_mirrored_are_named() -> None:
    """Any other encoder (LLaVA's CLIP tower here) is named, not estimated, with its
    model_type in the note."""
    doc = {"model_type": "llava", "vision_config": {"hidden_size": 1024, "patch_size": 14}}
    part, note = encoder_profile(
        doc,
        rules_for("0.20"),
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
        tp=1,
        dtype_bytes=2,
        text_peak=0,
        settings=MmSettings(4096),
    )
    assert part is not None and part.estimated is False and part.inputs["vision_config"]
    assert note is not None and "'llava'" in note and "not estimated" in note


def test_model_runner_v2_before_it_profiles_the_encoder() -> None:
    """vLLM 0.22.0 v1/worker/gpu/model_runner.py profile_run runs the text forward only; the
    encoder profile enters V2 with ``profile_encoder_cache`` in 0.29."""
    from mmcli.kv.whatif.budget import Profile, encoder_parts
    from mmcli.kv.whatif.components import geometry
    from mmcli.kv.whatif.encoder import MmSettings as Settings

    assert first_release("v2_encoder_profile") == "0.29"
    import json
    from pathlib import Path

    config = json.loads(Path(GEMMA3).read_text())
    geo = geometry(config)
    assert geo is not None
    notes: list[str] = []
    profile = Profile(config, mm=Settings(131072))
    got = encoder_parts(profile, rules_for("0.25"), "v2", (8192, 1024, 1), geo, 0, notes)
    assert got == () and "does not profile the multimodal encoder" in notes[0]
    notes.clear()
    assert encoder_parts(profile, rules_for("0.29"), "v2", (8192, 1024, 1), geo, 0, notes)


def test_the_flag_is_refused_before_its_release() -> None:
    """skip_mm_profiling first appears in vLLM 0.10.1's engine/arg_utils.py."""
    assert first_release("skip_mm_profiling_flag", True) == "0.10.1"
    with pytest.raises(InputError, match="--skip-mm-profiling") as info:
        PlanRequest(GEMMA3, vllm_version="0.10.0", skip_mm_profiling=True)
    assert "0.10.1" in info.value.hint


def test_a_text_only_config_has_no_encoder_profile() -> None:
    """No vision_config / audio_config: no encoder part of the profile run."""
    rules = rules_for("0.20")
    got = encoder_profile(
        {"hidden_size": 64},
        rules,
        max_num_batched_tokens=8192,
        max_num_seqs=1,
        tp=1,
        dtype_bytes=2,
        text_peak=0,
        settings=MmSettings(),
    )
    assert got == (None, None)
    assert "encoder profile" not in [p.name for p in _estimate(TEXT_ONLY).components]


#: The published logs whose model's family is mirrored (tests/kv/gpu_logs/cases.json), by the
#: model_type of the architecture the log serves.
_LOGGED_FAMILIES = {
    "Qwen/Qwen2.5-VL-32B-Instruct": "qwen2_5_vl",
    "Qwen/Qwen2-VL-2B-Instruct": "qwen2_vl",
    "Qwen/Qwen3-VL-30B-A3B-Instruct": "qwen3_vl_moe",
}


@pytest.mark.parametrize("model", sorted(_LOGGED_FAMILIES))
def test_the_dummy_batch_is_the_one_the_log_names(model: str) -> None:
    """Each log's "Encoder cache will be initialized with a budget of N tokens, and profiled
    with K <modality> items" line, against the dummy batch derived for its release, lengths
    and batch limits. The token counts need only the processor's max_pixels (the published
    12,845,056 of the Qwen2-VL / Qwen2.5-VL processors, tests/kv/whatif/models) and the
    patch / merge / temporal sizes (14 / 2 / 2, both families' vision configs); the tower's
    other figures do not enter them (the 7B's stand in). Qwen3-VL's come from the 30B's own
    config (patch 16, merge 2, temporal 2) and the Qwen3-VL image / video processor files
    (longest_edge 16,777,216 / 25,165,824) of its model folder (tests/kv/gpu_logs/configs)."""
    import json
    from pathlib import Path

    from mmcli.kv.whatif.mm_dummy import dummy_batch

    logs = Path("tests/kv/gpu_logs")
    cases = [
        case | {"folder": logs} for case in json.loads((logs / "cases.json").read_text())["cases"]
    ]
    (case,) = [c for c in cases if c["model"] == model]
    folder, video = Path(QWEN25VL), None
    doc = json.loads((folder / "config.json").read_text())
    if _LOGGED_FAMILIES[model] == "qwen3_vl_moe":
        folder = case["folder"] / "configs" / case["config"]
        doc = json.loads((folder / "config.json").read_text())
        video = json.loads((folder / "video_preprocessor_config.json").read_text())
    doc["model_type"] = _LOGGED_FAMILIES[model]
    if doc["model_type"] == "qwen2_vl":
        doc["vision_config"] |= {"embed_dim": 1280, "mlp_ratio": 4}
    batch = dummy_batch(
        doc,
        rules_for(".".join(case["release"].split(".")[:3])),
        max_model_len=case["max_model_len"],
        max_num_batched_tokens=case["max_num_batched_tokens"],
        max_num_seqs=case["max_num_seqs"],
        limits=case.get("limit_mm_per_prompt"),
        processor=json.loads((folder / "preprocessor_config.json").read_text()),
        video_processor=video,
    )
    assert batch is not None
    logged = (case["encoder_budget_tokens"], case["encoder_items"], case["encoder_modality"])
    assert (batch.budget, batch.items, batch.modality) == logged


@pytest.mark.parametrize(
    ("stage", "tp", "units"),
    [
        # vLLM 0.10.0 qwen2_5_vl.py:292-302 (Qwen2_5_VisionAttention.forward): qkv output (3),
        # contiguous q/k/v copies (3), q then k through apply_rotary_pos_emb_vision
        # (qwen2_vl.py:235: t.float(), then vllm_flash_attn's apply_rotary_emb on CUDA, an
        # out-of-place float32 result, then .type_as(t)). At k's call: q's copy was freed when
        # q was rebound, so qkv 3 + q rotated 1 + k 1 + v 1 + k's type_as 1, float32 1 + 1
        # (2 units each), with the block input and its normed copy: 2 + 7 + 4 = 13.
        ("rotary-each-fp32", 1, 13),
        # vLLM 0.11.0 qwen2_5_vl.py:344-356: qkv 3, contiguous copies 3, torch.cat([q, k]) 2,
        # qwen2_vl.py:275 apply_rotary_pos_emb_vision: float32 copy 2 (4 units) and float32
        # result 2 (4 units), type_as 2; block input 1 and the normed input 1 that
        # nn.Module._call_impl(*args) holds: 2 + 10 + 8 = 20.
        ("rotary-cat-fp32", 1, 20),
        # vLLM 0.11.1 qwen2_5_vl.py:371-387: qkv 3, einops.rearrange of qk (a strided view) to
        # (two b) s head head_dim copies it (2); apply_rotary_pos_emb_vision (0.11.1
        # qwen2_vl.py, dispatch_rotary_emb_function → vllm_flash_attn on CUDA) on t.float():
        # 2 + 7 + 8 = 17.
        ("rotary-reshape-fp32", 1, 17),
        # vLLM 0.34.0 qwen2_5_vl.py:417-463 (0.22.0 :377-423, 0.17.0 :370-416):
        # qkv output 3 (x rebound; the normed input stays live in nn.Module._call_impl), q/k a
        # strided view copied by .contiguous() (:433) 2, ApplyRotaryEmb(enforce_enable=True)
        # with enable_fp32_compute False (rotary_embedding/common.py:120, no upcast) whose
        # forward_cuda (:217-235) calls vllm_flash_attn apply_rotary_emb out of place
        # (vllm_flash_attn/ops/triton/rotary.py:188 torch.empty_like(x)) 2, the attention
        # output (v1/attention/ops/vit_attn_wrappers.py:69 torch.empty_like(q); v is a strided
        # view with stride(-1) 1, so flash_attn_interface.py:117 maybe_contiguous copies
        # nothing) 1, and at self.proj (:463) its output 1 whole: 3 + 8 = 11. A narrow MLP
        # (intermediate 1280) so the attention stage wins.
        ("rotary-copy-model", 1, 11),
        # vLLM 0.12.0 qwen2_5_vl.py:358-434: qkv output 3 (x rebound), the rearranged q/k
        # (einops "b s two head head_dim -> (two b) ...", qk a strided view, so a copy) 2,
        # kept in the local qk_reshaped to the return; apply_rotary_pos_emb_vision
        # (0.12.0 qwen2_vl.py:280-287: no .float(); rotary_embedding/common.py:77-78 the
        # vllm_flash_attn apply_rotary_emb on CUDA, out of place; .type_as a no-op) 2;
        # vit_attn_wrappers.py:35-49 the attention output 1 (v's stride(-1) is 1: no copy;
        # the rearranged output of b = 1 is contiguous already); self.proj's output 1 whole:
        # 3 + 8 = 11. 0.13.0 – 0.16.0 (ApplyRotaryEmb(enforce_enable=True) forward_cuda
        # common.py:192-225, enable_fp32_compute False; MMEncoderAttention.enabled() True so
        # its flash path; 0.15.0's qk_reshaped.contiguous() is a no-op on the copy): the same.
        ("rotary-reshape-model", 1, 11),
    ],
)
def test_qwen25_vision_stage_tallies(stage: str, tp: int, units: int) -> None:
    """The attention stage of Qwen2.5-VL's vision block, in hidden-size units of 2 bytes a
    patch at one GPU (Qwen2.5-VL-7B's vision tower: hidden 1280, intermediate 3420, from the
    QWEN25VL config; its MLP stage, 3 × 1280 + 3 × 3420 = 14,100 × 2 bytes, is smaller)."""
    from mmcli.kv.whatif.encoder import vision_peak

    wide = 1280 if stage.endswith("-model") else 3420
    assert vision_peak(stage, 1280, wide, tp, 2) == units * 1280 * 2


def test_qwen25_vision_stage_mlp_and_gather() -> None:
    """The MLP stage wins where the MLP is wide enough: vLLM 0.11.0 layernorm.py:218 the
    fused residual RMSNorm normalises the block input in place (qwen2_5_vl.py:469), so the
    block input, the residual and the MLP's output are whole, gate/up (2 × I) and its SiLU
    product (I) per rank. At tp 2 0.11.0's split_qkv (qwen2_5_vl.py:315) all-gathers qkv:
    the whole 3 × H stays live under the per-rank q/k/v views."""
    from mmcli.kv.whatif.encoder import vision_peak

    assert vision_peak("rotary-cat-fp32", 1280, 20000, 1, 2) == (3 * 1280 + 3 * 20000) * 2
    # tp 2: whole 2 + gathered 3, per rank (10 × 2 + 4 × 4) / 2 units of 1280 bytes.
    assert vision_peak("rotary-cat-fp32", 1280, 3420, 2, 2) == 5 * 1280 * 2 + 36 * 1280 // 2
    assert vision_peak("rotary-reshape-fp32", 1280, 3420, 2, 2) == 2 * 1280 * 2 + 30 * 1280 // 2


def test_qwen25_vision_stage_from_012() -> None:
    """From vLLM 0.12 Qwen2.5-VL-7B's vision block (hidden 1280, intermediate 3420) peaks at
    its MLP stage, the encoder not compiled (compile_mm_encoder False: 0.12.0
    config/compilation.py:483, 0.16.0 :447, 0.17.0 :471, 0.34.0 :601). Its fused residual
    RMSNorm (0.12.0 qwen2_5_vl.py:623 norm_layer RMSNorm; the block's norm2(x, residual=x_attn)
    :485) runs out of place under the default compilation: inductor sets custom_ops "none"
    (0.12.0 config/vllm.py:637-644, 0.17.0 :823-830), RMSNorm.enabled() is then False
    (model_executor/custom_op.py:110-142) and its forward_native (layernorm.py:132-175) returns
    new tensors; from 0.21 RMSNorm calls ir.ops.fused_add_rms_norm.maybe_inplace (0.21.0
    layernorm.py:96) with ["native"] first under inductor (0.21.0 platforms/cuda.py:576). The
    block keeps x and x_attn beside them: 5 × 1280 + 3 × 3420. At tp 2 the projection's
    all-reduce (0.34.0 layers/linear.py:1851) returns a new whole tensor beside the rank's
    partial sum: 3 + 1 whole units, 8 per rank halved."""
    from mmcli.kv.releases import rules_for
    from mmcli.kv.whatif.encoder import vision_peak

    stages = {v: rules_for(v).qwen_vl_vision_stage for v in ("0.11.2", "0.12.0", "0.16.0")}
    assert stages == {"0.11.2": "rotary-reshape-fp32", "0.12.0": "rotary-reshape-native-norm",
                      "0.16.0": "rotary-reshape-native-norm"}  # fmt: skip
    for version in ("0.17.0", "0.20.0", "0.21.0", "0.34.0"):
        assert rules_for(version).qwen_vl_vision_stage == "rotary-copy-native-norm"
    for rule in ("rotary-copy", "rotary-reshape"):
        assert vision_peak(f"{rule}-model", 1280, 3420, 1, 2) == (3 * 1280 + 3 * 3420) * 2
        native = vision_peak(f"{rule}-native-norm", 1280, 3420, 1, 2)
        assert native == (5 * 1280 + 3 * 3420) * 2
        assert vision_peak(f"{rule}-model", 1280, 640, 2, 2) == (4 + 8 // 2) * 1280 * 2
        assert vision_peak(f"{rule}-native-norm", 1280, 640, 2, 2) == (4 + 8 // 2) * 1280 * 2


@pytest.mark.parametrize(
    ("version", "rule"),
    [("0.12", "rotary-reshape"), ("0.17", "rotary-copy"), ("0.21", "rotary-copy")],
)
def test_enforce_eager_keeps_the_residual_norm_in_place(version: str, rule: str) -> None:
    """The fused residual norm runs out of place only when inductor compiles: --enforce-eager
    sets -O0 (vLLM 0.12.0 config/vllm.py:596-602), so mode NONE and custom_ops "all" (:637-644)
    and RMSNorm's forward_cuda calls the in-place fused_add_rms_norm (0.12.0 layernorm.py:
    194-205); from 0.21 the in-place vllm_c kernel comes first without inductor (0.21.0
    platforms/cuda.py:576; 0.34.0 kernels/vllm_c.py). The MLP stage is then 3 × hidden + 3 ×
    intermediate, 2 × 1280 × 2 bytes a patch less."""
    kwargs: dict[str, Any] = {"weights": "15.6GiB", "vllm_version": version, "max_model_len": 4096}
    compiled = _part(_estimate(QWEN25VL, **kwargs)).inputs
    eager = _part(_estimate(QWEN25VL, enforce_eager=True, **kwargs)).inputs
    assert compiled["encoder_forward_rule"] == f"{rule}-native-norm"
    assert eager["encoder_forward_rule"] == f"{rule}-model"
    patches = compiled["patches_per_item"] * compiled["items"]
    assert compiled["forward_bytes"] - eager["forward_bytes"] == patches * 2 * 1280 * 2


def test_a_length_sweep_whose_encoder_moves_is_refused() -> None:
    """Qwen2.5-VL's dummy video grows with max_model_len (vLLM 0.20.0 qwen2_vl.py
    get_num_frames_with_most_features), so one --gpu estimate cannot stand for a sweep over
    it: the lengths whose estimate differs are named. Gemma 3's 32 images (8192 // 256) do
    not move with the length, and its sweep is planned."""
    with pytest.raises(InputError, match="depends on max_model_len") as info:
        plan_run(
            PlanRequest(QWEN25VL, gpu="H100", weights="15.6GiB", sweep="max-model-len=4K..64K")
        )
    assert "4,096" in info.value.message and "--limit-mm-per-prompt" in (info.value.hint or "")
    run = plan_run(PlanRequest(GEMMA3, gpu="H100", weights="54GiB", sweep="max-model-len=4K..64K"))
    assert run.sweep is not None


def test_gemma3_where_vllm_counts_the_whole_placeholder() -> None:
    """vLLM 0.10.1 – 0.12 size an item by its contiguous placeholder (0.11.0 profiling.py:189
    get_mm_max_contiguous_tokens), and Gemma 3's is the processor's full_image_sequence:
    newlines and begin/end-of-image tokens around the 256 image tokens (gemma3_mm.py:192),
    a count the tokenizer decides: named, not estimated. 0.10.0 and 0.13 count the 256."""
    est = _estimate(vllm_version="0.11.0", max_num_seqs=256)
    assert _part(est).estimated is False
    assert any("whole placeholder" in note for note in est.notes)
    for version in ("0.10.0", "0.13"):
        got = _part(_estimate(vllm_version=version, max_num_seqs=256)).inputs
        assert got["tokens_per_item"] == 256 and got["items"] == 32


def test_siglip_vision_block_tally() -> None:
    """Gemma 3's SigLIP block (vision hidden 1152, intermediate 4304, 16 heads of 72), per
    patch in the model dtype. vLLM 0.34.0 model_executor/models/siglip.py: SiglipEncoder
    keeps the embeddings in hidden_states_pool (:534) through every layer; the layer
    (:480-495) holds its input (also _call_impl's args) and layer_norm1's new output;
    SiglipAttention.forward (:396-406): qkv_proj's output (3 per rank), chunk → views, and
    MMEncoderAttention (enabled() always True, :503; forward_cuda :777 → _forward_fa :553;
    view_qkv_to_4d :506 views) calls flash_attn_maxseqlen_wrapper (v1/attention/ops/
    vit_attn_wrappers.py:60 rearrange of views, :69 one new output, 1 per rank); FLASH_ATTN
    is the first ViT backend on CUDA (platforms/cuda.py:562-569; head 72 % 8 == 0,
    v1/attention/backends/flash_attn.py:425). out_proj's output is whole: 3 + 1 whole, 4 per
    rank. MLP (:446-450): the attention output (the residual) and layer_norm2's output whole
    beside fc1's output and nn.GELU(approximate="tanh") (activation.py:826) per rank: 4 ×
    1152 + 2 × 4304 units, over 5 × 1152 + 4304 at fc2. At tp 2 each row-parallel all-reduce
    (linear.py:1851) returns a new whole tensor: fc2's stage 6 × 1152 + 4304 / 2 leads."""
    from mmcli.kv.whatif.encoder import siglip_peak

    assert siglip_peak(1152, 4304, 1, 2) == (4 * 1152 + 2 * 4304) * 2
    assert siglip_peak(1152, 4304, 2, 2) == (6 * 1152 + 4304 // 2) * 2
    # A narrow MLP leaves the attention stage at its output projection: 4 + 4 units.
    assert siglip_peak(1152, 1152, 1, 2) == 8 * 1152 * 2


@pytest.mark.parametrize(
    ("version", "rule"),
    [("0.10.0", "envelope"), ("0.13", "siglip-qkv-views"), ("0.22", "siglip-qkv-views"),
     ("0.32", "siglip-qkv-views"), ("0.34", "siglip-qkv-views")],
)  # fmt: skip
def test_siglip_vision_stage_per_release(version: str, rule: str) -> None:
    """0.10.0's MultiHeadAttention (attention/layer.py:357) has no flash path (xformers or
    SDPA), left to the envelope. 0.13.0 attention/layer.py:481-527: views flattened into
    flash_attn_varlen_func (FLASH_ATTN on CUDA at cc >= 8, platforms/cuda.py
    get_vit_attn_backend), one new output; from 0.14 MMEncoderAttention as in 0.34 (the
    SigLIP forwards unchanged by AST from 0.11.1). 0.32.0 swaps nn.LayerNorm for vLLM's
    LayerNorm, whose forward_cuda is forward_native, F.layer_norm (0.34.0 layernorm.py:
    221-270): the same tensors. No custom op decides a kernel on CUDA, so --enforce-eager
    gives the same forward."""
    assert rules_for(version).siglip_vision_stage == rule
    if version == "0.10.0":
        return
    compiled = _part(_estimate(vllm_version=version)).inputs
    eager = _part(_estimate(vllm_version=version, enforce_eager=True)).inputs
    assert compiled["encoder_forward_rule"] == rule
    assert compiled["forward_bytes"] == eager["forward_bytes"]
    patches = compiled["patches_per_item"] * compiled["items"]
    per_patch = (compiled["forward_bytes"] - compiled["pixel_values_bytes"]) // patches
    assert per_patch == (4 * 1152 + 2 * 4304) * 2


def test_serve_flags_that_change_the_encoder_forward() -> None:
    """vLLM 0.20.0 config/multimodal.py: ``mm_encoder_tp_mode`` is "weights" (the tensor-
    parallel encoder the profile estimate counts) or "data" (each rank runs whole images), and
    ``mm_encoder_attn_backend`` picks the vision attention kernel: either changes the encoder
    forward, so with --gpu and an estimated encoder profile the line is refused. "weights",
    or a text-only model, plans as before."""
    line = f"vllm serve {QWEN25VL} --max-model-len 32768"
    fields: dict[str, Any] = {"gpu": "H100", "weights": "15.6GiB"}
    for flag in ("--mm-encoder-tp-mode data", "--mm-encoder-attn-backend TORCH_SDPA"):
        with pytest.raises(InputError, match="encoder's forward") as info:
            plan_run(PlanRequest(serve=f"{line} {flag}", **fields))
        assert flag.split()[0] in info.value.message
    assert plan_run(PlanRequest(serve=f"{line} --mm-encoder-tp-mode weights", **fields))
    text_line = f"vllm serve {TEXT_ONLY} --mm-encoder-tp-mode data"
    text = plan_run(PlanRequest(serve=text_line, **fields))
    assert text.estimate is not None
