"""``kv-share explain`` of SGLang start-up logs of Qwen3.5 / 3.6 (GDN state pool read from the
config's ``text_config``) and of Gemma 4 (hybrid sliding-window pool with two head shapes).

Qwen3.6-35B-A3B (tests/kv/realworld/configs, text geometry reconstructed, see PROVENANCE.md):
30 linear-attention layers × (conv (2 × 16 × 128 + 32 × 128) = 8192 × (4 − 1) bf16 = 49,152 B
+ ssm 32 × 128 × 128 fp32 = 2,097,152 B) = 64,389,120 B per state slot; 10 full-attention
layers × 2 KV heads × 256 × bf16 = 10,240 B per token per K buffer. At a 40 GiB pool budget
(42,949,672,960 B) with mamba_full_memory_ratio 0.9 (the state share budget × 0.9 / 1.9 =
20,344,055,613 B):

* SGLang 0.5.9 – 0.5.16 size int(share // 64,389,120) = 315 slots and give the token pool the
  rest, (budget − 315 × 64,389,120) // 20,480 = 1,106,792 tokens; 0.5.17 on budget MambaPool's
  padding slot ((share − per) // per = 314 slots, 315 × per off the budget: the same 1,106,792
  tokens) — row field ``mamba_pad_slot_budgeted``, kv_cache_configurator.py of 0.5.17 ("+1: the
  pool's padding slot, see memory_pool.py");
* the request cap is slots // 3 up to 0.5.13 and slots // 5 from 0.5.14 (extra_buffer: 0.5.14
  server_args.py:4338 lists both architectures; 0.5.17 kv_cache_configurator.py
  ``_calculate_mamba_ratio``, base 3 + 2 for the extra buffer with overlap): 105, 63 or 62;
* the Mamba line counts slots + 1 (memory_pool.py: the padding slot): conv 316 × 30 × 49,152 B
  = 0.434 GiB, ssm 316 × 30 × 2,097,152 B = 18.52 GiB (315 + 1 rows: 0.43, 18.46 GiB); K
  (1,106,792 + 1) × 10,240 B = 10.56 GiB;
* 0.5.13 on name the pool's dtype in the KV line (memory_pool.py:819 ``dtype: {self.dtype}``),
  0.5.4 on name max_mamba_cache_size in the Mamba line (0.5.17 memory_pool.py:789).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv.explain.engine_logs import parse_sglang_log
from mmcli.kv.explain.engines import EngineExplanation, explain_sglang
from mmcli.kv.inputs.layer_config import load_config, read_document

QWEN3_6 = (
    Path(__file__).parents[1]
    / "realworld"
    / "configs"
    / "Qwen--Qwen3.6-35B-A3B.text_config.RECONSTRUCTED.json"
)
GEMMA_4 = Path(__file__).parents[1] / "configs" / "google--gemma-4-31B-it.text_config.json"
JAMBA = Path(__file__).parents[1] / "configs" / "ai21labs--AI21-Jamba-1.5-Mini.json"

_ARGS = (
    "[2026] server_args=ServerArgs(model_path='Qwen/Qwen3.6-35B-A3B', tp_size=1, "
    "mem_fraction_static=0.85, max_running_requests=None, page_size=1, kv_cache_dtype='auto', "
    "disable_radix_cache=False, speculative_algorithm=None, enable_dp_attention=False, "
    "max_mamba_cache_size=None, mamba_ssm_dtype='float32', mamba_full_memory_ratio=0.9)\n"
)


def qwen_log(slots: int, ssm: str, requests: int, *, dtype: bool) -> str:
    named = "dtype: torch.bfloat16, " if dtype else ""
    return (
        _ARGS + f"[2026 TP0] Mamba Cache is allocated. max_mamba_cache_size: {slots}, "
        f"conv_state size: 0.43GB, ssm_state size: {ssm}GB \n"
        f"[2026 TP0] KV Cache is allocated. {named}#tokens: 1106792, K size: 10.56 GB, "
        "V size: 10.56 GB\n"
        "[2026 TP0] max_total_num_tokens=1106792, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={requests}, context_len=262144, "
        "available_gpu_mem=10.00 GB\n"
    )


def explain(config: Path, text: str) -> EngineExplanation:
    log = parse_sglang_log(text)
    assert log is not None
    return explain_sglang(load_config(config), read_document(config), log)


def releases(first: int, last: int) -> list[str]:
    return [f"0.5.{n}" for n in range(first, last + 1)]


@pytest.mark.parametrize(
    ("slots", "ssm", "requests", "dtype", "matching"),
    [
        # 0.5.9 – 0.5.12 (no dtype in the KV line): 315 slots, requests 315 // 3.
        (315, "18.52", 105, False, releases(9, 12)),
        # 0.5.13 names the dtype and still caps at slots // 3.
        (315, "18.52", 105, True, ["0.5.13"]),
        # 0.5.14 on cap at slots // 5; 315 slots are also 0.5.17 on at a budget one slot larger
        # (the padding slot off it), which gives the same #tokens.
        (315, "18.52", 63, True, releases(14, 23)),
        # 314 slots and 1,106,792 tokens: only a release that budgets the padding slot.
        (314, "18.46", 62, True, releases(17, 23)),
    ],
)
def test_a_qwen3_6_log_names_the_releases_whose_rules_print_it(
    slots: int, ssm: str, requests: int, dtype: bool, matching: list[str]
) -> None:
    result = explain(QWEN3_6, qwen_log(slots, ssm, requests, dtype=dtype))
    assert result.matches, result.rows
    assert result.releases_matching == matching
    assert any("Qwen3_5MoeForConditionalGeneration" in note for note in result.notes)
    statuses = {row.figure: row.status for row in result.rows}
    assert statuses["ssm_state size"] == statuses["max_running_requests"] == "match"


def test_the_budget_note_counts_the_padding_slot_off_the_budget() -> None:
    """Under 0.5.17's rules 314 slots hold 315 slots' state: the budget behind the log is
    315 × 64,389,120 + 1,106,792 × 20,480 = 42,949,672,960 B (40 GiB), up to one page of cells
    (20,480 B) more."""
    result = explain(QWEN3_6, qwen_log(314, "18.46", 62, dtype=True))
    assert any("lies in 42,949,672,960–42,949,693,439 B" in note for note in result.notes)


def test_a_cap_no_release_prints_differs_with_exit_1(tmp_path: Path) -> None:
    """315 slots capped at 105 requests with a dtype-naming KV line: 0.5.13 caps at 105, but a
    request cap of 100 is no release's."""
    path = tmp_path / "sglang.log"
    path.write_text(qwen_log(315, "18.52", 100, dtype=True), encoding="utf-8")
    result = CliRunner().invoke(
        app, ["kv-share", "explain", str(path), "--config", str(QWEN3_6), "--format", "json"]
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["releases_matching"] == []
    status = {r["figure"]: r["status"] for r in doc["rows"]}
    assert status["max_running_requests"] == "differs"
    assert status["max_mamba_cache_size"] == "match"


def test_a_model_no_release_serves_is_still_refused_naming_it() -> None:
    """Jamba has no SGLang state pool in any release read; a dtype-naming log of it is refused
    as the 0.5.4-worded one is."""
    with pytest.raises(InputError, match="JambaForCausalLM"):
        explain(JAMBA, qwen_log(315, "18.52", 63, dtype=True))


def test_a_qwen3_6_log_without_max_mamba_cache_size_is_refused() -> None:
    """A Mamba line without max_mamba_cache_size is 0.5.3's wording (memory_pool.py:177), a
    release with no Qwen3.5 state pool: refused, naming the releases that serve it."""
    text = qwen_log(315, "18.52", 105, dtype=False).replace("max_mamba_cache_size: 315, ", "")
    with pytest.raises(InputError, match="no hybrid state pool in SGLang 0.5.3") as caught:
        explain(QWEN3_6, text)
    assert caught.value.hint is not None and "SGLang 0.5.9–0.5.23 serves" in caught.value.hint


# Gemma 4 31B (tests/kv/configs/google--gemma-4-31B-it.text_config.json): 10 full layers of
# 4 KV heads × global_head_dim 512 (4,096 B per token per K buffer) and 50 sliding layers of
# 16 KV heads × 256 (8,192 B); at a 40 GiB budget HybridSWAPoolConfigurator's cell gives
# 58,254 full and 46,603 sliding tokens (tests/kv/test_sglang_gemma4.py); SWA pool first:
# K (46,603 + 1) × 50 × 8,192 B = 17.78 GiB, full (58,254 + 1) × 10 × 4,096 B = 2.22 GiB.
def gemma_log(*, dtype: bool, full_k: str = "2.22") -> str:
    named = "dtype: torch.bfloat16, " if dtype else ""
    return "\n".join(
        [
            "[2026] server_args=ServerArgs(model_path='google/gemma-4-31B-it', tp_size=1, "
            "page_size=1, max_running_requests=None, max_total_tokens=None)",
            "[2026] Use sliding window memory pool. full_layer_tokens=58254, "
            "swa_layer_tokens=46603",
            f"[2026] KV Cache is allocated. {named}#tokens: 46603, K size: 17.78 GB, "
            "V size: 17.78 GB",
            f"[2026] KV Cache is allocated. {named}#tokens: 58254, K size: {full_k} GB, "
            f"V size: {full_k} GB",
            "[2026] SWAKVPool mem usage: 40.00 GB, swa size: 46603, full size: 58254",
            "[2026] max_total_num_tokens=58254, chunked_prefill_size=8192, "
            "max_prefill_tokens=16384, max_running_requests=2048, context_len=131072",
        ]
    )


@pytest.mark.parametrize(
    ("dtype", "matching"), [(False, releases(11, 12)), (True, releases(13, 23))]
)
def test_a_gemma_4_swa_log_is_reproduced_pool_by_pool(dtype: bool, matching: list[str]) -> None:
    result = explain(GEMMA_4, gemma_log(dtype=dtype))
    assert result.matches and result.releases_matching == matching


def test_a_gemma_4_full_pool_sized_with_the_sliding_shape_differs() -> None:
    """The full pool's K at the sliding layers' 8,192 B per token would be (58,254 + 1) × 10
    × 8,192 B = 4.44 GiB: no release prints it."""
    result = explain(GEMMA_4, gemma_log(dtype=True, full_k="4.44"))
    assert not result.matches and result.releases_matching == []
