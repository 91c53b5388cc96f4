"""``kv-share explain`` of SGLang start-up logs with the hybrid sliding-window pool.

The lines are written in the wording of the wheels: "Use sliding window memory pool.
full_layer_tokens=F, swa_layer_tokens=S" (sglang 0.5.9 model_executor/
model_runner_kv_cache_mixin.py:336, 0.5.13 model_executor/pool_configurator.py:277), one
"KV Cache is allocated. #tokens: N, K size: … GB, V size: … GB" per pool (SWA first, then full:
mem_cache/swa_memory_pool.py builds them in that order) and "SWAKVPool mem usage: … GB, swa
size: S, full size: F" (swa_memory_pool.py:89). Their figures for gpt-oss-20b (12 full and 12
sliding layers, 8 KV heads of 64, bf16: 12,288 B per token per K buffer of a pool) at a 1 GiB
budget are the hand-derived ones of tests/kv/test_sglang_swa_pool.py (0.5.9: 24,272 / 19,417 at
page 1, 24,192 / 19,392 at page 64) and tests/kv/test_sglang_swa_pool_510.py (0.5.10: 24,192 /
19,328 at page 64: the SWA pool taken from the page-floored full pool); each buffer's GB is
``(tokens + page) × 12,288 / 2³⁰``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv.explain.engine_logs import parse_sglang_log
from mmcli.kv.explain.engines import explain_sglang
from mmcli.kv.inputs.layer_config import load_config, read_document

GPT_OSS_20B = Path(__file__).parents[1] / "gpu_logs" / "configs" / "openai--gpt-oss-20b.json"
GEMMA_2 = Path(__file__).parents[1] / "configs" / "google--gemma-2-9b.subset.json"
_PER_TOKEN = 12 * 8 * 64 * 2  # layers × KV heads × head_dim × bf16, one K buffer of a pool


def swa_log(page: int, full: int, swa: int, dtype: str = "") -> str:
    def gb(tokens: int) -> str:
        return f"{(tokens + page) * _PER_TOKEN / 2**30:.2f}"

    total = 2 * ((swa + page) + (full + page)) * _PER_TOKEN / 2**30
    return "\n".join(
        [
            f"[2026] server_args=ServerArgs(model_path='openai/gpt-oss-20b', tp_size=1, "
            f"page_size={page}, max_running_requests=None, max_total_tokens=None)",
            f"[2026] Use sliding window memory pool. full_layer_tokens={full}, "
            f"swa_layer_tokens={swa}",
            f"[2026] KV Cache is allocated. {dtype}#tokens: {swa}, K size: {gb(swa)} GB, "
            f"V size: {gb(swa)} GB",
            f"[2026] KV Cache is allocated. {dtype}#tokens: {full}, K size: {gb(full)} GB, "
            f"V size: {gb(full)} GB",
            f"[2026] SWAKVPool mem usage: {total:.2f} GB, swa size: {swa}, full size: {full}",
            f"[2026] max_total_num_tokens={full}, chunked_prefill_size=8192, "
            "max_prefill_tokens=16384, max_running_requests=2048, context_len=131072",
        ]
    )


def explain(text: str, config: Path = GPT_OSS_20B):  # type: ignore[no-untyped-def]
    log = parse_sglang_log(text)
    assert log is not None
    return explain_sglang(load_config(config), read_document(config), log)


def test_the_log_reads_the_split_and_every_pool_line() -> None:
    log = parse_sglang_log(swa_log(1, 24_272, 19_417))
    assert log is not None
    assert (log.swa_full_tokens, log.swa_tokens) == (24_272, 19_417)
    assert [line.split(".")[0] for line in log.pool_lines] == [
        "Use sliding window memory pool",
        "KV Cache is allocated",
        "KV Cache is allocated",
        "SWAKVPool mem usage: 1",
    ]


@pytest.mark.parametrize(
    ("page", "full", "swa", "releases"),
    [
        # Page 1: every release with the pool splits the same (one head geometry), and the KV
        # line names no dtype, so 0.5.13 on (which name it) are not candidates.
        (1, 24_272, 19_417, ["0.5.8", "0.5.9", "0.5.10", "0.5.11", "0.5.12"]),
        # Page 64: 0.5.8 / 0.5.9 take the SWA pool from the full pool before its page floor,
        # 0.5.10 on after it.
        (64, 24_192, 19_392, ["0.5.8", "0.5.9"]),
        (64, 24_192, 19_328, ["0.5.10", "0.5.11", "0.5.12"]),
    ],
)
def test_the_releases_whose_split_prints_the_log(
    page: int, full: int, swa: int, releases: list[str]
) -> None:
    result = explain(swa_log(page, full, swa))
    assert result.releases_matching == releases
    assert result.matches
    assert [r.figure for r in result.rows] == [
        "full_layer_tokens",
        "swa_layer_tokens",
        "the split line",
        "a pool's line",
        "a pool's line",
        "the pools' total line",
        "max_running_requests",
    ]


def test_a_split_no_release_prints_differs_with_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "sglang.log"
    path.write_text(swa_log(64, 24_192, 19_000), encoding="utf-8")
    result = CliRunner().invoke(
        app,
        ["kv-share", "explain", str(path), "--config", str(GPT_OSS_20B), "--format", "json"],
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["releases_matching"] == []
    status = {r["figure"]: r["status"] for r in doc["rows"]}
    assert status["full_layer_tokens"] == "match" and status["swa_layer_tokens"] == "differs"


def test_a_model_off_the_list_is_refused_naming_it() -> None:
    """Gemma 2 is not on is_hybrid_swa_model's list in any release read (its pool is off)."""
    with pytest.raises(InputError, match="Gemma2ForCausalLM in no release the log can be of"):
        explain(swa_log(1, 24_272, 19_417), GEMMA_2)


def test_a_log_whose_kv_lines_name_the_dtype_is_of_0_5_13_on() -> None:
    """0.5.13 on name the pool's dtype in each KV line (memory_pool.py:819 "dtype:
    {self.dtype}"): such a log is held to the releases that print it and whose list has
    gpt-oss (0.5.13 – 0.5.23 mirrored), whose lines carry the dtype too; 0.5.9's page-64 split
    (the SWA pool from the unfloored full pool) is none of theirs."""
    named = "dtype: torch.bfloat16, "
    result = explain(swa_log(64, 24_192, 19_328, named))
    assert result.releases_matching == [f"0.5.{n}" for n in range(13, 24)]
    assert explain(swa_log(64, 24_192, 19_392, named)).releases_matching == []
