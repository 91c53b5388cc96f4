"""The GPU table, the weights readers and the KV-budget estimate, checked by hand arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmcli.errors import InputError
from mmcli.kv.whatif.gpus import (
    DEFAULT_RESERVE_BYTES,
    GPUS,
    default_max_num_batched_tokens,
    estimate_kv_budget,
    index_total,
    resolve_gpu,
)

GIB = 2**30


def test_h100_estimate_terms_by_hand() -> None:
    # H100: torch reports 79.11 GiB = 79.11 × 1,073,741,824 = 84,943,715,696.64 → 84,943,715,697 B.
    h100 = resolve_gpu("H100")
    assert h100.total_bytes == 84_943_715_697
    est = estimate_kv_budget(h100, 0.9, 16 * GIB, tp=2, pp=1, reserve=2 * GIB)
    # × 0.9 = 76,449,344,127.3 → 76,449,344,127
    assert est.usable_bytes == 76_449_344_127
    # 16 GiB ÷ (2 × 1) = 8 GiB = 8,589,934,592
    assert est.weights_per_gpu_bytes == 8_589_934_592
    # 76,449,344,127 − 8,589,934,592 − 2,147,483,648 = 65,711,925,887
    assert est.kv_bytes == 65_711_925_887
    assert est.memory_bytes() == 65_711_925_887
    assert [value for _, value in est.terms()] == [
        84_943_715_697,
        76_449_344_127,
        -8_589_934_592,
        -2_147_483_648,
        65_711_925_887,
    ]
    assert est.formula() == ("79.11 GiB × 0.9 − 16.00 GiB ÷ 2 − 2.00 GiB = 61.20 GiB (estimate)")
    doc = est.to_json()
    assert doc["estimate"] is True and doc["kv_cache_bytes"] == 65_711_925_887


def test_pipeline_parallel_divides_weights_and_rounds_up() -> None:
    # 10 bytes of weights over tp 2 × pp 2 = 4 ranks: ceil(10 / 4) = 3 bytes per GPU.
    est = estimate_kv_budget(1000, 1.0, 10, tp=2, pp=2, reserve=0)
    assert est.weights_per_gpu_bytes == 3
    assert est.kv_bytes == 1000 - 3


def test_plain_size_and_default_reserve() -> None:
    est = estimate_kv_budget(80 * GIB, 0.5, 20 * GIB)
    # 80 GiB × 0.5 = 40 GiB; − 20 GiB − 2 GiB (default reserve) = 18 GiB
    assert est.reserve_bytes == DEFAULT_RESERVE_BYTES == 2 * GIB
    assert est.kv_bytes == 18 * GIB


def test_estimate_that_leaves_nothing_is_refused_with_its_terms() -> None:
    est = estimate_kv_budget(resolve_gpu("L4"), 0.9, 24 * GIB)
    assert est.kv_bytes < 0
    with pytest.raises(InputError, match=r"leaves no memory.*22\.03 GiB × 0\.9 − 24\.00 GiB"):
        est.memory_bytes()


@pytest.mark.parametrize(
    ("utilization", "tp"), [(0.0, 1), (1.5, 1), (0.9, 0)], ids=["zero", "above-1", "tp-0"]
)
def test_bad_estimate_inputs(utilization: float, tp: int) -> None:
    with pytest.raises(InputError):
        estimate_kv_budget(80 * GIB, utilization, GIB, tp=tp)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("H100", "H100"),
        ("h100 nvl", "H100-NVL"),
        ("H200", "H200"),
        ("a100-80gb", "A100-80GB"),
        ("A100-40GB", "A100-40GB"),
        ("L40S", "L40S"),
        ("L4", "L4"),
        ("A10G", "A10G"),
        ("RTX 4090", "RTX4090"),
        ("rtx5090", "RTX5090"),
        ("B200", "B200"),
    ],
)
def test_gpu_names(text: str, name: str) -> None:
    assert resolve_gpu(text).name == name


def test_table_is_below_marketing_size() -> None:
    # Each reading is what CUDA reports: a little less than the marketed size read as GiB (the
    # driver keeps some back), and within 10 % of it.
    for gpu in GPUS:
        marketed = float(gpu.marketed.split()[0]) * GIB
        assert 0.9 * marketed < gpu.total_bytes < marketed, gpu.name


def test_gpu_as_size_and_unknown_name() -> None:
    assert resolve_gpu("79.19GiB").total_bytes == 85_029_615_042  # ⌊79.19 × 2³⁰⌋
    assert resolve_gpu("80GB").total_bytes == 80 * 10**9
    with pytest.raises(InputError, match="unknown GPU 'V100'"):
        resolve_gpu("V100")


def test_default_max_num_batched_tokens() -> None:
    # vllm serve: 2048 under 70 GiB and on any A100; 8192 on larger. LLM class: 8192 / 16384.
    assert default_max_num_batched_tokens(resolve_gpu("L40S")) == 2048
    assert default_max_num_batched_tokens(resolve_gpu("A100-80GB")) == 2048
    assert default_max_num_batched_tokens(resolve_gpu("H100")) == 8192
    assert default_max_num_batched_tokens(resolve_gpu("H100"), entry="llm") == 16384
    assert default_max_num_batched_tokens(resolve_gpu("RTX4090"), entry="llm") == 8192
    assert default_max_num_batched_tokens(70 * GIB) == 8192
    assert default_max_num_batched_tokens(70 * GIB - 1) == 2048


def test_index_total(tmp_path: Path) -> None:
    # --weights as a whole (sizes, files, folders) is read in the CLI: tests/cli/test_kv_weights.py
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 16_060_522_496}, "weight_map": {}}))
    assert index_total(index) == 16_060_522_496
    index.write_text(json.dumps({"metadata": {"total_size": "58"}}))
    assert index_total(index) == 58
    for doc in ({"weight_map": {}}, {"metadata": []}, [], {"metadata": {"total_size": True}}):
        index.write_text(json.dumps(doc))
        with pytest.raises(InputError, match="no positive metadata.total_size") as info:
            index_total(index)
        assert info.value.hint
    index.write_text("{oops")
    with pytest.raises(InputError, match="^--weights: .*invalid JSON") as info:
        index_total(index)
    assert info.value.hint


def test_the_table_lives_in_gpu_table_and_gpus_re_exports_it() -> None:
    from mmcli.kv.whatif import gpu_table, gpus

    assert gpus.GPUS is gpu_table.GPUS and gpus.GPU is gpu_table.GPU


@pytest.mark.parametrize(
    ("name", "gib"),
    # vLLM's own log lines: total_gpu_memory=23.58GiB on an RTX 3090
    # (https://github.com/vllm-project/vllm/issues/10517); 121.69 GiB per GB10 (DGX Spark,
    # https://github.com/MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks/issues/204).
    [("RTX3090", 23.58), ("rtx-3090", 23.58), ("GB10", 121.69), ("DGX Spark", 121.69)],
)
def test_added_names_resolve_to_their_cited_readings(name: str, gib: float) -> None:
    assert resolve_gpu(name).total_gib == pytest.approx(gib)


@pytest.mark.parametrize(
    ("name", "gib"),
    # torch's OOM "total capacity" quoted in public issues: 14.56 GiB on a Tesla T4
    # (https://github.com/Zheng-Chong/CatVTON/issues/133), 15.78 / 31.74 GiB on V100 16 / 32 GB
    # (https://github.com/kchengiva/Shift-GCN/issues/34,
    # https://github.com/liucongg/ChatGLM-Finetuning/issues/73), 44.43 GiB on an RTX 6000 Ada
    # (https://github.com/DINGYANB/MTVCrafter/issues/21); CUDA's total 94.97 GiB as ds4 prints it
    # on an RTX Pro 6000 Blackwell (https://github.com/antirez/ds4/issues/431).
    [
        ("T4", 14.56),
        ("Tesla T4", 14.56),
        ("V100-16GB", 15.78),
        ("v100-sxm2-32gb", 31.74),
        ("RTX 6000 Ada", 44.43),
        ("RTX-PRO-6000", 94.97),
        ("rtx pro 6000 blackwell", 94.97),
    ],
)
def test_cited_cards_resolve_to_their_readings(name: str, gib: float) -> None:
    assert resolve_gpu(name).total_gib == pytest.approx(gib)


@pytest.mark.parametrize(("name", "gib"), [("A6000", 47.53)])
def test_typical_cards_say_so_and_what_they_rest_on(name: str, gib: float) -> None:
    # No single linkable report names the card with this reading: the source says "typical"
    # and where the figure comes from.
    gpu = resolve_gpu(name)
    assert gpu.total_gib == pytest.approx(gib)
    assert gpu.source.startswith("typical:") and "not linked" in gpu.source


def test_a_bare_v100_stays_ambiguous() -> None:
    # 16 GB and 32 GB boards report 15.78 and 31.74 GiB: the size must be named.
    with pytest.raises(InputError, match="unknown GPU 'V100'"):
        resolve_gpu("V100")
    assert resolve_gpu("V100-32G").name == "V100-32GB"


def test_every_entry_has_a_source_and_stays_below_its_marketing_size() -> None:
    from mmcli.kv.whatif.gpu_table import GPUS

    for gpu in GPUS:
        assert gpu.source.strip(), gpu.name
        marketed_gb = float(gpu.marketed.split()[0])
        assert 0 < gpu.total_gib < marketed_gb, gpu.name


@pytest.mark.parametrize(
    ("name", "total_bytes", "gib"),
    [
        # torch's OOM "total capacity of 22.18 GiB" on an A10 under vllm serve
        # (https://github.com/OpenBMB/MiniCPM-V/issues/640): the A10 is no longer the A10G.
        ("A10", None, 22.18),
        # TensorRT-LLM prints cudaMemGetInfo's total: "total: 39.39 GiB" on a 40 GB A100
        # (https://github.com/NVIDIA/TensorRT-LLM/issues/2268).
        ("A100-40GB", None, 39.39),
        # rocm-smi --showmeminfo vram: "VRAM Total Memory (B): 206141652992" per MI300X
        # (https://github.com/ROCm/legacy-rocm-build/issues/4750); ÷ 2³⁰ = 191.98 GiB.
        ("MI300X", 206_141_652_992, 191.98),
        # torch's OOM "total capacity of 23.52 GiB" on a 4090 24G
        # (https://github.com/Soul-AILab/SoulX-FlashTalk/issues/5).
        ("RTX 4090", None, 23.52),
    ],
)
def test_readings_with_their_link(name: str, total_bytes: int | None, gib: float) -> None:
    gpu = resolve_gpu(name)
    assert round(gpu.total_gib, 2) == gib
    if total_bytes is not None:
        assert gpu.total_bytes == total_bytes
    assert "https://" in gpu.source


def test_a10_and_a10g_are_two_entries() -> None:
    assert resolve_gpu("A10").name == "A10" and resolve_gpu("A10G").name == "A10G"
    assert resolve_gpu("A10").total_bytes != resolve_gpu("A10G").total_bytes


#: Entries whose reading predates the rule that each names its public report; they still need
#: a link (the test below fails when one gains it, or when a new entry has neither).
AWAITING_A_LINK: set[str] = set()


def test_every_source_is_a_link_or_says_typical() -> None:
    unlinked = set()
    for gpu in GPUS:
        if gpu.source.startswith("typical:"):
            assert "not linked" in gpu.source or "https://" in gpu.source, gpu.name
        elif "https://" not in gpu.source:
            unlinked.add(gpu.name)
    assert unlinked == AWAITING_A_LINK


@pytest.mark.parametrize(
    "name",
    # Cards with no citable CUDA / HIP reading are refused rather than given an invented
    # figure (B300, GB200 and GB300 were, until their readings were linked). An nvidia-smi
    # total alone is not CUDA's (see test_h20_reading_is_torchs_not_nvidia_smis). A bare
    # "MI250" stays refused: the reading names an MI250X (see test_amd_instinct_readings).
    ["MI250"],
)
def test_cards_without_a_cited_reading_are_refused(name: str) -> None:
    with pytest.raises(InputError, match="unknown GPU") as info:
        resolve_gpu(name)
    assert info.value.hint and "GiB" in info.value.hint


def test_every_name_and_alias_resolves_to_its_entry() -> None:
    for gpu in GPUS:
        for text in (gpu.name, *gpu.aliases):
            assert resolve_gpu(text) is gpu, text


def test_a_unified_memory_gpu_makes_the_estimate_an_upper_bound() -> None:
    """The GB10 shares the host's memory: vLLM's memory snapshot takes the free memory as the
    host's (vLLM 0.13.0 vllm/utils/mem_utils.py ``MemorySnapshot.measure``, compute capability
    12.1; 0.20.0 the same for every integrated GPU), so what the host takes while vLLM profiles
    is charged as non-torch memory. The estimate says it is an upper bound; a discrete GPU's
    does not."""
    spark = estimate_kv_budget(resolve_gpu("DGX Spark"), 0.5, 20 * GIB)
    assert spark.upper_bound and spark.to_json()["upper_bound"] is True
    assert spark.terms()[-1][0] == "= KV cache per GPU (estimate, an upper bound)"
    assert spark.formula().endswith("(estimate, an upper bound)")
    assert any("shares the host's memory" in note for note in spark.notes)
    assert [g.name for g in GPUS if g.unified] == ["GB10"]
    h100 = estimate_kv_budget(resolve_gpu("H100"), 0.5, 20 * GIB)
    assert not h100.upper_bound and "upper_bound" not in h100.to_json()
    assert h100.terms()[-1][0] == "= KV cache per GPU (estimate)" and not h100.notes


@pytest.mark.parametrize(
    ("name", "total_bytes", "gib"),
    [
        # gpu4pyscf's device properties print cudaGetDeviceProperties' totalGlobalMem:
        # "name b'NVIDIA A40'" / "totalGlobalMem 47622258688"
        # (https://github.com/pyscf/gpu4pyscf/issues/304); ÷ 2³⁰ = 44.35 GiB.
        ("A40", 47_622_258_688, 44.35),
        # torch's OOM "total capacity of 44.40 GiB" in "OutOfMemoryError in single L40 GPU"
        # (https://github.com/QwenLM/Qwen3-VL/issues/2097).
        ("L40", None, 44.40),
        # torch's OOM "total capacity of 93.00 GiB" on "an H100 NVL 94GB VRAM"
        # (https://github.com/ali-vilab/VACE/issues/56).
        ("H100 NVL", None, 93.00),
        # "=== Device 0: NVIDIA B200 ===" / "Total Global Memory: 178.35 GB", the CUDA query in
        # https://github.com/pytorch/ao/pull/4002 (bytes ÷ 2³⁰ though labelled GB: an 8-GPU B200
        # box's nvidia-smi shows 183359MiB = 179.06 GiB per card,
        # https://github.com/NVIDIA/TensorRT-LLM/issues/10278, not 178.35 × 10⁹ B = 166 GiB).
        ("B200", None, 178.35),
        # torch's OOM "total capacity of 79.11 GiB" on an H100 whose nvidia-smi, in the same
        # report, shows "NVIDIA H100 80GB HBM3 ... 0MiB /  81559MiB"
        # (https://github.com/vllm-project/vllm/issues/27508).
        ("H100", None, 79.11),
        # torch's OOM "79.25 GiB total capacity" on an A100
        # (https://github.com/levihsu/OOTDiffusion/issues/235).
        ("A100-80GB", None, 79.25),
        # torch's OOM "total capacity of 31.36 GiB" on an RTX 5090
        # (https://github.com/TrajectoryCrafter/TrajectoryCrafter/issues/20).
        ("RTX5090", None, 31.36),
    ],
)
def test_readings_linked_since_the_refused_list(
    name: str, total_bytes: int | None, gib: float
) -> None:
    gpu = resolve_gpu(name)
    assert round(gpu.total_gib, 2) == gib
    if total_bytes is not None:
        assert gpu.total_bytes == total_bytes
    assert "https://" in gpu.source


def test_l40_and_l40s_are_two_entries() -> None:
    """The L40S reads 44.42 GiB: torch's "torch.cuda.OutOfMemoryError: CUDA out of memory.
    Tried to allocate 216.00 MiB. GPU  has a total capacity of 44.42 GiB of which 118.12 MiB is
    free." in stepfun-ai/Step-Video-T2V#8, "Run 8*L40S OOM". It carried the L40's 44.40 GiB
    (QwenLM/Qwen3-VL#2097) until then."""
    l40s = resolve_gpu("L40S")
    assert resolve_gpu("L40").name == "L40" and l40s.name == "L40S"
    # 44.42 × 2³⁰ = 47,695,611,822.08 → 47,695,611,822 B
    assert l40s.total_bytes == 47_695_611_822
    assert round(resolve_gpu("L40").total_gib, 2) == 44.40
    assert "https://github.com/stepfun-ai/Step-Video-T2V/issues/8" in l40s.source
    assert "(L40)" not in l40s.source and "L40S" not in AWAITING_A_LINK


@pytest.mark.parametrize(
    ("name", "total_bytes", "gib"),
    [
        # torch's OOM "GPU 0 has a total capacity of 79.19 GiB" under "device model=NVIDIA H100
        # PCIe" (https://github.com/sms1097/FoundationTS/blob/
        # 0ccdb6a6a1033b13d1570bfb530dd96d0229df24/docs/proflie_training.md).
        ("H100-PCIe", None, 79.19),
        ("h100 pcie", None, 79.19),
        # torch.cuda.get_device_properties(0) printed as "_CudaDeviceProperties(name='NVIDIA
        # H20', major=9, minor=0, total_memory=97285MB, multi_processor_count=78)"
        # (https://github.com/alipay/PainlessInferenceAcceleration/blob/
        # be680b4654e150e361caeb7e34fe53268f156685/flood/flood/ops/seg_mla.py); torch prints
        # totalGlobalMem ÷ 2²⁰ rounded down: 97285 × 1,048,576 = 102,010,716,160 B = 95.00 GiB.
        ("H20", 102_010_716_160, 95.00),
    ],
)
def test_h100_pcie_and_h20_readings(name: str, total_bytes: int | None, gib: float) -> None:
    gpu = resolve_gpu(name)
    assert round(gpu.total_gib, 2) == gib
    if total_bytes is not None:
        assert gpu.total_bytes == total_bytes
    assert "https://" in gpu.source and not gpu.unified


def test_h20_reading_is_torchs_not_nvidia_smis() -> None:
    # nvidia-smi shows an H20 as 97871MiB (https://github.com/NVIDIA/nvtrust/issues/128): 586 MiB
    # above torch's 97285 MiB, as an H100 80GB HBM3's 81559MiB sits above its torch total of
    # 79.11 GiB = 81,008.6 MiB (https://github.com/vllm-project/vllm/issues/27508).
    assert resolve_gpu("H20").total_bytes == 97285 * 2**20 < 97871 * 2**20
    assert resolve_gpu("H100").total_bytes < 81559 * 2**20
    assert resolve_gpu("H100-PCIe") is not resolve_gpu("H100")


@pytest.mark.parametrize(
    ("name", "total_bytes", "gib"),
    [
        # torch's HIP OOM "HIP out of memory. Tried to allocate 13.54 GiB. GPU 0 has a total
        # capacity of 255.98 GiB of which 12.74 GiB is free." under "Hardware: AMD MI325X × 8
        # (255.98 GiB HBM each)" (https://github.com/vllm-project/vllm/issues/41962).
        ("MI325X", None, 255.98),
        ("instinct mi325x", None, 255.98),
        # vLLM's start-up refusal "Free memory on device cuda:N (272.0-272.4/287.98 GiB) on
        # startup is less than desired GPU memory utilization" on "mi355x-amds nodes"
        # (https://github.com/SemiAnalysisAI/InferenceX/blob/
        # 462f8ed735d9f3ab9a98a896a553c6e41cee410f/benchmarks/single_node/agentic/
        # kimik3_fp4_mi355x_mtp.sh): the total after the slash is torch.cuda.mem_get_info's.
        ("MI355X", None, 287.98),
        # torch.cuda.get_device_properties(0) on LUMI: "_CudaDeviceProperties(name='AMD
        # Instinct MI250X', major=9, minor=0, gcnArchName='gfx90a:sramecc+:xnack-',
        # total_memory=65520MB, multi_processor_count=110)" (https://github.com/Jozefov/MyPyLUMI/
        # blob/ec33cba49c92587699397ee1db89325d03229f45/notes.md): one GCD, MiB rounded down,
        # 65520 × 1,048,576 = 68,702,699,520 B = 63.98 GiB.
        ("MI250X", 68_702_699_520, 63.98),
        ("MI250X-GCD", 68_702_699_520, 63.98),
    ],
)
def test_amd_instinct_readings(name: str, total_bytes: int | None, gib: float) -> None:
    gpu = resolve_gpu(name)
    assert round(gpu.total_gib, 2) == gib
    if total_bytes is not None:
        assert gpu.total_bytes == total_bytes
    assert "https://" in gpu.source and not gpu.unified


def test_amd_instinct_readings_are_below_their_marketed_size() -> None:
    # The readings sit just under the marketed size read as GiB: 255.98 of a "256 GB" MI325X,
    # 287.98 of a "288 GB" MI355X; an MI250X GCD's 65520 MiB is 16 MiB short of 64 GiB.
    assert resolve_gpu("MI325X").total_bytes < 256 * GIB
    assert resolve_gpu("MI355X").total_bytes < 288 * GIB
    assert 64 * GIB - resolve_gpu("MI250X").total_bytes == 16 * 2**20
    assert resolve_gpu("MI300X") is not resolve_gpu("MI325X")


def test_l4_reading_is_linked() -> None:
    # torch's OOM "GPU 0 has a total capacity of 22.03 GiB of which 1.25 GiB is free" in a post
    # asking "Is a L4 GPU not enough to run the test script?"
    # (https://github.com/ArcInstitute/evo2/issues/190).
    l4 = resolve_gpu("L4")
    assert round(l4.total_gib, 2) == 22.03
    assert "https://github.com/ArcInstitute/evo2/issues/190" in l4.source
    assert "L4" not in AWAITING_A_LINK


def test_a10g_reading_is_the_a10gs() -> None:
    """AUTOMATIC1111/stable-diffusion-webui#1259, "(A10G) CUDA OOM with 10+GB free": "I'm
    using an A10G with 24 GB VRAM" and torch's "(GPU 0; 22.49 GiB total capacity; 4.94 GiB
    already allocated; …)". The entry used to carry an A10's 21.99 GiB; the A10 itself reads
    22.18 GiB (OpenBMB/MiniCPM-V#640), so the two cards stay apart."""
    a10g = resolve_gpu("A10G")
    assert round(a10g.total_gib, 2) == 22.49
    assert "stable-diffusion-webui/issues/1259" in a10g.source
    assert "A10G" not in AWAITING_A_LINK


@pytest.mark.parametrize("name", ["GB200", "gb200", "GB200-NVL72"])
def test_gb200_reading_is_linked(name: str) -> None:
    """vllm-project/vllm#43951 ("MoE + --enable-sleep-mode OOM during weight load"): "GPU: 4x
    NVIDIA GB200 (184 GiB), TP=4" and torch's "torch.OutOfMemoryError: CUDA out of memory.
    Tried to allocate 20.00 MiB. GPU 3 has a total capacity of 184.31 GiB of which 21.50 MiB is
    free." The same OOM on 4x GB200 is quoted in the comment on vllm-project/vllm#41268."""
    gb200 = resolve_gpu(name)
    assert gb200.name == "GB200" and not gb200.unified
    # 184.31 × 2³⁰ = 197,901,355,581.44 → 197,901,355,581 B
    assert gb200.total_bytes == 197_901_355_581
    assert "https://github.com/vllm-project/vllm/issues/43951" in gb200.source
    assert gb200 is not resolve_gpu("B200")


@pytest.mark.parametrize("name", ["B300", "b300", "B300-SXM"])
def test_b300_reading_is_linked(name: str) -> None:
    """SemiAnalysisAI/InferenceX-app@450ba1312bde44c75b275dfe247de9974d133bc1
    packages/db/src/lib/fixtures/agentic-memory-vllm.json holds vLLM's start-up lines of
    InferenceX result 440197, "(Worker_TP0 pid=1869365) INFO 08-20 05:19:38 [gpu_worker.py:841]
    Free memory on device (264.19/267.69 GiB) on startup. Desired GPU memory utilization is
    (0.95, 254.3 GiB)", which packages/db/src/lib/agentic-memory.test.ts in the same commit
    calls "the four actual B300 vLLM startup reports" (docs/agentx-memory.md there: "B300 vLLM
    DeepSeek V4 Pro, result 440197 ... 267.69 GiB device total"). The total after the slash is
    the start-up snapshot's total_memory (vLLM 0.20.0 vllm/v1/worker/gpu_worker.py formats
    "Free memory on device (free/total GiB) on startup" from init_snapshot; vllm/utils/
    mem_utils.py MemorySnapshot.measure reads it from current_platform.mem_get_info)."""
    b300 = resolve_gpu(name)
    assert b300.name == "B300" and not b300.unified
    # 267.69 × 2³⁰ = 287,429,948,866.56 → 287,429,948,867 B
    assert b300.total_bytes == 287_429_948_867
    # 0.95 × 267.69 = 254.31 GiB: the log's "(0.95, 254.3 GiB)"
    assert round(0.95 * b300.total_gib, 1) == 254.3
    assert "InferenceX-app/blob/450ba1312bde44c75b275dfe247de9974d133bc1" in b300.source
    assert b300 is not resolve_gpu("B200") and b300 is not resolve_gpu("GB200")


@pytest.mark.parametrize("name", ["GB300", "gb300", "DGX Station"])
def test_gb300_reading_is_linked(name: str) -> None:
    """stas00/ml-engineering@04ceca1fc695c5fcd88c8a25bb5b9b9a3c6d3071 debug/pytorch.md, on "a
    DGX Station with 277GiB of GPU HBM memory" ("a single GB300 GPU"), allocates 1 GiB at a time
    until torch's "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1024.00 MiB.
    GPU 0 has a total capacity of 276.50 GiB of which 797.44 MiB is free." The GB300 is not
    an integrated GPU, so vLLM takes its free memory from cudaMemGetInfo as on any discrete
    card (vLLM 0.20.0 vllm/utils/mem_utils.py MemorySnapshot.measure swaps in the host's
    available memory only when current_platform.is_integrated_gpu)."""
    gb300 = resolve_gpu(name)
    assert gb300.name == "GB300" and not gb300.unified
    # 276.50 × 2³⁰ = 296,889,614,336 B exactly
    assert gb300.total_bytes == 296_889_614_336
    assert "stas00/ml-engineering/blob/04ceca1fc695c5fcd88c8a25bb5b9b9a3c6d3071" in gb300.source
    assert gb300 is not resolve_gpu("B300")


def test_h200_reading_is_linked() -> None:
    """stas00/ml-engineering@04ceca1fc695c5fcd88c8a25bb5b9b9a3c6d3071 debug/pytorch.md: "We
    will be using an H200 node", then torch's "torch.OutOfMemoryError: CUDA out of memory.
    Tried to allocate 1024.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 289.25 MiB
    is free." and "Indeed, H200 is about 140GiB"."""
    h200 = resolve_gpu("H200")
    # 139.80 × 2³⁰ = 150,109,106,995.2 → 150,109,106,995 B
    assert h200.total_bytes == 150_109_106_995
    assert "stas00/ml-engineering/blob/04ceca1fc695c5fcd88c8a25bb5b9b9a3c6d3071" in h200.source
    assert "H200" not in AWAITING_A_LINK
