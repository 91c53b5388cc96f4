"""DeepSeek-V4 on SGLang: refused, naming the pools SGLang sizes for it and what is not mirrored.

Facts from the released SGLang wheels (``sglang/srt/``):

* ``models/deepseek_v4.py``: absent from 0.5.11, present from 0.5.12 (0.5.12 :1593
  ``EntryClass = [DeepseekV4ForCausalLM]``); ``configs/model_config.py`` adds
  DeepseekV4ForCausalLM to ``is_hybrid_swa_model`` in 0.5.12 (``SWA_ADDED``).
* ``model_executor/pool_configurator.py``: ``DSV4PoolConfigurator`` (0.5.12 :309, 0.5.23 :1067)
  "Splits available memory across full / swa / c4 / c128 + c4_state / c128_state pools" (0.5.12
  docstring); ``_DSV4PoolSizes`` holds ``full_max_total_num_tokens``,
  ``swa_max_total_num_tokens``, ``c4_max_total_num_tokens``, ``c128_max_total_num_tokens``,
  ``c4_state_pool_size``, ``c128_state_pool_size`` (0.5.12 :301-306, 0.5.23 :1059-1064), the
  pools of ``DeepSeekV4TokenToKVPool`` (``mem_cache/deepseek_v4_memory_pool.py``, 0.5.12 :351,
  0.5.23 :943). Compress ratio 4 layers keep the indexer (0.5.23
  ``_compressed_bytes_per_full_token``: ``1 / 4 * self.indexer_bytes_per_token``), ratio 128
  layers only ``1 / 128`` of a row.
* ``--swa-full-tokens-ratio``: 0.1 for the model when left at the default (0.5.12
  ``arg_groups/deepseek_v4_hook.py:49``, 0.5.15 ``arg_groups/overrides.py:710``, 0.5.19 / 0.5.23
  ``arg_groups/model_overrides/deepseek_v4.py:48``), 0.8 otherwise.
* 0.5.21 adds ``DSV4PoolConfigurator._resolve_swa_cap_tokens`` (absent in 0.5.20): the SWA pool
  sized from the request cap when the ratio is not the operator's.
* The pool's rows are the fp8 NoPE / bf16 RoPE pack with scales (0.5.12
  ``deepseek_v4_memory_pool.py:108``: "... + nope FP8 scales + scale_pad = 584 bytes/token"), the
  compress state's dtype comes from ``SGLANG_DSV4_COMPRESS_STATE_DTYPE`` (0.5.16 on,
  ``pool_configurator.py``): neither is mirrored, so the config is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.kv.hf.dsv4 import layer_ratios
from mmcli.kv.sglang.dsv4 import first_release, sglang_refusal
from mmcli.kv.sglang.releases import RELEASES
from tests.kv.test_dsv4 import refused, tiny

SERVED_FROM = "0.5.12"
CAP_FROM = "0.5.21"
NAMES = [r.release for r in RELEASES]


def test_first_release_is_the_one_that_lists_it() -> None:
    # models/deepseek_v4.py first ships in 0.5.12, the release that adds it to the list.
    assert first_release() == SERVED_FROM


@pytest.mark.parametrize("release", ["0.5.9", "0.5.11"])
def test_releases_before_it_do_not_serve_it(tmp_path: Path, release: str) -> None:
    err = refused(tmp_path, tiny(), "--engine", "sglang", "--sglang-version", release)
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("hint: ")
    assert f"SGLang {release} does not serve it" in lines[0]
    assert f"DeepseekV4ForCausalLM is in its models from {SERVED_FROM}" in lines[0]


@pytest.mark.parametrize("release", ["0.5.12", "0.5.15", "0.5.20", "0.5.21", "0.5.23"])
def test_served_releases_name_the_pools_and_the_gap(tmp_path: Path, release: str) -> None:
    err = refused(tmp_path, tiny(), "--engine", "sglang", "--sglang-version", release)
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert f"DeepSeek-V4 on SGLang {release}: DSV4PoolConfigurator sizes" in lines[0]
    assert "full / swa / c4 / c128 token pools and c4_state / c128_state pools" in lines[0]
    # tiny(): compress_ratios [0, 0, 4, 128] -> one C4 layer, one C128 layer of four.
    assert "4 layers: 1 with compress_ratio 4 (C4 pool and indexer)" in lines[0]
    assert "1 with compress_ratio 128 (C128 pool)" in lines[0]
    assert "SGLANG_DSV4_COMPRESS_STATE_DTYPE" in lines[0] and "not mirrored" in lines[0]
    assert "vLLM" not in lines[0]
    cap = NAMES.index(release) >= NAMES.index(CAP_FROM)
    assert ("_resolve_swa_cap_tokens" in lines[0]) is cap
    assert "--swa-full-tokens-ratio 0.1" in lines[0]


def test_the_default_release_refuses_it_too(tmp_path: Path) -> None:
    err = refused(tmp_path, tiny(), "--engine", "sglang")
    assert "DSV4PoolConfigurator" in err and "not mirrored" in err


def test_counts_follow_compress_ratios() -> None:
    err = sglang_refusal(layer_ratios(tiny(compress_ratios=[128, 4, 4, 4])), None, "c")
    assert "4 layers: 3 with compress_ratio 4" in err.message
    assert "1 with compress_ratio 128" in err.message


def test_unreadable_compress_ratios_are_named() -> None:
    err = sglang_refusal(layer_ratios(tiny(compress_ratios=None)), None, "c")
    assert "compress_ratios (not a list" in err.message


def test_found_by_architecture_alone(tmp_path: Path) -> None:
    err = refused(tmp_path, tiny(model_type=None), "--engine", "sglang")
    assert "DeepSeek-V4 on SGLang" in err


def test_all_engines_keep_the_vllm_refusal(tmp_path: Path) -> None:
    # --engine all plans vLLM first: its refusal (naming vLLM's caches) stands.
    err = refused(tmp_path, tiny(), "--engine", "all")
    assert "vLLM serves it from" in err


def test_explaining_an_sglang_log_gives_sglang_s_refusal(tmp_path: Path) -> None:
    # An SGLang start-up line (memory_pool.py's KV line) with a DeepSeek-V4 config: SGLang's
    # pools are named, not vLLM's caches.
    config = tmp_path / "config.json"
    config.write_text(json.dumps(tiny()))
    log = tmp_path / "sglang.log"
    log.write_text(
        "[2026-05-01 10:00:00 TP0] KV Cache is allocated. #tokens: 1000, KV size: 1 GB\n"
    )
    result = CliRunner().invoke(app, ["kv-share", "explain", str(log), "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert "DSV4PoolConfigurator" in result.output
    assert "vLLM serves it from" not in result.output
