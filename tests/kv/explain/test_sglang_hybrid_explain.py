"""``kv-share explain`` of SGLang start-up logs of hybrid GDN / Mamba-2 models.

Where the figures come from:

* the pool sizes (``max_total_num_tokens``, ``max_mamba_cache_size``) are those SGLang's own
  released functions give for the same config and budget (tests/kv/test_sglang_hybrid.py,
  ``QWEN3_NEXT_REFERENCE`` and ``NEMOTRON_REFERENCE``, from tests/kv/sglang_hybrid_reference.py);
* the lines are written in the wording of the wheels' ``mem_cache/memory_pool.py``
  (``Mamba Cache is allocated. max_mamba_cache_size: S, conv_state size: X GB, ssm_state size:
  Y GB `` at 0.5.4 :222, without ``max_mamba_cache_size`` at 0.5.3 :177, both ending in a
  space; ``KV Cache is allocated. #tokens: N, K size: … GB, V size: … GB``, 0.5.4 :453) and of
  ``managers/scheduler.py`` (``max_total_num_tokens=…, chunked_prefill_size=…, …,
  max_running_requests=…, context_len=…``, 0.5.4 :378); their GiB figures are the ones
  ``kv-share plan --engine sglang`` prints (docs/kv-share-engines.md for Qwen3-Next at 40 GiB),
  with the arithmetic spelled out beside each log below.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv.explain.engine_logs import parse_sglang_log
from mmcli.kv.explain.engines import EngineExplanation, explain_sglang
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang
from mmcli.kv.sglang.geometry import sglang_cell
from mmcli.kv.sglang.releases import sglang_rules

CONFIGS = Path(__file__).parents[1] / "configs"
QWEN3_NEXT = CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Thinking.json"
NEMOTRON_H = CONFIGS / "nvidia--Nemotron-H-8B-Base-8K.json"
JAMBA = CONFIGS / "ai21labs--AI21-Jamba-1.5-Mini.json"
QWEN3_235B = CONFIGS / "Qwen--Qwen3-235B-A22B-FP8.json"
GiB = 2**30

# SGLang 0.5.4, Qwen3-Next-80B-A3B, tp 1, a 40 GiB pool budget: 263 state slots and 920,754
# tokens (QWEN3_NEXT_REFERENCE). Mamba pool of 263 + 1 slots over 36 GDN layers: conv 36 × 264
# × 8192 × 3 × 2 B = 0.435 GiB, ssm 36 × 264 × 32 × 128 × 128 × 4 B = 18.56 GiB; K 920,755
# slots × 2 KV heads × 256 × 12 attention layers × 2 B = 10.537 GiB; requests min(920,754 // 2,
# min(2048, 263 // 3)) = 87; context_len 262,144 (the config's max_position_embeddings).
# The three lines are the ones the docs' `kv-share plan … --engine sglang --memory 40GiB` prints.
SERVER_ARGS_054 = (
    "[2025-10-20 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-Next-80B-A3B-Thinking', "
    "tp_size=1, mem_fraction_static=0.85, max_running_requests=None, page_size=1, "
    "kv_cache_dtype='auto', disable_radix_cache=False, speculative_algorithm=None, "
    "enable_dp_attention=False, max_mamba_cache_size=None, mamba_ssm_dtype='float32', "
    "mamba_full_memory_ratio=0.9)\n"
)
QWEN3_NEXT_054 = (
    SERVER_ARGS_054
    + "[2025-10-20 10:01:00 TP0] Mamba Cache is allocated. max_mamba_cache_size: 263, "
    "conv_state size: 0.44GB, ssm_state size: 18.56GB \n"
    "[2025-10-20 10:01:01 TP0] KV Cache is allocated. #tokens: 920754, K size: 10.54 GB, "
    "V size: 10.54 GB\n"
    "[2025-10-20 10:01:05 TP0] max_total_num_tokens=920754, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=87, context_len=262144, "
    "available_gpu_mem=30.12 GB\n"
)
# SGLang 0.5.3, the same model at 60 GiB: 512 fixed slots, 1,011,712 tokens
# (QWEN3_NEXT_REFERENCE). Its MambaPool is the request pool, min(2048, 512) + 1 = 513 slots:
# conv 36 × 513 × 8192 × 3 × 2 B = 0.845 GiB, ssm 36 × 513 × 32 × 128 × 128 × 4 B = 36.07 GiB
# (test_qwen3_next_requests_and_log_lines); K 1,011,713 × 12,288 B = 11.578 GiB; requests
# min(1,011,712 // 2, 512) = 512.
QWEN3_NEXT_053 = (
    "[TP0] Mamba Cache is allocated. conv_state size: 0.85GB, ssm_state size: 36.07GB \n"
    "[TP0] KV Cache is allocated. #tokens: 1011712, K size: 11.58 GB, V size: 11.58 GB\n"
    "[TP0] max_total_num_tokens=1011712, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=512, context_len=262144, available_gpu_mem=10.00 GB\n"
)
# SGLang 0.5.4, Nemotron-H-8B, tp 2, 60 GiB: 512 slots (radix cache off), 4,672,512 tokens
# (NEMOTRON_REFERENCE). Per rank: conv (8192 + 2 × 8 × 128) / 2 = 5120 × 3, ssm 64 × 64 × 128;
# 24 Mamba layers × 513 slots: conv 0.352 GiB, ssm 24.05 GiB; K 4,672,513 × 4 KV heads × 128 ×
# 4 attention layers × 2 B = 17.82 GiB; requests min(4,672,512 // 2, min(4096, 512)) = 512.
NEMOTRON_054 = (
    SERVER_ARGS_054.replace("tp_size=1", "tp_size=2")
    + "[TP0] Mamba Cache is allocated. max_mamba_cache_size: 512, conv_state size: 0.35GB, "
    "ssm_state size: 24.05GB \n"
    "[TP0] KV Cache is allocated. #tokens: 4672512, K size: 17.82 GB, V size: 17.82 GB\n"
    "[TP0] max_total_num_tokens=4672512, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=512, context_len=8192, available_gpu_mem=10.00 GB\n"
)


def explain(config: Path, text: str) -> EngineExplanation:
    log = parse_sglang_log(text)
    assert log is not None
    return explain_sglang(load_config(config), read_document(config), log)


def statuses(result: EngineExplanation) -> dict[str, str]:
    return {row.figure: row.status for row in result.rows}


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, ["kv-share", "explain", *args], catch_exceptions=False)


def test_both_releases_mamba_lines_are_read() -> None:
    new = parse_sglang_log(QWEN3_NEXT_054)
    assert new is not None and new.mamba_wording == "0.5.4"
    assert (new.mamba_slots, new.conv_gib, new.ssm_gib) == (263, 0.44, 18.56)
    assert new.tokens == 920_754 and new.max_running_requests == 87
    assert new.args["mamba_ssm_dtype"] == "float32" and "max_mamba_cache_size" not in new.args
    old = parse_sglang_log(QWEN3_NEXT_053)
    assert old is not None and old.mamba_wording == "0.5.3" and old.mamba_slots is None
    assert (old.conv_gib, old.ssm_gib) == (0.85, 36.07) and not old.mamba_intermediate
    # With speculative decoding the line goes on (0.5.4 memory_pool.py:212).
    spec = parse_sglang_log(
        QWEN3_NEXT_054.replace("18.56GB ", "18.56GB intermediate_ssm_state_cache size: 1.00GB ")
    )
    assert spec is not None and spec.mamba_intermediate


def test_qwen3_next_054_log_is_reproduced() -> None:
    result = explain(QWEN3_NEXT, QWEN3_NEXT_054)
    assert result.release == "0.5.4" and result.matches
    assert set(statuses(result).values()) == {"match"}
    rows = {row.figure: row for row in result.rows}
    assert rows["K size, bytes per token per buffer"].planned == "12,288"
    assert rows["conv_state, bytes per slot"].planned == f"{36 * 8192 * 3 * 2:,}"
    assert rows["ssm_state, bytes per slot"].planned == f"{36 * 32 * 128 * 128 * 4:,}"
    assert rows["ssm_state size"].planned == "18.56GB"
    assert rows["max_running_requests"].planned == "87"
    # One slot more takes 77,266,944 B = 3,144 tokens off the pool; the ratio's slot step is
    # 77,266,944 × 1.9/0.9 B, so the budgets of 262 and 263 slots both give 920,754 tokens.
    assert rows["max_mamba_cache_size"].planned == "262 or 263"
    assert any("0.5.4's wording" in note for note in result.notes)
    assert any("263 state slots lies in" in note for note in result.notes)


def test_qwen3_next_053_log_is_reproduced() -> None:
    result = explain(QWEN3_NEXT, QWEN3_NEXT_053)
    assert result.release == "0.5.3" and result.matches
    found = statuses(result)
    assert found.pop("max_mamba_cache_size") == "not in log"  # 0.5.3 does not print it
    assert set(found.values()) == {"match"}
    assert any("0.5.3's wording" in note for note in result.notes)


def test_nemotron_h_log_at_tp_2_is_reproduced() -> None:
    result = explain(NEMOTRON_H, NEMOTRON_054)
    assert result.matches and set(statuses(result).values()) == {"match"}
    assert {row.figure: row.planned for row in result.rows}["max_mamba_cache_size"] == "512"


@pytest.mark.parametrize(
    ("old", "new", "figure"),
    [
        ("ssm_state size: 18.56GB", "ssm_state size: 18.57GB", "ssm_state size"),
        ("conv_state size: 0.44GB", "conv_state size: 0.88GB", "conv_state size"),
        ("max_mamba_cache_size: 263", "max_mamba_cache_size: 270", "max_mamba_cache_size"),
        ("K size: 10.54 GB", "K size: 10.60 GB", "K size"),
        ("max_running_requests=87", "max_running_requests=88", "max_running_requests"),
    ],
)
def test_one_altered_figure_differs(old: str, new: str, figure: str) -> None:
    assert old in QWEN3_NEXT_054
    result = explain(QWEN3_NEXT, QWEN3_NEXT_054.replace(old, new))
    assert not result.matches
    assert statuses(result)[figure] == "differs"


def test_cli_exit_codes_and_json(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(QWEN3_NEXT_054, encoding="utf-8")
    good = cli(str(log), "--config", str(QWEN3_NEXT))
    assert good.exit_code == 0, good.stdout + good.stderr
    assert "SGLang 0.5.4 rules" in good.stdout
    assert "the plan reproduces the log" in good.stdout
    doc = json.loads(cli(str(log), "--config", str(QWEN3_NEXT), "--format", "json").stdout)
    assert doc["engine"] == "sglang" and doc["release"] == "0.5.4"
    assert doc["matches"] is True and doc["exit_code"] == 0
    assert {row["figure"] for row in doc["rows"]} >= {"max_mamba_cache_size", "ssm_state size"}
    # A mismatch is a finding, exit 1, as for every other log explain reads.
    log.write_text(QWEN3_NEXT_054.replace("18.56GB", "18.57GB"), encoding="utf-8")
    bad = cli(str(log), "--config", str(QWEN3_NEXT))
    assert bad.exit_code == 1 and "differs" in bad.stdout
    result = cli(str(log), "--config", str(QWEN3_NEXT), "--format", "json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["matches"] is False and doc["exit_code"] == 1
    assert {r["figure"]: r["status"] for r in doc["rows"]}["ssm_state size"] == "differs"


@pytest.mark.parametrize(
    ("config", "text", "error", "hint"),
    [
        # Jamba is served as hybrid by no SGLang release read.
        (JAMBA, QWEN3_NEXT_054, "JambaForCausalLM (a hybrid Mamba", "vLLM start-up log"),
        # Nemotron-H has no state pool in 0.5.3, whose wording the log has.
        (NEMOTRON_H, QWEN3_NEXT_053, "no hybrid state pool in SGLang 0.5.3", "SGLang 0.5.4"),
        (
            QWEN3_NEXT,
            QWEN3_NEXT_054.replace("speculative_algorithm=None", "speculative_algorithm='EAGLE'"),
            "speculative decoding is not mirrored",
            "without speculative decoding",
        ),
        (
            QWEN3_NEXT,
            QWEN3_NEXT_054.replace("max_mamba_cache_size=None", "max_mamba_cache_size=100"),
            "--max-mamba-cache-size 100",
            "without it",
        ),
        (
            QWEN3_NEXT,
            QWEN3_NEXT_054.replace("ratio=0.9", "ratio=0.5"),
            "--mamba-full-memory-ratio 0.5",
            "the default 0.9",
        ),
        (
            QWEN3_NEXT,
            QWEN3_NEXT_054.replace("disable_radix_cache=False", "disable_radix_cache=True"),
            "--disable-radix-cache",
            "without it",
        ),
    ],
)
def test_what_is_not_mirrored_is_refused_naming_it(
    tmp_path: Path, config: Path, text: str, error: str, hint: str
) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(text, encoding="utf-8")
    result = cli(str(log), "--config", str(config))
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: SGLang: ")
    assert lines[1].startswith("hint: ")
    assert error in lines[0] and hint in lines[1]
    assert "hybrid_cell" not in result.stderr
    assert result.stdout == ""


def test_disable_radix_cache_changes_nothing_where_it_is_off_anyway() -> None:
    # Nemotron-H is a mamba2_config model: 0.5.4 turns its radix cache off (model_runner.py:402).
    text = NEMOTRON_054.replace("disable_radix_cache=False", "disable_radix_cache=True")
    assert explain(NEMOTRON_H, text).matches


def test_the_token_pool_cell_refusal_is_user_facing() -> None:
    config = load_config(QWEN3_NEXT)
    with pytest.raises(InputError) as caught:
        sglang_cell(config, read_document(QWEN3_NEXT), sglang_rules(None), tp=1, kv_dtype="auto")
    assert "hybrid_cell" not in str(caught.value) and "state pool" in str(caught.value)
    assert caught.value.hint is not None and "kv-share plan --engine sglang" in caught.value.hint


def test_a_hybrid_log_without_its_mamba_line_assumes_054() -> None:
    text = "".join(line + "\n" for line in QWEN3_NEXT_054.splitlines() if "Mamba" not in line)
    result = explain(QWEN3_NEXT, text)
    assert result.release == "0.5.4" and result.matches
    assert statuses(result)["max_mamba_cache_size"] == "not in log"
    assert "conv_state size" not in statuses(result)
    assert any("no Mamba Cache line" in note for note in result.notes)


def test_a_state_pool_in_the_log_of_an_attention_only_config_differs() -> None:
    result = explain(QWEN3_235B, QWEN3_NEXT_054)
    assert not result.matches
    assert statuses(result)["Mamba Cache (state pool)"] == "differs"


@pytest.mark.parametrize(
    ("release", "tp", "page", "budget"),
    [
        # ssm_state per slot sits at the top edge of the printed 2 decimals (37,748,736 B).
        ("0.5.4", 2, 64, 86_126_376_074),
        # K per token per buffer sits at the top edge (6,144 B).
        ("0.5.3", 2, 64, 109_168_672_819),
    ],
)
def test_the_plans_own_lines_match_at_a_printed_digits_edge(
    release: str, tp: int, page: int, budget: int
) -> None:
    # The lines kv-share plan --engine sglang would print for this run, with its server_args.
    config, doc = load_config(QWEN3_NEXT), read_document(QWEN3_NEXT)
    options = SglangOptions(
        release=release, tp=tp, memory_bytes=budget, page_size=page, page_size_given=True
    )
    lines = plan_sglang(config, doc, options).log_lines
    text = "\n".join([f"server_args=ServerArgs(tp_size={tp}, page_size={page})", *lines])
    result = explain(QWEN3_NEXT, text)
    assert result.release == release and result.matches
