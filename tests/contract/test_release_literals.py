"""Release numbers live in the release tables alone.

Every release-dependent string mmcli prints (help, errors, hints, "it came in …") is formatted
from the rows of the release tables, so a row that moves moves every message with it. This
test reads every module of the package (its string constants, docstrings aside, and integer
tuples such as ``(0, 20)``) and fails on a release-number literal outside the tables. It also
holds the documentation's table of vLLM releases (docs/kv-share.md) against
:data:`mmcli.kv.releases.CHANGES`, row by row and field by field.
"""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import pytest

from mmcli.kv.releases import CHANGES, EngineRules

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mmcli"

#: The release tables: the only modules that may name an engine release.
TABLES = {
    PACKAGE / "kv" / "releases.py",
    PACKAGE / "kv" / "release_rows.py",
    PACKAGE / "kv" / "served_releases.py",
    PACKAGE / "kv" / "sglang" / "releases.py",
    PACKAGE / "kv" / "sglang" / "release_names.py",
    PACKAGE / "kv" / "trtllm" / "releases.py",
    PACKAGE / "_version.py",  # mmcli's own release
}

#: A release number: vLLM's 0.10 … 0.39 (with or without a patch), any 0.x.y (SGLang 0.4.6,
#: 0.5.4.post1), TensorRT-LLM's 1.x.y / 1.3.0rc7 and 1.1 … 1.4. A one-digit 0.x (0.9, 0.8)
#: is read as a fraction, not a release.
RELEASE = re.compile(
    r"(?<![\w.])(?:0\.\d+\.\d+(?:\.post\d+)?|0\.[1-3]\d|1\.\d+\.\d+(?:rc\d+)?|1\.[1-4])(?![\w.]*\d)"
)


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """The string constants that stand alone as statements (docstrings, attribute docs)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def release_literals(path: Path) -> list[str]:
    """``file:line: literal`` for each release number in ``path``'s strings and tuples."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstring_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            found += [f"{node.lineno}: {m.group(0)!r}" for m in RELEASE.finditer(node.value)]
        elif isinstance(node, ast.Tuple) and len(node.elts) >= 2:
            major, minor = node.elts[:2]
            if (
                isinstance(major, ast.Constant)
                and isinstance(minor, ast.Constant)
                and major.value == 0
                and type(minor.value) is int
                and 4 <= minor.value <= 40
            ):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    rel = path.relative_to(ROOT)
    return [f"{rel}:{hit}" for hit in found]


def test_no_release_number_outside_the_release_tables() -> None:
    modules = sorted(p for p in PACKAGE.rglob("*.py") if p not in TABLES)
    hits = [hit for path in modules for hit in release_literals(path)]
    assert not hits, "release numbers outside the release tables:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('x = "it came in 0.14"', ["0.14"]),
        ('x = f"plan with --sglang-version 0.5.4"', ["0.5.4"]),
        ('x = "TensorRT-LLM 1.3.0rc7 or 1.1"', ["1.3.0rc7", "1.1"]),
        ("x = (0, 20)", ["(0, 20)"]),
        ('x = "utilization 0.9, ratio 0.8, 12.5 GiB, 1.0"', []),
        ('"""A docstring may cite vLLM 0.20.0."""', []),
    ],
)
def test_the_scanner_finds_release_numbers(source: str, expected: list[str]) -> None:
    tree = ast.parse(source)
    docs = _docstring_nodes(tree)
    got: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            got += [m.group(0) for m in RELEASE.finditer(node.value)]
        elif isinstance(node, ast.Tuple):
            got.append(ast.unparse(node))
    assert got == expected


# --- the documentation's table of vLLM releases ----------------------------------------------

