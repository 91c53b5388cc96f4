"""DeepSeek sparse attention (DSA): DeepSeek V3.2 and GLM-5 planned as vLLM runs them.

Every number comes from the engine's source (vLLM wheels 0.10.2–0.34.0 and 0.11.1, 0.11.2,
0.15.1), cited beside it:

* The indexer cache: ``DeepseekV32IndexerCache.get_kv_cache_spec`` is an ``MLAAttentionSpec``
  of one head, ``head_size = index_head_dim + index_head_dim // 128 * 4`` (``Indexer.__init__``,
  ``quant_block_size = 128``), ``dtype = torch.uint8``: 132 bytes per token for
  ``index_head_dim`` 128, on every TP rank (model_executor/models/deepseek_v2.py, 0.11.0–0.34.0;
  the 0.29+ model in vllm/models/deepseek_v32/attention.py builds the same cache). Its layer is
  ``{prefix}.indexer.k_cache``, built before the layer's ``{prefix}.attn``.
* The MLA row: ``(kv_lora_rank + qk_rope_head_dim) × 2`` = 1152 bytes in bf16, 656 as
  ``fp8_ds_mla`` (``MLAAttentionSpec.page_size_bytes``, v1/kv_cache_interface.py 0.11.0;
  ``get_fp8_ds_mla_row_bytes``, v1/attention/backend.py 0.34.0).
* One group: the MLA and indexer specs are full-attention specs of one block size, so
  ``UniformTypeKVCacheSpecs`` takes them all and its page is the sum of the layers' pages
  (v1/kv_cache_interface.py 0.11.0; ``num_blocks = available // page_size_bytes``,
  v1/core/kv_cache_utils.py ``get_kv_cache_config_from_groups`` 0.11.0; 0.34.0 sums each
  layer's page in the default LBNHC layout, v1/core/kv_cache_planning.py
  ``_get_kv_cache_bytes_per_block``, the sparse backends' stride alignments dividing a 64-token
  page).
* Block 64: platforms/cuda.py forces it for the sparse backend (0.11.0–0.17.0); from 0.18.0
  it is the backends' preferred size (``get_supported_kernel_block_sizes`` = [64] for
  FLASHMLA_SPARSE and ``DeepseekV32IndexerBackend``).
* ``--kv-cache-dtype``: model_executor/models/config.py ``DeepseekV32ForCausalLM``:
  ``auto`` or fp8 → ``fp8_ds_mla`` in 0.11.0, fp8 only in 0.11.1–0.19.0, neither in 0.20.0;
  model_executor/layers/attention/mla_attention.py turns fp8 into ``fp8_ds_mla`` under
  FLASHMLA_SPARSE from 0.18.0.
* Registry (model_executor/models/registry.py): ``DeepseekV32ForCausalLM`` from 0.11.0 (not in
  0.10.2), ``GlmMoeDsaForCausalLM`` from 0.16.0 (not in 0.15.0 or 0.15.1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kv_plan import cli_plan_json, plan_json
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang
from mmcli.kv.trtllm import TrtllmOptions, plan_trtllm

CONFIGS = Path(__file__).parent / "configs"
#: DeepSeek V3.2's published config.json, whose architecture DeepSeek-V3.2-Exp shares
#: (provenance: configs/PROVENANCE.md; written out here, never fetched).
V32 = CONFIGS / "deepseek-ai--DeepSeek-V3.2.as-DeepSeek-V3.2-Exp.json"
LAYERS = 61
INDEXER = 128 + 128 // 128 * 4  # 132 B per token per layer, uint8
MLA_BF16 = (512 + 64) * 2  # 1152
DS_MLA = 656
BF16_TOKEN = LAYERS * (MLA_BF16 + INDEXER)  # 78,324
FP8_TOKEN = LAYERS * (DS_MLA + INDEXER)  # 48,068
GiB = 2**30


def tiny(model_type: str = "deepseek_v32", **overrides: Any) -> dict[str, Any]:
    """A DeepSeek-V3.2-shaped config of 4 layers (the published geometry, fewer layers)."""
    arch = {"deepseek_v32": "DeepseekV32ForCausalLM", "glm_moe_dsa": "GlmMoeDsaForCausalLM"}
    doc = {
        "architectures": [arch.get(model_type, "DeepseekV3ForCausalLM")],
        "model_type": model_type,
        "num_hidden_layers": 4,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "index_topk": 2048,
        "index_head_dim": 128,
        "index_n_heads": 64,
        "max_position_embeddings": 163840,
        "torch_dtype": "bfloat16",
    }
    doc.update(overrides)
    return {k: v for k, v in doc.items() if v is not None}


def write(tmp_path: Path, doc: dict[str, Any], name: str = "config.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def memory(doc: dict[str, Any], key: str) -> Any:
    return doc["memory"][key][doc["engine_side"]]


def refused(*args: str) -> str:
    """The two stderr lines of a refused plan (exit 2)."""
    result = CliRunner().invoke(app, ["kv-share", "plan", *args], catch_exceptions=False)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout == ""
    return result.stderr


# --- the indexer's layers -------------------------------------------------------------------


def test_every_decoder_layer_gets_an_indexer_cache_before_its_mla_cache() -> None:
    config = parse_hf_config(tiny(), default_name="m", where="config.json")
    assert [(lay.name, lay.spec.attention if lay.spec else None) for lay in config.layers] == [
        pair
        for i in range(4)
        for pair in (
            (f"model.layers.{i}.self_attn.indexer.k_cache", "indexer"),
            (f"model.layers.{i}.self_attn.attn", "mla"),
        )
    ]
    indexer, mla = config.layers[0].spec, config.layers[1].spec
    assert (indexer.num_kv_heads, indexer.head_size, indexer.dtype) == (1, 132, "uint8")
    assert indexer.bytes_per_token == INDEXER
    assert (mla.num_kv_heads, mla.head_size, mla.bytes_per_token) == (1, 576, MLA_BF16)
    # Two layers per decoder index: pipeline stages split them together.
    assert config.decoder_index == [0, 0, 1, 1, 2, 2, 3, 3]
    assert config.sparse_attention is not None
    assert config.sparse_attention.architecture == "DeepseekV32ForCausalLM"


@pytest.mark.parametrize(("head_dim", "size"), [(128, 132), (256, 264), (64, 64)])
def test_indexer_head_is_fp8_keys_plus_a_scale_per_128(head_dim: int, size: int) -> None:
    # head_dim + head_dim // 128 * 4 (Indexer.__init__, deepseek_v2.py 0.11.0-0.34.0)
    config = parse_hf_config(tiny(index_head_dim=head_dim), default_name="m", where="c")
    assert config.layers[0].spec.head_size == size


def test_layer_types_of_sparse_checkpoints_are_mla_layers() -> None:
    # GLM-5.2 checkpoints write layer_types "deepseek_sparse_attention", which vLLM counts as
    # full attention (_ATTENTION_LAYER_TYPES, config/model.py 0.34.0).
    doc = tiny("glm_moe_dsa", layer_types=["deepseek_sparse_attention"] * 4)
    config = parse_hf_config(doc, default_name="m", where="c")
    assert [lay.spec.attention for lay in config.layers if lay.spec] == ["indexer", "mla"] * 4


def test_mtp_layers_get_their_indexer_too(tmp_path: Path) -> None:
    # DeepSeekMultiTokenPredictorLayer builds a DeepseekV2DecoderLayer (deepseek_mtp.py).
    path = write(tmp_path, tiny(num_nextn_predict_layers=1))
    doc = plan_json(path, "--max-model-len", "4096", "--mtp")
    assert [layer["name"] for layer in doc["layers"][-2:]] == [
        "model.layers.4.self_attn.indexer.k_cache",
        "model.layers.4.self_attn.attn",
    ]
    assert memory(doc, "bytes_per_token") == 5 * (MLA_BF16 + INDEXER)


# --- the published config, release by release ------------------------------------------------


@pytest.mark.parametrize("release", ["0.11", "0.11.1", "0.12", "0.17", "0.18", "0.20", "0.34"])
def test_v32_exp_in_bf16_takes_78324_bytes_per_token(release: str) -> None:
    doc = plan_json(str(V32), "--vllm-version", release, "--max-model-len", "32768")
    assert memory(doc, "bytes_per_token") == BF16_TOKEN == 78_324
    assert doc["memory"]["block_size"] == 64
    # One group of all 122 layers, a block spans one page of each: 61 × 64 × (1152 + 132).
    assert len(doc["groups"]) == 1 and len(doc["groups"][0]["layer_names"]) == 2 * LAYERS
    assert doc["groups"][0]["attention"] == "indexer+mla"
    assert memory(doc, "bytes_per_block") == 64 * BF16_TOKEN == 5_012_736
    assert memory(doc, "blocks_per_request") == 32768 // 64
    kinds = [layer["attention"] for layer in doc["layers"]]
    assert kinds.count("indexer") == kinds.count("mla") == LAYERS
    assert doc["findings"] == []


def test_v32_exp_fp8_ds_mla_takes_48068_bytes_per_token() -> None:
    for release in ("0.11.0", "0.20", "0.34"):
        doc = plan_json(
            str(V32), "--vllm-version", release, "--max-model-len", "32768",
            "--kv-cache-dtype", "fp8_ds_mla",
        )  # fmt: skip
        assert memory(doc, "bytes_per_token") == FP8_TOKEN == 48_068
        assert memory(doc, "bytes_per_block") == 64 * FP8_TOKEN == 3_076_352
        indexer = doc["layers"][0]
        assert (indexer["attention"], indexer["head_size"], indexer["dtype"]) == (
            "indexer",
            132,
            "uint8",
        )


def test_auto_is_fp8_ds_mla_in_0_11_0_only() -> None:
    # 0.11.0: `if cache_dtype == "auto" or cache_dtype.startswith("fp8")`; 0.11.1 and 0.11.2:
    # `if cache_dtype.startswith("fp8")` (model_executor/models/config.py).
    doc = plan_json(str(V32), "--vllm-version", "0.11.0", "--max-model-len", "32768")
    assert memory(doc, "bytes_per_token") == FP8_TOKEN
    assert [f["code"] for f in doc["findings"]] == ["dsa-cache-dtype"]
    for release in ("0.11.1", "0.11.2", "0.11", "0.12"):
        doc = plan_json(str(V32), "--vllm-version", release, "--max-model-len", "32768")
        assert memory(doc, "bytes_per_token") == BF16_TOKEN, release
    # bfloat16 is turned into auto after the fp8 test, so it stays bf16 in 0.11.0 too.
    doc = plan_json(
        str(V32), "--vllm-version", "0.11.0", "--max-model-len", "32768",
        "--kv-cache-dtype", "bfloat16",
    )  # fmt: skip
    assert memory(doc, "bytes_per_token") == BF16_TOKEN and doc["findings"] == []


@pytest.mark.parametrize("release", ["0.11.1", "0.17", "0.19", "0.20", "0.34"])
def test_fp8_is_stored_as_fp8_ds_mla(release: str) -> None:
    # The hook (0.11-0.19) and FLASHMLA_SPARSE (0.18+) both make it fp8_ds_mla.
    doc = plan_json(
        str(V32), "--vllm-version", release, "--max-model-len", "32768", "--kv-cache-dtype", "fp8"
    )
    assert memory(doc, "bytes_per_token") == FP8_TOKEN
    (note,) = doc["findings"]
    assert note["code"] == "dsa-cache-dtype" and "fp8_ds_mla" in note["message"]
    assert ("Blackwell" in note["message"]) == (release in ("0.20", "0.34"))


def test_tensor_parallel_replicates_both_caches() -> None:
    doc = plan_json(str(V32), "-tp", "8", "--max-model-len", "32768")
    assert memory(doc, "bytes_per_token") == BF16_TOKEN


def test_blocks_from_memory() -> None:
    doc = plan_json(str(V32), "--vllm-version", "0.20", "--max-model-len", "32768",
                    "--memory", "40GiB")  # fmt: skip
    assert memory(doc, "num_blocks") == 40 * GiB // (64 * BF16_TOKEN) == 8568


def test_the_layer_table_shows_the_indexer_rows() -> None:
    result = CliRunner(env={"COLUMNS": "160"}).invoke(
        app, ["kv-share", "plan", str(V32), "--max-model-len", "32768"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if "(61 layers)" in line]
    assert len(rows) == 2
    assert "model.layers.0.self_attn.indexer.k_cache" in rows[0] and "indexer" in rows[0]
    assert "1×132" in rows[0]
    assert "model.layers.0.self_attn.attn" in rows[1] and "1×576" in rows[1]
    assert "│ 0     │ indexer+mla │ 1×576     │ bfloat16 │ 122 own │" in result.stdout


# --- block size -----------------------------------------------------------------------------


@pytest.mark.parametrize("release", ["0.11", "0.14", "0.17"])
def test_block_size_is_forced_to_64_before_0_18(release: str) -> None:
    doc = plan_json(str(V32), "--vllm-version", release, "--max-model-len", "32768",
                    "--block-size", "16")  # fmt: skip
    assert doc["memory"]["block_size"] == 64
    assert [(f["code"], f["severity"]) for f in doc["findings"]] == [("dsa-block-size", "info")]


def test_a_given_block_size_is_kept_from_0_18() -> None:
    doc = plan_json(str(V32), "--vllm-version", "0.20", "--max-model-len", "32768",
                    "--block-size", "128")  # fmt: skip
    assert doc["memory"]["block_size"] == 128 and doc["findings"] == []
    assert memory(doc, "bytes_per_block") == 128 * BF16_TOKEN
    doc = plan_json(str(V32), "--vllm-version", "0.34", "--max-model-len", "32768",
                    "--block-size", "16")  # fmt: skip
    assert doc["memory"]["block_size"] == 16
    assert [(f["code"], f["severity"]) for f in doc["findings"]] == [("dsa-block-size", "warning")]


# --- releases that do not serve it ----------------------------------------------------------


def test_v32_before_0_11_is_refused_naming_the_first_release() -> None:
    err = refused(str(V32), "--vllm-version", "0.10.2", "--max-model-len", "32768")
    assert err == (
        "error: deepseek_v32: vLLM 0.10.2 does not serve DeepseekV32ForCausalLM (DeepSeek V3.2) "
        "yet (the first release that does is 0.11.0; the engine refuses to start)\n"
        "hint: plan with --vllm-version 0.11 or newer\n"
    )


def test_glm5_is_planned_from_0_16(tmp_path: Path) -> None:
    path = write(tmp_path, tiny("glm_moe_dsa"))
    err = refused(path, "--vllm-version", "0.15", "--max-model-len", "4096")
    assert "does not serve GlmMoeDsaForCausalLM (GLM-5) yet (the first release that does is " in (
        err
    )
    assert "is 0.16.0; the engine refuses to start)" in err
    for release in ("0.16", "0.20", "0.31", "0.32", "0.34"):
        doc = plan_json(path, "--vllm-version", release, "--max-model-len", "4096")
        assert memory(doc, "bytes_per_token") == 4 * (MLA_BF16 + INDEXER)
        assert doc["memory"]["block_size"] == 64
        # From 0.32 GlmMoeDsaForCausalLM's hook makes auto fp8_e4m3 on SM10x (Blackwell):
        # the plan is Hopper's and says so.
        notes = [(f["code"], "Blackwell" in f["message"]) for f in doc["findings"]]
        assert notes == ([("dsa-cache-dtype", True)] if release >= "0.32" else []), release


def test_glm5_fp8_before_0_18_is_refused(tmp_path: Path) -> None:
    # No config hook for GlmMoeDsaForCausalLM, and FLASHMLA_SPARSE's kv dtypes are auto,
    # bfloat16 and fp8_ds_mla in 0.16-0.17 (the fp8 alias comes in 0.18).
    path = write(tmp_path, tiny("glm_moe_dsa"))
    err = refused(path, "--vllm-version", "0.17", "--kv-cache-dtype", "fp8")
    assert err.startswith("error: --kv-cache-dtype fp8: vLLM 0.17 has no fp8 rule for GLM-5")
    doc = plan_json(path, "--vllm-version", "0.18", "--kv-cache-dtype", "fp8", "--max-model-len",
                    "4096")  # fmt: skip
    assert memory(doc, "bytes_per_token") == 4 * (DS_MLA + INDEXER)
    doc = plan_json(path, "--vllm-version", "0.17", "--kv-cache-dtype", "fp8_ds_mla",
                    "--max-model-len", "4096")  # fmt: skip
    assert memory(doc, "bytes_per_token") == 4 * (DS_MLA + INDEXER)


# --- what stays refused -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"model_type": "deepseek_v4", "architectures": ["DeepseekV4ForCausalLM"]},
        {"model_type": None, "architectures": ["DeepseekV4ForCausalLM"]},
    ],
)
def test_deepseek_v4_is_refused_by_name(tmp_path: Path, overrides: dict[str, Any]) -> None:
    doc = tiny(**overrides, compress_ratios=[0, 0, 4, 128], o_lora_rank=1024)
    err = refused(write(tmp_path, doc), "--max-model-len", "4096")
    assert err.startswith("error: ") and "config.json: DeepSeek-V4 (" in err
    assert "vLLM serves it from 0.20.0" in err and "not planned yet" in err


def test_index_topk_on_another_model_type_stays_refused() -> None:
    with pytest.raises(InputError, match="index_topk is set"):
        parse_hf_config(tiny("deepseek_v3"), default_name="m", where="c")


@pytest.mark.parametrize(
    ("key", "value", "planned"),
    [
        ("index_topk_freq", 4, False),
        ("index_topk_freq", 1, True),
        ("index_topk_pattern", "FSSF", False),
        ("indexer_types", ["full", "shared", "full", "shared"], False),
        ("indexer_types", ["full"] * 4, True),
    ],
)
def test_indexer_sharing_is_refused(key: str, value: Any, planned: bool) -> None:
    # Layers that reuse an earlier top-k build no indexer (compute_skip_topk_layers,
    # model_executor/models/utils.py 0.34.0; deepseek_v2.py from 0.21.0).
    doc = tiny("glm_moe_dsa", **{key: value})
    if planned:
        assert len(parse_hf_config(doc, default_name="m", where="c").layers) == 8
        return
    with pytest.raises(InputError, match=f"{key} is set .* indexer sharing"):
        parse_hf_config(doc, default_name="m", where="c")


def test_sparse_attention_needs_mla() -> None:
    with pytest.raises(InputError, match="kv_lora_rank is not"):
        parse_hf_config(tiny(kv_lora_rank=None), default_name="m", where="c")


def test_trtllm_and_sglang_before_its_nsa_pool_keep_refusing_dsa() -> None:
    # SGLang plans the NSA pool from 0.5.4 (tests/kv/test_sglang_dsa*.py); 0.5.3 refuses.
    config, doc = load_config(V32), read_document(V32)
    with pytest.raises(InputError, match="SGLang: DeepSeek sparse attention"):
        plan_sglang(config, doc, SglangOptions(release="0.5.3"))
    with pytest.raises(InputError, match="TensorRT-LLM: DeepSeek sparse attention"):
        plan_trtllm(config, doc, TrtllmOptions())


# --- maps -----------------------------------------------------------------------------------


def test_a_map_may_not_share_an_indexer_cache(tmp_path: Path) -> None:
    path = write(tmp_path, tiny())
    mapping = {
        "model.layers.1.self_attn.indexer.k_cache": "model.layers.0.self_attn.indexer.k_cache",
        "model.layers.2.self_attn.attn": "model.layers.2.self_attn.indexer.k_cache",
    }
    map_path = write(tmp_path, mapping, "map.json")
    doc = plan_json(path, "--max-model-len", "4096", "--map", map_path, code=1)
    assert [(f["code"], f["layer"]) for f in doc["findings"]] == [
        ("indexer-sharing", "model.layers.1.self_attn.indexer.k_cache"),
        ("indexer-sharing", "model.layers.2.self_attn.attn"),
    ]


def test_an_mla_map_is_planned_and_emitted(tmp_path: Path) -> None:
    path = write(tmp_path, tiny())
    mapping = {"model.layers.3.self_attn.attn": "model.layers.1.self_attn.attn"}
    out = tmp_path / "emitted.json"
    map_path = write(tmp_path, mapping, "m.json")
    doc = cli_plan_json(path, "--max-model-len", "4096", "--map", map_path, "--emit-map", str(out))
    assert json.loads(out.read_text()) == mapping
    assert doc["memory"]["bytes_per_token"] == {
        "with_sharing": 4 * INDEXER + 3 * MLA_BF16,
        "without_sharing": 4 * (INDEXER + MLA_BF16),
    }
