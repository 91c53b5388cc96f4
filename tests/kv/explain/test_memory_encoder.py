"""explain's memory section for a multimodal model: the log's encoder-cache line (the dummy
batch vLLM profiled) beside mmcli's derived batch, and the encoder profile's estimate in the
KV figure. Logs: tests/kv/gpu_logs/ (PROVENANCE.md). The model folder: Qwen2.5-VL-7B-Instruct's
config and processor (tests/kv/whatif/models/PROVENANCE.md); the dummy batch depends only on
the processor's max_pixels and the patch / merge sizes, which Qwen2.5-VL-32B shares."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.kv.explain.vllm_log import parse_vllm_log, read_vllm_log
from mmcli.kv.inputs.layer_config import load_document
from mmcli.kv.memory_profile import compare_memory
from mmcli.kv.releases import rules_for

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "tests/kv/gpu_logs"
FOLDER = ROOT / "tests/kv/whatif/models/qwen2_5_vl_7b"


def beside(name: str) -> Path:
    """The model folder's file ``name`` (how a model source answers for its side files)."""
    return FOLDER / name


runner = CliRunner()


def test_the_encoder_lines_are_read() -> None:
    """vLLM 0.11.0 v1/worker/gpu_model_runner.py profile_run: "Encoder cache will be
    initialized with a budget of %s tokens, and profiled with %s %s items of the maximum
    feature size."; the T4 log's non-default args carry limit_mm_per_prompt as a dict."""
    log = read_vllm_log(LOGS / "v1-mm-t4-qwen3vlemb2b.log")
    p = log.profile
    assert (p.encoder_budget_tokens, p.encoder_items, p.encoder_modality) == (8192, 6, "image")
    assert log.dict_args["limit_mm_per_prompt"] == {"image": 1, "video": 0}
    # 0.20.0 gpu_model_runner.py:5793: the line --skip-mm-profiling prints instead.
    skipped = parse_vllm_log(
        "INFO [gpu_model_runner.py:5793] Skipping memory profiling for multimodal encoder "
        "and encoder cache.\n"
    )
    assert skipped.profile.encoder_skipped is True


def test_the_logged_batch_beside_mmclis() -> None:
    """Qwen2.5-VL-32B on vLLM 0.11.0 (max_model_len 15000, budget 2048): the log's 16,384
    tokens and one image are the batch mmcli derives (the one-frame video ties the image;
    before 0.17 the first listed, image, is profiled). Under 0.20's rules the video wins
    the tie, and the note says the two differ."""
    log = read_vllm_log(LOGS / "v1-mm-a100-qwen25vl32b.log")
    _, doc = load_document(FOLDER / "config.json")
    got = compare_memory(log, doc, rules_for("0.11.0"), "A100-80GB", beside)
    assert got is not None
    row = {r.component: r for r in got.rows}["encoder profile"]
    assert row.logged_gib is None and row.estimate_gib is not None and row.estimate_gib > 0
    (note,) = [n for n in got.notes if "encoder cache line" in n]
    assert "16,384 tokens, 1 image items (the same)" in note
    later = compare_memory(log, doc, rules_for("0.20"), "A100-80GB", beside)
    assert later is not None
    assert any("1 video items (they differ" in n for n in later.notes)


def test_the_kv_estimate_takes_the_encoder_off() -> None:
    """KV = total × utilization − weights − activation − encoder − non-torch − graphs."""
    log = read_vllm_log(LOGS / "v1-mm-a100-qwen25vl32b.log")
    _, doc = load_document(FOLDER / "config.json")
    with_encoder = compare_memory(log, doc, rules_for("0.11.0"), "A100-80GB", beside)
    without = compare_memory(log, doc, rules_for("0.11.0"), "A100-80GB", None)
    assert with_encoder is not None and without is not None
    kv = {r.component: r for r in with_encoder.rows}["KV cache"].estimate_gib
    kv_bare = {r.component: r for r in without.rows}["KV cache"].estimate_gib
    encoder = {r.component: r for r in with_encoder.rows}["encoder profile"].estimate_gib
    assert kv is not None and kv_bare is not None and encoder is not None
    # Without the processor file the encoder is not estimated (nothing taken off).
    assert {r.component: r for r in without.rows}["encoder profile"].estimate_gib is None
    assert abs(kv_bare - kv - encoder) <= 0.011  # each figure rounded to 0.01 GiB


def test_the_cli_reads_the_folders_processor() -> None:
    """kv-share explain LOG --model FOLDER: the folder's preprocessor_config.json is read."""
    result = runner.invoke(
        app,
        [
            "kv-share",
            "explain",
            str(LOGS / "v1-mm-a100-qwen25vl32b.log"),
            "--model",
            str(FOLDER),
            "--gpu",
            "A100-80GB",
            "--vllm-version",
            "0.11.0",
            "--format",
            "json",
        ],
    )
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.output)
    rows = {r["component"]: r for r in doc["memory_profile"]["rows"]}
    assert rows["encoder profile"]["estimate_gib"] > 0