#: What the docs row of the release that changes a rule must say (a pattern per field).
FIELD_WORDS: dict[str, str] = {
    "group_threshold": r"\d\.\d+ ×",
    "check": r"start-up check counts",
    "tokens_from_concurrency": r"printed KV token count",
    "in_flight_reserve": r"tokens in flight",
    "hybrid_prefix_caching_default": r"prefix caching on by default",
    "mamba_all_mode": r"\"align\" mode",
    "null_block": r"null block",
    "pad_unequal_pages": r"padded",
    "pp_global_groups": r"groups are formed over the whole model",
    "pp_whole_model_check": r"(once for the whole model|each stage checks its own)",
    "pp_stage_pages": r"divides by its own pages",
    "yarn_scales_max_len": r"YaRN",
    "modelopt_kv_dtype": r"ModelOpt",
    "kv_scheme_fp8": r"kv_cache_scheme",
    "mm_prefix_batch_floor": r"multimodal prefix-LM",
    "hunyuan_cla_starts": r"Hunyuan",
    "hybrid_align_to_block_size": r"multiple of B = max",
    "mla_hybrid_alignment": r"hybrid MLA model's block",
    "mamba2_prefill_checkpoint": r"prefill checkpoint",
    "speculative_states": r"speculative decoding",
    "speculative_state_blocks": r"speculative blocks",
    "state_prefix_caching": r"prefix caching",
    "full_graph_state_check": r"state-blocks-below-max-num-seqs",
    "chunked_local_hybrid": r"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE",
    "cohere2_window_plus_one": r"sliding_window \+ 1",
    "max_len_tera": r"`t` / `T`",
    "max_len_auto": r"--max-model-len auto",
    "dotted_o_cc": r"`-O\.KEY",
    "default_block_size": r"default block size",
    "default_gpu_memory_utilization": r"--gpu-memory-utilization` defaults to",
    "extensible_kv_cache": r"extensible KV cache",
    "dsa_auto_ds_mla": r"--kv-cache-dtype auto",
    "dsa_fp8_hook": r"config hook",
    "dsa_fp8_backend": r"FlashMLA-sparse backend",
    "dsa_block_forced": r"--block-size",
    "dsa_glm_blackwell_fp8": r"Blackwell",
    "all_mode_speculative_blocks": r"\"all\"-mode states count the speculative blocks",
    "indexer_sharing": r"indexer sharing",
    "nemotron_h_ssm_dtype": r"Nemotron-H's SSM state",
    "qwen3_5_named_ssm_dtype": r"mamba_ssm_dtype",
    "state_models_v1_default": r"V1 engine by default",
    "skip_mm_profiling_flag": r"--skip-mm-profiling",
    "cudagraph_estimate_subtracted": r"CUDA-graph memory estimate",
    "runner_buffers_counted": r"model runner's buffers",
    "largest_batch_tier": r"160 GiB",
    "gb10_small_tier": r"GB10",
    "v2_runner_default": r"V2 model runner",
    "v2_runner_architectures": r"V2 by default for",
    "v2_cudagraph_estimate": r"V2 runner's CUDA-graph estimate",
    "mm_items_per_prompt": r"items a prompt",
    "qwen_vl_video": r"Qwen2-VL's dummy video",
    "qwen_vl_image": r"Qwen2-VL's dummy image",
    "mm_tie_later_name": r"tied modalities",
    "v2_encoder_profile": r"V2 runner profiles the multimodal encoder",
    "qwen_vl_vision_stage": r"Qwen2.5-VL's vision block",
    "siglip_vision_stage": r"Gemma 3's SigLIP vision block",
    "qwen3_vl_vision_stage": r"Qwen3-VL's vision block",
    "qwen3_vl_video": r"Qwen3-VL's dummy video",
    "mm_dummy_tokens": r"dummy item .* counted by its",
    "mistral3_image_size": r"Mistral 3's dummy image",
    "gemma4_image_tokens": r"Gemma 4's dummy image",
    "kimi_k25_dummy": r"Kimi K2.5's dummy vision chunk",
    "mm_device_normalize": r"pixel values.*uint8",
    "skip_unused_towers": r"tower.*not loaded",
    "towers_unmarked": r"Kimi K2\.5's towers",
    "language_model_only_flag": r"--language-model-only",
    "internvl_video_text": r"InternVL's dummy video",
    "mm_encoded_item_len": r"dummy item the profile run encodes",
    "llava_ov_video": r"LLaVA-OneVision's dummy video",
    "glm4v_image": r"GLM-4\.1V's dummy image",
    "glm4v_video": r"GLM-4\.1V's dummy video",
    "flashinfer_sampler": r"FlashInfer's top-k / top-p sampler",
    "native_top_k_top_p": r"vLLM's own top-k / top-p",
    "v2_sampler": r"V2 runner's profile sampler",
}


def docs_rows() -> dict[str, str]:
    """The ``| from | what changed |`` rows of docs/kv-share.md's vLLM release table."""
    text = (ROOT / "docs" / "kv-share.md").read_text(encoding="utf-8")
    start = text.index("| from | what changed |")
    rows: dict[str, str] = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("| "):
            break
        release, what = (cell.strip() for cell in line.strip("|").split("|", 1))
        rows[release] = what
    return rows


def test_every_rule_has_its_words() -> None:
    assert set(FIELD_WORDS) == {f.name for f in fields(EngineRules)} - {"release", "mirrored"}


def test_the_docs_table_has_one_row_per_release_row() -> None:
    assert list(docs_rows()) == [since for since, _ in CHANGES]


@pytest.mark.parametrize(("since", "change"), CHANGES[1:], ids=[s for s, _ in CHANGES[1:]])
def test_each_docs_row_says_what_its_release_changed(since: str, change: dict[str, object]) -> None:
    row = docs_rows()[since]
    missing = [f for f in change if not re.search(FIELD_WORDS[f], row)]
    assert not missing, f"docs/kv-share.md row {since} does not say: {missing}"
