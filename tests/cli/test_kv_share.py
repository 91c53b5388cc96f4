"""`mmcli kv-share plan` end to end: exit codes, the JSON document, bad input, samples."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "kv"
runner = CliRunner()


def name(i: int) -> str:
    return f"model.layers.{i}.self_attn.attn"


def plan(*args: str) -> Any:
    return runner.invoke(app, ["kv-share", "plan", *args], catch_exceptions=False)


def write(tmp_path: Path, doc: Any, filename: str = "config.json") -> str:
    path = tmp_path / filename
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return str(path)


def toy(**layer0: Any) -> dict[str, Any]:
    return {
        "name": "toy",
        "max_model_len": 1024,
        "defaults": {"num_kv_heads": 8, "head_size": 64, "dtype": "float16", "block_size": 16},
        "layers": [
            {"name": name(0), **layer0},
            {"name": name(1), "attention": "sliding", "sliding_window": 4096},
            {"name": name(2), "kv_sharing_target": name(0)},
        ],
    }


def test_json_document_has_the_spec_shape(tmp_path: Path) -> None:
    result = plan(write(tmp_path, toy()), "--format", "json", "--memory", "4MiB")
    # The newest rules count every group and hold a null block back: one request of 1024
    # tokens does not fit, so the engine would refuse to start (exit 1).
    assert result.exit_code == 1, result.stderr
    doc = json.loads(result.stdout)
    assert list(doc) == [
        "model",
        "source",
        "vllm_rules",
        "engine_side",
        "max_model_len",
        "layers",
        "groups",
        "findings",
        "memory",
        "pipeline",
        "aliasing_verified",
        "exit_code",
        "model_source",
    ]
    assert doc["model_source"]["kind"] == "file"
    assert doc["pipeline"] is None  # one stage
    assert doc["model"] == "toy" and doc["source"] == "mmcli"
    assert doc["vllm_rules"] == {"release": "0.34", "mirrored": "0.34"}
    assert (doc["engine_side"], doc["max_model_len"]) == ("with_sharing", 1024)
    assert doc["layers"][1] == {
        "index": 1,
        "name": name(1),
        "attention": "sliding",
        "num_kv_heads": 8,
        "head_size": 64,
        "dtype": "float16",
        "sliding_window": 4096,
        "attention_chunk_size": None,
        "state_bytes": None,
        "kv_sharing_target": None,
        "group": 1,
    }
    assert doc["layers"][2]["kv_sharing_target"] == name(0)
    assert doc["layers"][2]["group"] == 0
    assert doc["groups"] == [
        {"index": 0, "attention": "full", "layer_names": [name(0), name(2)]},
        {"index": 1, "attention": "sliding", "layer_names": [name(1)]},
    ]
    # 1 full + 1 sliding owner, page 32 KiB; buckets of 1 → 2 groups of 1. Without sharing:
    # 2 full + 1 sliding, 2 ≥ 1.5 × 1 → group size 1, 3 groups. 4 MiB // 32 KiB = 128 blocks.
    # Per request: full cdiv(1024, 16) = 64 per group; sliding cdiv(min(4095 + 2 × 8192,
    # 1024), 16) + 1 = 65. Tokens printed as int(concurrency × 1024).
    both = {"with_sharing": 32768, "without_sharing": 32768}
    assert doc["memory"] == {
        "page_size_bytes": 32768,
        "block_size": 16,
        "bytes_per_block": both,
        "bytes_per_token": {"with_sharing": 4096, "without_sharing": 6144},
        "state_bytes": {"with_sharing": 0, "without_sharing": 0},
        "blocks_per_request": {"with_sharing": 129, "without_sharing": 193},
        "engine_request_bytes": {"with_sharing": 129 * 32768, "without_sharing": 193 * 32768},
        "per_sequence_bytes": {"with_sharing": 4 * 2**20, "without_sharing": 6 * 2**20},
        "savings_fraction": pytest.approx(1 / 3),
        "num_blocks": {"with_sharing": 128, "without_sharing": 128},
        "max_tokens": {"with_sharing": 1016, "without_sharing": 679},
        "max_concurrency": {
            "with_sharing": pytest.approx(128 / 129),
            "without_sharing": pytest.approx(128 / 193),
        },
    }
    # Available: 4 MiB less the null block = 127 blocks; 2 × cdiv(L, 16) + 1 ≤ 127 → L ≤ 1008.
    assert doc["findings"] == [
        {
            "code": "memory-too-small",
            "severity": "error",
            "layer": None,
            "message": "to serve one request of max_model_len 1,024, 0.00 GiB of KV cache "
            "(4,227,072 B) is needed, more than the 0.00 GiB (4,161,536 B) available: the "
            "engine would refuse to start; the largest max_model_len that fits is 1,008",
            "hint": "lower --max-model-len, raise --memory or --tensor-parallel-size, or use "
            "--kv-dtype fp8",
        }
    ]
    assert doc["aliasing_verified"] is True
    assert doc["exit_code"] == 1


def test_without_memory_capacity_is_null(tmp_path: Path) -> None:
    result = plan(write(tmp_path, toy()), "--format", "json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 0
    for key in ("num_blocks", "max_tokens", "max_concurrency"):
        assert doc["memory"][key] is None


def test_broken_sample_exits_1_with_every_code() -> None:
    result = plan(str(SAMPLES / "broken-map.json"), "--format", "json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert sorted(f["code"] for f in doc["findings"]) == sorted(
        [
            "duplicate-layer",
            "self-target",
            "target-after",
            "chained-target",
            "attention-kind-mismatch",  # a warning: the engine accepts full ↔ sliding
            "spec-mismatch",
            "unknown-target",
        ]
    )
    assert doc["aliasing_verified"] is None
    assert doc["exit_code"] == 1
    assert doc["memory"]["bytes_per_token"] == {"with_sharing": None, "without_sharing": None}
    assert doc["groups"] == []


def test_table_report_for_samples() -> None:
    result = plan(str(SAMPLES / "gemma3n-e2b-like.json"), "--memory", "20GiB")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "0–3, 5–8, 10–13, 15–18" in out
    assert "sharing saves 33.3% of the KV cache per sequence" in out
    # Blocks of 64 tokens (0.34's default): 20 GiB / (20 × 16 KiB) and / (30 × 16 KiB).
    assert "40,960" in out and "27,306" in out
    assert "map valid: 0 errors, 0 warnings" in out
    result = plan(str(SAMPLES / "broken-map.json"))
    assert result.exit_code == 1
    assert "map invalid: 6 errors, 1 warning" in result.stdout
    assert "aliasing check: skipped, the map has errors" in result.stdout


def test_a_94_layer_model_folds_and_expands(tmp_path: Path) -> None:
    config = {
        "num_hidden_layers": 94,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "max_position_embeddings": 40960,
        "torch_dtype": "bfloat16",
        "use_cla": True,
        "cla_share_factor": 2,
    }
    path = write(tmp_path, config)
    folded = plan(path)
    assert folded.exit_code == 0
    assert "0, 2, …, 92 (47 layers)" in folded.stdout
    assert "1, 3, …, 93 (47 layers)" in folded.stdout
    expanded = plan(path, "--all-layers")
    assert expanded.exit_code == 0
    layer_table = expanded.stdout.split("KV-cache groups")[0]
    rows = re.findall(r"^│ (\d+) ", layer_table, flags=re.M)
    assert rows == [str(i) for i in range(94)]


def test_map_override_and_emit_map(tmp_path: Path) -> None:
    config = write(tmp_path, toy())
    mapping = write(tmp_path, {name(2): None, name(1): name(0), "7": "0"}, "map.json")
    out = tmp_path / "resolved.json"
    result = plan(config, "--map", mapping, "--emit-map", str(out), "--format", "json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert [(f["code"], f["severity"], f["layer"]) for f in doc["findings"]] == [
        ("unknown-layer", "error", "7"),
        # A sliding layer reading a full layer's cache: the engine accepts it.
        ("attention-kind-mismatch", "warning", name(1)),
    ]
    assert json.loads(out.read_text()) == {name(1): name(0)}
    assert "wrote 1 map entries" in result.stderr
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

    good = write(tmp_path, {"2": "0"}, "good.json")
    result = plan(config, "--map", good, "--emit-map", str(out))
    assert result.exit_code == 0
    assert json.loads(out.read_text()) == {name(2): name(0)}


def test_duplicate_map_keys_are_findings(tmp_path: Path) -> None:
    mapping = write(tmp_path, f'{{"{name(2)}": "{name(0)}", "{name(2)}": "{name(0)}"}}', "m.json")
    result = plan(write(tmp_path, toy()), "--map", mapping, "--format", "json")
    assert result.exit_code == 1
    codes = [f["code"] for f in json.loads(result.stdout)["findings"]]
    assert codes == ["duplicate-layer"]


def test_toml_config(tmp_path: Path) -> None:
    result = plan(str(SAMPLES / "toy.toml"), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["memory"]["bytes_per_token"] == {"with_sharing": 4096, "without_sharing": 8192}


def test_cla_disabled_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    config = {
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "max_position_embeddings": 2048,
        "torch_dtype": "float16",
        "cla_share_factor": 2,
    }
    result = plan(write(tmp_path, config), "--format", "json")
    assert result.exit_code == 0
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["code"] == "sharing-disabled"
    assert finding["message"] == (
        "cla_share_factor is 2 but use_cla is not set, so no layer shares its cache"
    )


def test_aliasing_check_on_cpu() -> None:
    result = plan(str(SAMPLES / "hunyuan-cla2-like.json"), "--device", "cpu", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["aliasing_verified"] is True


@pytest.mark.cuda
def test_aliasing_check_on_cuda() -> None:
    result = plan(str(SAMPLES / "gemma3n-e2b-like.json"), "--device", "cuda", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["aliasing_verified"] is True


def test_help_has_an_example() -> None:
    result = runner.invoke(app, ["kv-share", "plan", "--help"])
    assert result.exit_code == 0
    assert "mmcli kv-share plan samples/kv/gemma3n-e2b-like.json" in result.stdout


@pytest.mark.slow  # a fresh interpreter
def test_default_plan_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from mmcli.cli.main import main\n"
        "sys.argv = ['mmcli', 'kv-share', 'plan', 'samples/kv/gemma3n-e2b-like.json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    env = {**os.environ, "COLUMNS": "100"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr


# --- bad input: exit 2, one error line and one hint, no traceback --------------------------

HF_BASE = {
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "max_position_embeddings": 2048,
    "torch_dtype": "float16",
}

BAD_CONFIGS: list[tuple[str, Any, str]] = [
    ("json-syntax", '{"layers": [', "invalid JSON: Expecting value at line 1, column 13"),
    ("not-object", "[1, 2]", "expected an object at the top level, got list"),
    ("neither", {"name": "x"}, "neither an mmcli layer config"),
    (
        "string-heads",
        toy(num_kv_heads="8"),
        f'layers[0] ({name(0)}).num_kv_heads must be a positive integer, got str "8"',
    ),
    ("zero-head", toy(head_size=0), "head_size must be a positive integer, got 0"),
    ("negative-block", toy(block_size=-16), "block_size must be a positive integer, got -16"),
    ("unknown-dtype", toy(dtype="float12"), "dtype: unknown dtype 'float12'"),
    ("unknown-key", toy(heads=8), "layers[0]: unknown key 'heads'"),
    ("unknown-attention", toy(attention="ring"), "unknown attention type 'ring'"),
    ("layers-not-list", {"layers": {"a": 1}}, "layers must be a non-empty list, got dict"),
    (
        "window-on-full",
        toy(sliding_window=512),
        f"layers[0] ({name(0)}) sets sliding_window but its attention is full",
    ),
    (
        "hf-bool-heads",
        {**HF_BASE, "num_key_value_heads": True},
        "num_key_value_heads must be an integer, got bool true",
    ),
    ("hf-zero-layers", {**HF_BASE, "num_hidden_layers": 0}, "must be at least 1, got 0"),
    ("hf-dtype", {**HF_BASE, "torch_dtype": "int3"}, "unknown dtype 'int3'"),
    (
        "hf-unknown-type",
        {**HF_BASE, "layer_types": ["full_attention", "ring_attention"]},
        "layer_types[1] is 'ring_attention', a layer type mmcli does not know",
    ),
    (
        "hf-types-length",
        {**HF_BASE, "layer_types": ["full_attention"]},
        "layer_types has 1 entries but num_hidden_layers is 2",
    ),
    ("hf-mla", {**HF_BASE, "kv_lora_rank": 512}, "multi-head latent attention"),
    ("hf-chunked", {**HF_BASE, "attention_chunk_size": 8192}, "attention_chunk_size"),
    (
        "hf-shared-all",
        {**HF_BASE, "num_kv_shared_layers": 2},
        "num_kv_shared_layers is 2 but the model has 2 layers",
    ),
    (
        "hf-cla-no-factor",
        {**HF_BASE, "use_cla": True},
        "use_cla is true but cla_share_factor is not set",
    ),
    (
        "hf-cla-string",
        {**HF_BASE, "use_cla": "yes"},
        'use_cla must be true or false, got str "yes"',
    ),
    (
        "hf-text-config",
        {"text_config": {**HF_BASE, "head_dim": "64"}},
        'head_dim must be an integer, got str "64"',
    ),
]


@pytest.mark.parametrize(("case", "doc", "message"), BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_configs_exit_2(tmp_path: Path, case: str, doc: Any, message: str) -> None:
    result = plan(write(tmp_path, doc))
    assert_bad_input(result, message)


def assert_bad_input(result: Any, message: str) -> None:
    assert result.exit_code == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert message in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_toml_syntax_error(tmp_path: Path) -> None:
    result = plan(write(tmp_path, "name = \n", "c.toml"))
    assert_bad_input(result, "invalid TOML: Invalid value (at line 1, column 8)")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--memory", "lots"], "cannot read 'lots' as a memory size"),
        (["--memory", "0"], "memory size '0' is zero bytes"),
        (["--kv-dtype", "int4"], "--kv-dtype: unknown dtype 'int4'"),
        (["--tensor-parallel-size", "3"], "8 KV heads cannot be split evenly across"),
        (["--tensor-parallel-size", "0"], "--tensor-parallel-size must be a positive integer"),
        (["--block-size", "0"], "--block-size must be a positive integer, got 0"),
        (["--max-model-len", "-5"], "--max-model-len must be a positive integer or auto, got '-5'"),
        (["--device", "tpu:0"], "unknown device 'tpu:0'"),
    ],
)
def test_bad_options_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    assert_bad_input(plan(write(tmp_path, toy()), *args), message)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('["a", "b"]', "the map must be a JSON object {layer: target}, got array"),
        ('"x"', "the map must be a JSON object {layer: target}, got str"),
        ('{"a": 3}', "the target of a must be a layer name or null, got int 3"),
        ('{"a": {"b": "c"}}', "the target of a must be a layer name or null, got object"),
        ("{", "invalid JSON: Expecting property name enclosed in double quotes"),
    ],
)
def test_bad_maps_exit_2(tmp_path: Path, content: str, message: str) -> None:
    mapping = write(tmp_path, content, "map.json")
    assert_bad_input(plan(write(tmp_path, toy()), "--map", mapping), message)


def test_binary_config_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"\xff\xfe\x00binary")
    assert_bad_input(plan(str(path)), "not a text file (byte 0 is not UTF-8)")


def test_missing_file_exit_2(tmp_path: Path) -> None:
    assert_bad_input(plan(str(tmp_path / "nope.json")), "cannot read")
