"""max_model_len as vLLM derives and checks it (``_get_and_verify_max_len``).

Facts from the released wheels' ``vllm/config/model.py`` (``vllm/config.py`` in 0.10):
the smallest of the length keys, ``model_max_length`` replacing it; a RoPE factor scales it
unless the type is ``su``/``longrope``/``llama3`` (0.10-0.29: YaRN starts from its
``original_max_position_embeddings``, 0.29.0 lines 2452-2458; from 0.30.0 the YaRN variants
are excluded too: ``max_position_embeddings`` is already the scaled length); never for Gemma 3;
no key: 2048 assumed, or ``--max-model-len`` taken as given; LongRoPE defaults to
``original_max_position_embeddings``; a longer request than the maximum (and than
``model_max_length``) raises unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv.engine.max_len import derive_max_len, model_max_len
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.releases import rules_for

BASE: dict[str, Any] = {
    "model_type": "qwen3",
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "hidden_size": 1024,
    "torch_dtype": "bfloat16",
}
#: Qwen3-8B's published config with the YaRN block its model card tells users to add.
QWEN3_YARN = {
    **BASE,
    "max_position_embeddings": 40960,
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
}


def limit(doc: dict[str, Any], release: str) -> tuple[float, int]:
    config = parse_hf_config(doc, default_name="m", where="config.json")
    assert config.context is not None
    found = derive_max_len(config.context, rules_for(release))
    return found.derived, found.default


def test_yarn_scaled_its_original_length_until_0_29_and_not_from_0_30() -> None:
    assert limit(QWEN3_YARN, "0.29") == (131072, 131072)
    assert limit(QWEN3_YARN, "0.10") == (131072, 131072)
    assert limit(QWEN3_YARN, "0.30") == (40960, 40960)
    assert limit(QWEN3_YARN, "0.34") == (40960, 40960)


def test_the_type_key_and_nested_parameters_are_read() -> None:
    old_style = {
        **BASE,
        "max_position_embeddings": 4096,
        "rope_scaling": {"type": "dynamic", "factor": 2},
    }
    assert limit(old_style, "0.34") == (8192, 8192)
    nested = {
        **BASE,
        "max_position_embeddings": 4096,
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 4.0},
            "sliding_attention": {"rope_type": "default"},
        },
    }
    assert limit(nested, "0.34") == (16384, 16384)


@pytest.mark.parametrize("rope_type", ["llama3", "longrope", "su"])
def test_types_that_never_scale(rope_type: str) -> None:
    doc = {
        **BASE,
        "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": rope_type, "factor": 8.0},
    }
    assert limit(doc, "0.34")[0] == 131072


def test_longrope_defaults_to_the_original_length() -> None:
    # Phi-3-mini-128k: 131072 positions, LongRoPE from 4096.
    doc = {
        **BASE,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
    }
    assert limit(doc, "0.34") == (131072, 4096)


def test_gemma3_is_already_scaled() -> None:
    doc = {**BASE, "model_type": "gemma3_text", "max_position_embeddings": 131072}
    doc["rope_scaling"] = {"rope_type": "linear", "factor": 8.0}
    doc["sliding_window"] = 1024
    assert limit(doc, "0.34") == (131072, 131072)


def test_the_smallest_key_and_model_max_length() -> None:
    assert limit({**BASE, "max_position_embeddings": 4096, "seq_length": 2048}, "0.34")[0] == 2048
    doc = {**BASE, "max_position_embeddings": 4096, "model_max_length": 8192}
    assert limit(doc, "0.34")[0] == 8192


def test_a_longer_request_is_the_engines_refusal() -> None:
    config = parse_hf_config(QWEN3_YARN, default_name="qwen3-8b", where="config.json")
    rules = rules_for("0.34")
    assert model_max_len(config, rules, 40960, allow_long=False) == 40960
    with pytest.raises(InputError, match=r"40,960 \(max_position_embeddings=40,960\)") as info:
        model_max_len(config, rules, 131072, allow_long=False)
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in (info.value.hint or "")
    assert model_max_len(config, rules, 131072, allow_long=True) == 131072
    assert model_max_len(config, rules_for("0.29"), 131072, allow_long=False) == 131072


def test_without_a_length_key() -> None:
    config = parse_hf_config(BASE, default_name="m", where="config.json")
    assert model_max_len(config, rules_for("0.34"), None, allow_long=False) == 2048
    assert model_max_len(config, rules_for("0.34"), 10**6, allow_long=False) == 10**6
    assert "no-max-model-len" in [f.code for f in config.findings]


@pytest.mark.parametrize(
    ("rope", "message"),
    [
        ({"rope_type": "linear", "factor": "x"}, "factor must be a positive number"),
        ({"rope_type": "linear", "factor": float("nan")}, "factor must be a positive number"),
        ({"rope_type": 3}, "rope_type must be a string"),
        ([1, 2], "rope_scaling must be an object"),
    ],
)
def test_bad_rope_values_are_refused(rope: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_hf_config({**BASE, "rope_scaling": rope}, default_name="m", where="config.json")


def test_yarn_without_its_original_length_under_0_29() -> None:
    doc = {
        **BASE,
        "max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": "yarn", "factor": 2.0},
    }
    with pytest.raises(InputError, match="original_max_position_embeddings"):
        limit(doc, "0.29")
    assert limit(doc, "0.30") == (4096, 4096)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["kv-share", "plan", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_the_command(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN3_YARN))
    code, out, _ = run(str(path), "--memory", "8GiB", "--format", "json")
    assert code == 0 and json.loads(out)["max_model_len"] == 40960
    code, out, _ = run(str(path), "--memory", "8GiB", "--format", "json", "--vllm-version", "0.29")
    assert code == 0 and json.loads(out)["max_model_len"] == 131072
    code, out, err = run(str(path), "--memory", "8GiB", "--max-model-len", "131072")
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: --max-model-len 131,072 is longer")
    assert lines[1].startswith("hint: ")
    code, out, _ = run(
        str(path), "--memory", "8GiB", "--max-model-len", "131072", "--allow-long-max-model-len"
    )
    assert code == 0
    code, out, err = run(str(path), "--memory", "8GiB", "--sweep", "max-model-len=4K..128K")
    assert code == 2 and err.startswith("error: --sweep max-model-len up to 131,072 is longer")
