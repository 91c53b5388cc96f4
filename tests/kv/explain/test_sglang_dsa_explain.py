"""``kv-share explain`` of SGLang logs of DeepSeek V3.2 (NSA / DSA).

Facts (SGLang wheels, sglang/srt/; the sums are those of tests/kv/test_sglang_dsa.py):
* V3.2 (tests/kv/configs/deepseek-ai--DeepSeek-V3.2.as-DeepSeek-V3.2-Exp.json): 61 layers,
  kv_lora_rank 512, qk_rope_head_dim 64, index_head_dim 128. With fp8 SGLang budgets (576 + 132)
  · 61 = 43,188 B per token (0.5.4 model_executor/model_runner.py:1400-1415) and allocates a
  656-B row, (656 + 132) · 61 = 48,068 B (0.5.4 mem_cache/memory_pool.py:1249); from 0.5.17 the
  budget counts the allocated row (pool_configurator.py with the mixin's
  ``calculate_mla_kv_cache_dim``), 48,068 B. bfloat16: (576 · 2 + 132) · 61 = 78,324 B both.
* The KV line: (tokens + 64) rows and (tokens + 65) // 64 indexer pages of 64 · 132 B per layer
  (0.5.4 memory_pool.py:1263, :1437-1455), printed "KV size: X GB" with GB = 2³⁰ B; 0.5.13 on
  name the dtype ("dtype: torch.bfloat16, ").
* 0.5.10 – 0.5.16 on Blackwell pick the trtllm NSA backends for fp8 (0.5.10 server_args.py
  :1465-1467), whose row is the latent's 576 B (model_runner_kv_cache_mixin.py:240 keeps it):
  (975,488 · 576 + 15,242 · 64 · 132) · 61 B = 39.24 GiB for 975,424 tokens.
* sgl-project/sglang#11309 (https://github.com/sgl-project/sglang/pull/11309, in 0.5.4), 8×B200
  fp8: "KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB" — (975,488 · 656 + 15,242 ·
  64 · 132) · 61 = 46,889,757,184 B = 43.67 GiB. The log file's server_args line is
  reconstructed (marked in logs/sglang_v32_nsa_11309.log).
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
from mmcli.kv.sglang import SglangOptions, plan_sglang
from mmcli.kv.sglang.log_releases import release_span
from mmcli.kv.sglang.releases import RELEASES

V32 = Path(__file__).parents[1] / "configs" / "deepseek-ai--DeepSeek-V3.2.as-DeepSeek-V3.2-Exp.json"
LOG_11309 = Path(__file__).parent / "logs" / "sglang_v32_nsa_11309.log"
PUBLISHED = "[2025-10-07 10:00:01 TP0] KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB"


def explain(text: str):  # type: ignore[no-untyped-def]
    log = parse_sglang_log(text)
    assert log is not None
    return explain_sglang(load_config(V32), read_document(V32), log)


def figures(result) -> dict[str, tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    return {r.figure: (r.logged, r.planned, r.status) for r in result.rows}


def test_11309_log_matches_0_5_4_to_0_5_9_at_tp_8_fp8() -> None:
    result = explain(LOG_11309.read_text())
    assert result.releases_matching == ["0.5.4", "0.5.5", "0.5.6", "0.5.7", "0.5.8", "0.5.9"]
    assert result.matches
    rows = figures(result)
    assert rows["#tokens"] == ("975424", "975424", "match")
    assert rows["KV size (latent + indexer)"] == ("43.67 GB", "43.67 GB", "match")
    assert rows["bytes allocated per token"][1:] == ("48,068", "match")
    assert rows["budget per token (not printed)"][1:] == ("43,188", "not in log")
    assert rows["page size"] == ("64", "64", "match")
    # 0.5.10 – 0.5.12 (no dtype on the KV line, so before 0.5.13) reproduce it on Hopper only.
    blackwell = next(n for n in result.notes if "Hopper GPU only" in n)
    assert "SGLang 0.5.10–0.5.12" in blackwell and "KV size 39.24 GB" in blackwell
    # the budget range behind the tokens: [975424, 975488) budget cells of 43,188 B
    assert any(f"{975_424 * 43_188:,}–{975_488 * 43_188 - 1:,} B" in n for n in result.notes)


def test_bare_kv_line_is_planned_with_both_dtypes_and_fp8_reproduces_it() -> None:
    result = explain(PUBLISHED)
    assert result.releases_matching == ["0.5.4", "0.5.5", "0.5.6", "0.5.7", "0.5.8", "0.5.9"]
    dtype = next(n for n in result.notes if n.startswith("KV dtype"))
    assert "planned with bfloat16 and with fp8_e4m3" in dtype and "reproduced with fp8" in dtype
    assert figures(result)["page size"][2] == "not in log"


def test_a_blackwell_0_5_10_size_is_named_but_not_matched() -> None:
    # The same tokens with the trtllm backends' 576-B row: 39.24 GB (see the docstring).
    result = explain(PUBLISHED.replace("43.67", "39.24"))
    assert not result.matches and result.releases_matching == []
    assert any("SGLang 0.5.10–0.5.12 reproduce the KV size (fp8) on a Blackwell" in n
               for n in result.notes)  # fmt: skip


def _line(release: str, kv_dtype: str, memory: int) -> str:
    """The KV line mmcli's own plan prints (hand-made logs are built from it)."""
    options = SglangOptions(release=release, memory_bytes=memory, kv_dtype=kv_dtype)
    plan = plan_sglang(load_config(V32), read_document(V32), options)
    return "[2026 TP0] " + plan.log_lines[0]


