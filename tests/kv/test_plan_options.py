"""What each kv-share plan option changes, end to end through the CLI's JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kv_plan import plan_json
from typer.testing import CliRunner

from mmcli.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
DEEPSEEK = ROOT / "tests" / "kv" / "configs" / "deepseek-ai--DeepSeek-R1.as-DeepSeek-V3.json"
TOY = ROOT / "samples" / "kv" / "toy.toml"
CLA = ROOT / "samples" / "kv" / "hunyuan-cla2-like.json"


run = plan_json


def engine(doc: dict[str, Any], key: str) -> Any:
    return doc["memory"][key][doc["engine_side"]]


def test_mtp_adds_the_configs_prediction_layer() -> None:
    base = run(str(DEEPSEEK), "--max-model-len", "4096")
    mtp = run(str(DEEPSEEK), "--max-model-len", "4096", "--mtp")
    assert (len(base["layers"]), len(mtp["layers"])) == (61, 62)
    # One more MLA layer of 576 × 2 bytes per token.
    assert engine(mtp, "bytes_per_token") - engine(base, "bytes_per_token") == 1152


def test_fp8_ds_mla_stores_656_bytes_per_token() -> None:
    doc = run(str(DEEPSEEK), "--max-model-len", "4096", "--kv-cache-dtype", "fp8_ds_mla")
    assert engine(doc, "bytes_per_token") == 61 * 656
    assert engine(doc, "bytes_per_block") == 61 * 64 * 656  # 0.34's default block: 64


def test_mla_without_block_size_notes_the_backend_choice() -> None:
    doc = run(str(DEEPSEEK), "--max-model-len", "4096")
    assert [f["code"] for f in doc["findings"]] == ["backend-block-size"]
    assert run(str(DEEPSEEK), "--max-model-len", "4096", "--block-size", "64")["findings"] == []


def test_draft_layers_join_the_pool_with_the_target_geometry() -> None:
    doc = run(str(TOY), "--num-draft-layers", "2")
    drafters = [layer for layer in doc["layers"] if layer["name"].startswith("drafter.")]
    assert len(drafters) == 2
    assert {(d["attention"], d["num_kv_heads"], d["head_size"]) for d in drafters} == {
        (doc["layers"][0]["attention"], doc["layers"][0]["num_kv_heads"], 64)
    }


def test_num_gpu_blocks_override_sets_the_pool() -> None:
    doc = run(str(TOY), "--num-gpu-blocks-override", "4096")
    assert engine(doc, "num_blocks") == 4096


def test_newer_release_is_planned_with_the_newest_rules_and_says_so() -> None:
    doc = run(str(TOY), "--vllm-version", "0.99")
    assert doc["vllm_rules"] == {"release": "0.99", "mirrored": "0.34"}
    assert [f["code"] for f in doc["findings"]] == ["newer-release"]


def test_an_older_release_is_refused_by_name() -> None:
    """vLLM before 0.10 (V0, the default engine before 0.8, or V1 before the oldest row)
    sized its KV cache with other code: refused, naming the release, not planned as 0.10."""
    result = CliRunner().invoke(app, ["kv-share", "plan", str(TOY), "--vllm-version", "0.8.4"])
    assert result.exit_code == 2
    assert "--vllm-version 0.8.4: mmcli mirrors vLLM's V1 engine from 0.10 on" in result.stderr


def test_without_max_model_len_the_map_and_bytes_per_token_still_plan(tmp_path: Path) -> None:
    doc = json.loads((ROOT / "samples" / "kv" / "gemma3n-e2b-like.json").read_text())
    doc["text_config"].pop("max_position_embeddings", None)
    doc.pop("max_position_embeddings", None)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    # vLLM's _get_and_verify_max_len: with none of the length keys it assumes 2048 tokens,
    # or takes --max-model-len as given (no maximum to check it against).
    out = run(str(path), "--memory", "20GiB")
    assert out["max_model_len"] == 2048
    assert engine(out, "bytes_per_token") == 20 * 2 * 2 * 256 * 2
    assert engine(out, "max_concurrency") is not None
    assert "no-max-model-len" in [f["code"] for f in out["findings"]]
    assert run(str(path), "--memory", "20GiB", "--max-model-len", "1000000")["max_model_len"] == (
        1_000_000
    )
    # A layer config without a length still plans only the per-token figures.
    layer_config = tmp_path / "layers.toml"
    layer_config.write_text(
        'name = "x"\n[defaults]\nnum_kv_heads = 2\nhead_size = 64\ndtype = "bfloat16"\n'
        '[[layers]]\nname = "l0"\n'
    )
    out = run(str(layer_config), "--memory", "20GiB")
    assert out["max_model_len"] is None and engine(out, "max_concurrency") is None


def test_cla_is_a_what_if_the_engine_does_not_run() -> None:
    doc = run(str(CLA), "--memory", "20GiB")
    assert doc["engine_side"] == "without_sharing"
    assert "cla-not-shared-by-engine" in [f["code"] for f in doc["findings"]]
    result = CliRunner().invoke(app, ["kv-share", "plan", str(CLA), "--memory", "20GiB"])
    assert "engine (no sharing)" in result.stdout and "what-if sharing" in result.stdout


def test_hunyuan_cla_does_not_start_before_0_29() -> None:
    """vLLM <= 0.28 builds Hunyuan's CLA layers as cross-attention (hunyuan_v1.py
    ``HunYuanCrossAttention``) and ``Attention.get_kv_cache_spec`` asserts a decoder layer;
    from 0.29 ``registry.py`` maps HunYuanDenseV1ForCausalLM to the Transformers backend."""
    for release in ("0.10", "0.20", "0.28"):
        result = CliRunner().invoke(
            app, ["kv-share", "plan", str(CLA), "--memory", "20GiB", "--vllm-version", release]
        )
        assert result.exit_code == 2, result.stdout
        error, hint = result.stderr.splitlines()
        assert f"vLLM {release} does not start Hunyuan with cross-layer attention" in error
        assert "--vllm-version 0.29" in hint
    doc = run(str(CLA), "--memory", "20GiB", "--vllm-version", "0.29")
    assert doc["engine_side"] == "without_sharing"


def test_strict_makes_full_sliding_sharing_an_error(tmp_path: Path) -> None:
    config = {
        "name": "mixed",
        "max_model_len": 1024,
        "defaults": {"num_kv_heads": 2, "head_size": 64, "dtype": "bfloat16"},
        "layers": [
            {"name": "a"},
            {"name": "b", "attention": "sliding", "sliding_window": 256, "kv_sharing_target": "a"},
        ],
    }
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    loose = run(str(path))
    assert [(f["code"], f["severity"]) for f in loose["findings"]] == [
        ("attention-kind-mismatch", "warning")
    ]
    strict = run(str(path), "--strict", code=1)
    assert [(f["code"], f["severity"]) for f in strict["findings"]] == [
        ("attention-kind-mismatch", "error")
    ]


def test_max_num_seqs_beyond_the_state_pool_is_reported() -> None:
    qwen = str(ROOT / "tests" / "kv" / "configs" / "Qwen--Qwen3-Next-80B-A3B-Thinking.json")
    base = [qwen, "--memory", "20GiB", "--max-model-len", "32768"]
    base += ["--max-num-batched-tokens", "2048", "--block-size", "16"]
    # 1,606 blocks per group (tests/kv/test_models.py), 2 states per request: 803 requests.
    fits = run(*base, "--max-num-seqs", "803")
    assert "state-pool-too-small" not in [f["code"] for f in fits["findings"]]
    over = run(*base, "--max-num-seqs", "804")
    found = [f for f in over["findings"] if f["code"] == "state-pool-too-small"]
    assert found and "at most 803 requests" in found[0]["message"]
    # An attention-only model has no state pool to check.
    assert run(str(TOY), "--memory", "1GiB", "--max-num-seqs", "100000")["findings"] == []
