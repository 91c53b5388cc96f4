"""SGLang's pool for DeepSeek sparse attention (V3.2 NSA): budget cell versus allocation.

Facts (SGLang wheels, sglang/srt/):
* 0.5.4 model_executor/model_runner.py:1400 ``profile_max_num_token``: cell = (kv_lora_rank +
  qk_rope_head_dim) · layers · element size of the KV dtype, plus :1406-1415 the indexer,
  (index_head_dim + index_head_dim // 128 · 4) · layers · 1 (uint8); the same block in 0.5.5
  and 0.5.6 model_runner.py.
* 0.5.4 mem_cache/memory_pool.py:1246-1251: with an fp8_e4m3 cache the NSA latent row is 656
  (``kv_cache_dim``; 0.5.5 :1587 / 0.5.6 :1748 compute it as 512 + 512 // 128 · 4 + 64 · 2),
  buffers of (size + page_size) rows per layer (:1263); :1437-1455 the indexer buffer,
  (size + page_size + 1) // page_size pages of page_size · 132 bytes per layer; :1429 asserts
  index_head_dim 128 and :1431 page size 64; ``get_kv_size_bytes`` adds both (:1511).
* 0.5.4 server_args.py:1009-1024: for is_deepseek_nsa, DP attention on and page size 64.
* 0.5.7 – 0.5.10 (model_executor/model_runner_kv_cache_mixin.py ``get_cell_size_per_token``):
  the same budget block, 0.5.7 :73-82, 0.5.8 / 0.5.9 :71-80, 0.5.10 :99-108. The fp8 row:
  0.5.7 memory_pool.py:1839 / 0.5.8 :1702 ``override_dim`` (512 + 512 // 128 · 4 + 64 · 2);
  0.5.9 mixin :212 / 0.5.10 :240 ``calculate_mla_kv_cache_dim``: the same sum with an fp8_e4m3
  cache, unless a trtllm NSA backend (or ROCm's tilelang, 0.5.10 :264) keeps 576. Indexer pages
  (size + page_size + 1) // page_size: 0.5.7 memory_pool.py:1880, 0.5.10 :1869.
* server_args.py: 0.5.7 :1035 DP attention on, :1058 page 64; 0.5.8 :1158, 0.5.9 :1258,
  0.5.10 :1583 page 64 on CUDA and DP attention only with prefill context parallel (0.5.8
  :1122 / :1131). fp8_e4m3 picks flashmla_auto / flashmla_kv on every GPU up to 0.5.9 (0.5.9
  :1161-1163); 0.5.10 :1465-1467 trtllm / trtllm on SM100 and later.
* DP attention: 0.5.4 server_args.py:1019-1020 / 0.5.5 :1071-1072 set enable_dp_attention and
  dp_size = tp; 0.5.6 :950 / 0.5.7 :1035 set enable_dp_attention only, and
  ``_handle_data_parallelism`` (0.5.6 :1492, 0.5.7 :1802; 0.5.4 :1166) turns it off at dp_size 1.
  ``__post_init__`` computes the default fraction first (0.5.4 :544 ``_handle_gpu_memory_settings``
  before :551 ``_handle_model_specific_adjustments``; 0.5.9 :733 before :736; 0.5.10 :784 before
  :787), so DP attention forced there adds no reserve to it. 0.5.10 captures no piecewise graphs
  for DeepseekV32ForCausalLM (configs/model_config.py:1352
  ``piecewise_cuda_graph_disabled_model_archs``, :1353).
* The V3.2 config (tests/kv/configs/deepseek-ai--DeepSeek-V3.2.as-DeepSeek-V3.2-Exp.json):
  61 layers, kv_lora_rank 512, qk_rope_head_dim 64, index_head_dim 128, bfloat16.

Hand sums: fp8 budget (576 · 1 + 132) · 61 = 43,188 B; allocated (656 + 132) · 61 = 48,068 B;
bf16 both (576 · 2 + 132) · 61 = 78,324 B.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmcli.errors import InputError
from mmcli.kv.inputs.layer_config import load_config, read_document
from mmcli.kv.sglang import SglangOptions, plan_sglang
from mmcli.kv.sglang.releases import RELEASES

V32 = Path(__file__).parent / "configs" / "deepseek-ai--DeepSeek-V3.2.as-DeepSeek-V3.2-Exp.json"
GiB = 2**30
#: sgl-project/sglang#11309 (merged 2025-10-07, in 0.5.4), DeepSeek-V3.2-Exp on 8×B200 (fp8
#: cache forced on Blackwell), --tp 8 --dp 8 --enable-dp-attention:
#: "KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB".
PUBLISHED = "KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB"


def plan(**options: Any):  # type: ignore[no-untyped-def]
    return plan_sglang(load_config(V32), read_document(V32), SglangOptions(**options))


@pytest.mark.parametrize("release", ["0.5.4", "0.5.5", "0.5.6", "0.5.7", "0.5.8", "0.5.9"])
def test_published_b200_log_is_reproduced(release: str) -> None:
    # The log does not give the budget: any budget in [975424, 975425) budget cells gives it.
    for memory in (975_424 * 43_188, 975_425 * 43_188 - 1):
        result = plan(release=release, tp=8, memory_bytes=memory, kv_dtype="fp8")
        assert result.value("bytes_per_token") == 43_188
        assert result.value("allocated_bytes_per_token") == 48_068
        assert result.value("block_tokens") == 64
        assert result.value("pool_tokens") == 975_424
        assert result.log_lines[0] == PUBLISHED


@pytest.mark.parametrize("release", ["0.5.10", "0.5.11", "0.5.12", "0.5.13", "0.5.14"])
def test_0510_fp8_on_blackwell_is_noted(release: str) -> None:
    # 0.5.10 on B200 picks the trtllm backends for fp8 (576-B rows): the same 975424 tokens
    # from the budget, but not the log's 43.67 GB; the plan shows Hopper's flashmla_kv row.
    # 0.5.11 / 0.5.12 the same: server_args.py ``_set_default_nsa_backends`` (0.5.11 :1620
    # trtllm on SM100 / :1626 flashmla_kv on Hopper; 0.5.12 :1724 / :1730), the row from
    # model_runner_kv_cache_mixin.py ``calculate_mla_kv_cache_dim`` (0.5.11 :133, trtllm
    # keeps 576 at :149; 0.5.12 :139 / :155).
    result = plan(release=release, tp=8, memory_bytes=975_424 * 43_188, kv_dtype="fp8")
    assert result.value("pool_tokens") == 975_424
    assert result.value("allocated_bytes_per_token") == 48_068
    assert any("trtllm NSA backends, whose row is the budget's 576 B" in n for n in result.notes)
    older = plan(release="0.5.9", tp=8, memory_bytes=975_424 * 43_188, kv_dtype="fp8")
    assert not any("trtllm" in n for n in older.notes)


@pytest.mark.parametrize(
    ("release", "wording"),
    [
        ("0.5.5", "turns DP attention on (dp_size = tp"),
        ("0.5.6", "keeps attention tensor-parallel at --dp 1"),
        ("0.5.7", "keeps attention tensor-parallel at --dp 1"),
        ("0.5.10", "keeps attention tensor-parallel at --dp 1"),
        # 0.5.11 server_args.py:1706-1736 / 0.5.12 the same block: DP attention only with
        # --enable-nsa-prefill-context-parallel; page 64 on CUDA (0.5.11 :1749, 0.5.12 :1873).
        ("0.5.11", "keeps attention tensor-parallel at --dp 1"),
        ("0.5.12", "keeps attention tensor-parallel at --dp 1"),
        # 0.5.13 server_args.py:1881-1921 / 0.5.14 :3560 the same (DP attention only with
        # context-parallel prefill: --enable-dsa-prefill-context-parallel, 0.5.14
        # --enable-prefill-cp); page 64 on CUDA (0.5.13 :1944, 0.5.14 :3622); auto is bfloat16
        # on Hopper (0.5.13 :1745, 0.5.14 :3420).
        ("0.5.13", "keeps attention tensor-parallel at --dp 1"),
        ("0.5.14", "keeps attention tensor-parallel at --dp 1"),
    ],
)
def test_dp_attention_note_follows_the_release(release: str, wording: str) -> None:
    result = plan(release=release, memory_bytes=100 * 78_324)
    assert result.value("bytes_per_token") == 78_324
    assert result.value("allocated_bytes_per_token") == 78_324
    assert result.value("pool_tokens") == 64
    assert any(wording in n for n in result.notes)


def test_fp8_allocation_exceeds_the_budget_and_says_so() -> None:
    result = plan(release="0.5.4", memory_bytes=975_424 * 43_188, kv_dtype="fp8")
    # (975488 · 656 + 15242 · 64 · 132) · 61 = 46,889,757,184 B against 975424 · 43188.
    allocated = (975_488 * 656 + 15_242 * 64 * 132) * 61
    assert allocated == 46_889_757_184
    note = next(n for n in result.notes if "allocates 48,068 B" in n)
    assert f"{allocated / GiB:.2f} GiB" in note
    more = f"{allocated / (975_424 * 43_188) - 1:.1%}"
    assert more == "11.3%" and f"{more} more" in note
    assert result.to_json()["figures"]["allocated_bytes_per_token"]["value"] == 48_068


def test_bf16_budget_and_allocation_agree() -> None:
    result = plan(release="0.5.4", memory_bytes=100 * 78_324 + 5, page_size=1, page_size_given=True)
    assert result.value("bytes_per_token") == 78_324
    assert result.value("allocated_bytes_per_token") == 78_324
    assert result.value("pool_tokens") == 64  # 100 floored to the forced page of 64
    assert not any("allocates" in n for n in result.notes)
    assert any("--page-size 1 is replaced by 64" in n for n in result.notes)
    assert any("Hopper" in n for n in result.notes)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"release": "0.5.3"}, "SGLang 0.5.3: its NSA pool"),
        ({"release": "0.5.4", "kv_dtype": "fp8_e5m2"}, "bfloat16 or fp8_e4m3 only"),
    ],
)
def test_unmirrored_cases_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        plan(memory_bytes=40 * GiB, **options)


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"release": "0.5.4", "tp": 8}, "server_args sets dp_size = tp"),
        ({"release": "0.5.5", "tp": 2}, "server_args sets dp_size = tp"),
        ({"release": "0.5.9", "tp": 8, "enable_dp_attention": True}, "--enable-dp-attention"),
    ],
)
def test_gpu_budget_with_dp_attention_is_refused(options: dict[str, Any], why: str) -> None:
    with pytest.raises(InputError, match=f"budget from --gpu with DP attention \\({why}"):
        plan(gpu_bytes=80 * GiB, weights_bytes=GiB, gpu_name="H100", **options)


def test_gpu_budget_at_dp_1_takes_the_release_fraction() -> None:
    # Given fraction, tp 1 (dp_size 1 even in 0.5.4): int(80 GiB × 0.9) − 10 GiB =
    # 66,571,993,088 B; // 78,324 = 849,956, floored to the page of 64: 849,920.
    for release in ("0.5.4", "0.5.9"):
        result = plan(
            release=release,
            gpu_bytes=80 * GiB,
            weights_bytes=10 * GiB,
            gpu_name="H100",
            mem_fraction_static=0.9,
        )
        assert result.value("pool_tokens") == 849_920
    # 0.5.10's default at tp 8 on 81,920 MiB (server_args.py:1196-1205: chunk 8192, graphs to
    # batch 512): 512 + 8192 × 1.5 + 512 × 2 + 8 / 8 × 1024 =
    # 14,848 MiB and no piecewise graphs (an MLA model without an indexer adds 1,536):
    # round(67,072 / 81,920, 3) = 0.819; int(80 GiB × 0.819) − 80 GiB / 8 = 59,614,399,938 B;
    # // 78,324 = 761,125, floored to 64: 761,088.
    # 0.5.11 / 0.5.12: the same fraction (server_args.py ``_handle_gpu_memory_settings``), V3.2
    # still without piecewise graphs (configs/model_config.py:1447 in 0.5.11, :1559 in 0.5.12),
    # and the same budget: model_executor/pool_configurator.py ``_compute_cell_size`` (0.5.11
    # :113, the indexer at :141; 0.5.12 :125 / :153), ``available_bytes // cell_size`` (:173 /
    # :185), floored to the page.
    for release in ("0.5.10", "0.5.11", "0.5.12"):
        result = plan(release=release, tp=8, gpu_bytes=80 * GiB, weights_bytes=80 * GiB)
        assert result.value("pool_tokens") == 761_088
        assert "no piecewise graphs for this model" in str(result.to_json())


def test_auto_dtype_on_sm100_gpu_is_refused() -> None:
    with pytest.raises(InputError, match="picks fp8_e4m3"):
        plan(release="0.5.9", gpu_bytes=180 * GiB, weights_bytes=GiB, gpu_name="B200")


def test_release_rows() -> None:
    mirrored = [r.release for r in RELEASES if r.dsa_mirrored]
    assert mirrored == [f"0.5.{n}" for n in range(4, 24)]
    assert [r.release for r in RELEASES if r.dsa_mirrored and r.dsa_dp_attention] == mirrored[:2]
    with pytest.raises(InputError) as info:
        plan(release="0.5.3", memory_bytes=GiB)
    assert "--sglang-version 0.5.23" in (info.value.hint or "")


@pytest.mark.parametrize("release", ["0.5.13", "0.5.14"])
def test_0513_on_the_kv_line_names_the_dtype_and_the_graphs_are_kept(release: str) -> None:
    # 0.5.13 mem_cache/memory_pool.py:825 / 0.5.14 :1029 log "KV Cache is allocated. dtype:
    # {self.dtype}, #tokens: …, KV size: …" (KVCache.dtype is the cache dtype, 0.5.13 :783;
    # DSATokenToKVPool logs after adding the indexer, :2271 / :2575). The budget:
    # model_executor/pool_configurator.py ``_compute_cell_size`` (0.5.13 :125, indexer :153;
    # 0.5.14 :165 / :193), ``available_bytes // cell_size`` (:185 / :225); the fp8 row from
    # model_runner_kv_cache_mixin.py ``calculate_mla_kv_cache_dim`` (0.5.13 :186, 0.5.14 :226).
    # (975488 · 656 + 15242 · 64 · 132) · 61 = 46,889,757,184 B = 43.67 GiB, as on 0.5.4.
    result = plan(release=release, tp=8, memory_bytes=975_424 * 43_188, kv_dtype="fp8")
    assert result.value("pool_tokens") == 975_424
    assert result.log_lines[0] == (
        "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 975424, KV size: 43.67 GB"
    )
    # 0.5.13 configs/model_config.py ``piecewise_cuda_graph_disabled_model_archs`` no longer
    # lists DeepseekV32ForCausalLM (0.5.14 :1713 neither), so the default fraction keeps the
    # MLA piecewise graphs' 1,536 MiB: 14,848 + 1,536 = 16,384 MiB at tp 8 on 81,920 MiB
    # (0.5.10's sum above); round(65,536 / 81,920, 3) = 0.8; int(80 GiB × 0.8) − 80 GiB / 8 =
    # 57,982,058,496 B; // 78,324 = 740,284, floored to 64: 740,224 (bfloat16 on Hopper).
    result = plan(release=release, tp=8, gpu_bytes=80 * GiB, weights_bytes=80 * GiB)
    assert result.value("pool_tokens") == 740_224
    assert "piecewise graphs 1,536 MiB (MLA)" in str(result.to_json())
    assert result.log_lines[0].startswith("KV Cache is allocated. dtype: torch.bfloat16, ")