def test_bf16_dtype_line_matches_every_release_naming_the_dtype() -> None:
    # Hand-made from the plan's own line (bfloat16 budget = allocation, 78,324 B per token).
    line = _line("0.5.23", "bfloat16", 100_000 * 78_324)
    assert "dtype: torch.bfloat16, #tokens: 99968, KV size: " in line
    result = explain(line)
    named = [r.release for r in RELEASES if r.dsa_mirrored and r.kv_line_names_dtype]
    assert result.releases_matching == named
    rows = figures(result)
    assert rows["KV line dtype"] == ("torch.bfloat16", "torch.bfloat16", "match")
    assert rows["budget per token (not printed)"][1] == "78,324"
    assert rows["bytes allocated per token"][1] == "78,324"


def test_fp8_dtype_line_on_0_5_17_on_budgets_the_allocated_row() -> None:
    # 0.5.17 on budget 48,068 B per token: the same KV size per token as 0.5.13 – 0.5.16, so
    # the log cannot tell them apart; the rows shown (the newest release) budget the row.
    line = _line("0.5.23", "fp8", 10_000 * 48_068)
    result = explain(line)
    rows = figures(result)
    assert rows["KV line dtype"][2] == "match"
    assert rows["budget per token (not printed)"][1] == "48,068"
    named = [r.release for r in RELEASES if r.dsa_mirrored and r.kv_line_names_dtype]
    assert result.releases_matching == named
    # every release naming the dtype picks the trtllm backends on Blackwell (another row)
    assert any(f"on a Hopper GPU also {release_span(named)}" in n for n in result.notes)


def test_bf16_line_is_not_fp8() -> None:
    line = _line("0.5.23", "bfloat16", 100_000 * 78_324).replace("bfloat16", "float8_e4m3fn")
    result = explain(line)
    assert not result.matches
    assert figures(result)["KV size (latent + indexer)"][2] == "differs"


def test_cli_explains_the_11309_log() -> None:
    out = CliRunner().invoke(
        app, ["kv-share", "explain", str(LOG_11309), "--config", str(V32), "--format", "json"]
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["release"] == "0.5.4–0.5.9" and doc["matches"]


def test_a_kv_line_dtype_the_nsa_pool_does_not_take_is_refused() -> None:
    # NSATokenToKVPool takes bfloat16 or fp8_e4m3 (tests/kv/test_sglang_dsa.py); fp8_e5m2 is not.
    line = _line("0.5.23", "bfloat16", 100_000 * 78_324).replace("bfloat16", "float8_e5m2")
    with pytest.raises(InputError, match="names dtype torch.float8_e5m2"):
        explain(line)
