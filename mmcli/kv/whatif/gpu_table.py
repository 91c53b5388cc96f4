"""The GPU table: common GPUs and the total memory CUDA reports for each (what vLLM multiplies by
``gpu_memory_utilization``), with where each reading comes from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

GIB: Final = 2**30


@dataclass(frozen=True)
class GPU:
    """One GPU model: its name, what it is sold as, and the total memory CUDA reports."""

    name: str
    #: What the vendor sells it as (its "GB" is about a GiB of memory chips), for display.
    marketed: str
    #: Total device memory in bytes as CUDA / torch report it (what vLLM multiplies).
    total_bytes: int
    #: Where the reading comes from.
    source: str
    aliases: tuple[str, ...] = ()
    #: Whether the GPU shares the host's memory (DGX Spark's GB10): vLLM's profile then counts
    #: memory the host takes while it profiles as the engine's own non-torch memory.
    unified: bool = False

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB


def _gib(value: float) -> int:
    return round(value * GIB)


_OOM = "torch's OOM message 'total capacity of {} GiB' in public issues"
#: Common GPUs. Readings are torch's "total capacity" (GiB) quoted in public reports; the
#: ``source`` says which. "typical" marks a figure not seen quoted for exactly that board.
GPUS: Final[tuple[GPU, ...]] = (
    GPU(
        "H100",
        "80 GB HBM3",
        _gib(79.11),
        _OOM.format("79.11") + " on an H100 80GB HBM3 whose nvidia-smi shows 81559MiB, "
        "https://github.com/vllm-project/vllm/issues/27508",
        ("H100-80GB", "H100-SXM"),
    ),
    GPU(
        "H100-NVL",
        "94 GB HBM3",
        _gib(93.00),
        _OOM.format("93.00") + " on an H100 NVL 94GB, https://github.com/ali-vilab/VACE/issues/56",
        ("H100NVL", "H100-94GB"),
    ),
    GPU(
        "H100-PCIe",
        "80 GB HBM2e",
        _gib(79.19),
        _OOM.format("79.19") + " under 'device model=NVIDIA H100 PCIe', "
        "https://github.com/sms1097/FoundationTS/blob/0ccdb6a6a1033b13d1570bfb530dd96d0229df24/"
        "docs/proflie_training.md",
        ("H100-PCIE-80GB",),
    ),
    GPU(
        "H20",
        "96 GB HBM3",
        97285 * 2**20,
        "torch.cuda.get_device_properties' \"_CudaDeviceProperties(name='NVIDIA H20', major=9, "
        'minor=0, total_memory=97285MB, ...)" (MiB, rounded down: 95.00 GiB), '
        "https://github.com/alipay/PainlessInferenceAcceleration/blob/"
        "be680b4654e150e361caeb7e34fe53268f156685/flood/flood/ops/seg_mla.py",
        ("H20-96GB",),
    ),
    GPU(
        "H200",
        "141 GB HBM3e",
        _gib(139.80),
        "torch's OOM message 'GPU 0 has a total capacity of 139.80 GiB' on 'an H200 node' "
        "('Indeed, H200 is about 140GiB'), https://github.com/stas00/ml-engineering/blob/"
        "04ceca1fc695c5fcd88c8a25bb5b9b9a3c6d3071/debug/pytorch.md",
        ("H200-141GB", "H200-SXM"),
    ),
    GPU(
        "A100-80GB",
        "80 GB HBM2e",
        _gib(79.25),
        _OOM.format("79.25") + " on an A100, https://github.com/levihsu/OOTDiffusion/issues/235",
        ("A100-80G", "A100"),
    ),
    GPU(
        "A100-40GB",
        "40 GB HBM2",
        _gib(39.39),
        "TensorRT-LLM's 'total: 39.39 GiB' (cudaMemGetInfo) on a 40 GB A100, "
        "https://github.com/NVIDIA/TensorRT-LLM/issues/2268",
        ("A100-40G",),
    ),
    GPU(
        "L40S",
        "48 GB GDDR6",
        _gib(44.42),
        _OOM.format("44.42") + " in 'Run 8*L40S OOM', "
        "https://github.com/stepfun-ai/Step-Video-T2V/issues/8",
        (),
    ),
    GPU(
        "L40",
        "48 GB GDDR6",
        _gib(44.40),
        _OOM.format("44.40") + " on a single L40, https://github.com/QwenLM/Qwen3-VL/issues/2097",
        (),
    ),
    GPU(
        "A40",
        "48 GB GDDR6",
        47_622_258_688,
        "cudaGetDeviceProperties' 'totalGlobalMem 47622258688' (44.35 GiB) on an NVIDIA A40, "
        "https://github.com/pyscf/gpu4pyscf/issues/304",
        (),
    ),
    GPU(
        "L4",
        "24 GB GDDR6",
        _gib(22.03),
        _OOM.format("22.03") + " from a user asking 'Is a L4 GPU not enough', "
        "https://github.com/ArcInstitute/evo2/issues/190",
        (),
    ),
    GPU(
        "A10G",
        "24 GB GDDR6",
        _gib(22.49),
        "torch's OOM message '(GPU 0; 22.49 GiB total capacity; …)' under 'I'm using an A10G "
        "with 24 GB VRAM', https://github.com/AUTOMATIC1111/stable-diffusion-webui/issues/1259",
        (),
    ),
    GPU(
        "A10",
        "24 GB GDDR6",
        _gib(22.18),
        _OOM.format("22.18") + " on an A10 under vllm serve, "
        "https://github.com/OpenBMB/MiniCPM-V/issues/640",
        ("A10-24GB",),
    ),
    GPU(
        "RTX3090",
        "24 GB GDDR6X",
        _gib(23.58),
        "vLLM log 'total_gpu_memory=23.58GiB', https://github.com/vllm-project/vllm/issues/10517",
        ("3090", "RTX-3090"),
    ),
    GPU(
        "RTX4090",
        "24 GB GDDR6X",
        _gib(23.52),
        _OOM.format("23.52")
        + " on a 4090 24G, https://github.com/Soul-AILab/SoulX-FlashTalk/issues/5",
        ("4090", "RTX-4090"),
    ),
    GPU(
        "RTX5090",
        "32 GB GDDR7",
        _gib(31.36),
        _OOM.format("31.36")
        + " on an RTX 5090, https://github.com/TrajectoryCrafter/TrajectoryCrafter/issues/20",
        ("5090", "RTX-5090"),
    ),
    GPU(
        "B200",
        "180 GB HBM3e",
        _gib(178.35),
        "CUDA's totalGlobalMem printed as 'Total Global Memory: 178.35 GB' (bytes ÷ 2³⁰, "
        "labelled GB) on an NVIDIA B200, "
        "https://github.com/pytorch/ao/pull/4002",
        ("B200-180GB",),
    ),
    GPU(
        "B300",
        "288 GB HBM3e",
        _gib(267.69),
        "vLLM's start-up line 'Free memory on device (264.19/267.69 GiB) on startup' (free/total "
        "from torch.cuda.mem_get_info), the fixture its repository's test calls 'the four actual "
        "B300 vLLM startup reports', https://github.com/SemiAnalysisAI/InferenceX-app/blob/"
        "450ba1312bde44c75b275dfe247de9974d133bc1/packages/db/src/lib/fixtures/"
        "agentic-memory-vllm.json",
        ("B300-SXM", "B300-288GB"),
    ),
    GPU(
        "GB200",
        "186 GB HBM3e (per GPU of a GB200 superchip)",
        _gib(184.31),
        "torch's OOM message 'GPU 3 has a total capacity of 184.31 GiB' under 'GPU: 4x NVIDIA "
        "GB200 (184 GiB), TP=4', https://github.com/vllm-project/vllm/issues/43951",
        ("GB200-NVL72", "GB200-186GB"),
    ),
    GPU(
        "GB300",
        "288 GB HBM3e (per GPU of a GB300 superchip)",
        _gib(276.50),
        "torch's OOM message 'GPU 0 has a total capacity of 276.50 GiB' on a DGX Station ('a "
        "single GB300 GPU', '277GiB of GPU HBM memory'), https://github.com/stas00/ml-engineering/"
        "blob/04ceca1fc695c5fcd88c8a25bb5b9b9a3c6d3071/debug/pytorch.md",
        ("DGX-Station", "GB300-288GB"),
    ),
    GPU(
        "T4",
        "16 GB GDDR6",
        _gib(14.56),
        _OOM.format("14.56") + " on a Tesla T4: https://github.com/Zheng-Chong/CatVTON/issues/133, "
        "https://github.com/AlphaGPU/leetgpu-challenges/issues/52",
        ("Tesla-T4",),
    ),
    GPU(
        "V100-16GB",
        "16 GB HBM2",
        _gib(15.78),
        "torch's OOM message '15.78 GiB total capacity' on a 16G V100, "
        "https://github.com/kchengiva/Shift-GCN/issues/34",
        ("V100-16G", "V100-SXM2-16GB", "V100-PCIE-16GB"),
    ),
    GPU(
        "V100-32GB",
        "32 GB HBM2",
        _gib(31.74),
        "torch's OOM message '31.74 GiB total capacity' on a V100 32GB, "
        "https://github.com/liucongg/ChatGLM-Finetuning/issues/73",
        ("V100-32G", "V100-SXM2-32GB", "V100-PCIE-32GB"),
    ),
    GPU(
        "RTX6000-Ada",
        "48 GB GDDR6",
        _gib(44.43),
        _OOM.format("44.43")
        + " on an RTX 6000 Ada (the same post's nvidia-smi line shows 46068MiB), "
        "https://github.com/DINGYANB/MTVCrafter/issues/21",
        ("RTX-6000-Ada", "RTX6000Ada"),
    ),
    GPU(
        "RTX-PRO-6000",
        "96 GB GDDR7 (Blackwell)",
        _gib(94.97),
        "CUDA's total as ds4 prints it ('total=94.97 GiB') on a 96GB RTX Pro 6000 Blackwell, "
        "https://github.com/antirez/ds4/issues/431",
        ("RTX-PRO-6000-Blackwell", "RTXPRO6000", "PRO6000"),
    ),
    GPU(
        "RTX-A6000",
        "48 GB GDDR6",
        _gib(47.53),
        "typical: torch's 'total capacity of 47.53 GiB' as it recurs in public notebooks run on "
        "48 GB cards, not linked to one report naming an RTX A6000",
        ("A6000",),
    ),
    GPU(
        "MI300X",
        "192 GB HBM3",
        206_141_652_992,
        "rocm-smi's 'VRAM Total Memory (B): 206141652992' (191.98 GiB, the figure torch's HIP OOM "
        "message quotes) per MI300X, https://github.com/ROCm/legacy-rocm-build/issues/4750",
        ("Instinct-MI300X",),
    ),
    GPU(
        "MI325X",
        "256 GB HBM3E",
        _gib(255.98),
        "torch's HIP OOM message 'GPU 0 has a total capacity of 255.98 GiB' on 'AMD MI325X × 8 "
        "(255.98 GiB HBM each)', https://github.com/vllm-project/vllm/issues/41962",
        ("Instinct-MI325X",),
    ),
    GPU(
        "MI355X",
        "288 GB HBM3E",
        _gib(287.98),
        "vLLM's start-up check 'Free memory on device cuda:N (272.0-272.4/287.98 GiB) on startup "
        "is less than desired GPU memory utilization' (free/total from torch.cuda.mem_get_info) "
        "on mi355x-amds nodes, https://github.com/SemiAnalysisAI/InferenceX/blob/"
        "462f8ed735d9f3ab9a98a896a553c6e41cee410f/benchmarks/single_node/agentic/"
        "kimik3_fp4_mi355x_mtp.sh",
        ("Instinct-MI355X",),
    ),
    GPU(
        "MI250X",
        "64 GB HBM2e per GCD (an MI250X is two GCDs, 128 GB; each is its own device)",
        65520 * 2**20,
        "torch.cuda.get_device_properties' \"_CudaDeviceProperties(name='AMD Instinct MI250X', "
        "major=9, minor=0, gcnArchName='gfx90a:sramecc+:xnack-', total_memory=65520MB, "
        'multi_processor_count=110)" (MiB, rounded down: 63.98 GiB per GCD) on LUMI, '
        "https://github.com/Jozefov/MyPyLUMI/blob/ec33cba49c92587699397ee1db89325d03229f45/notes.md",
        ("Instinct-MI250X", "MI250X-GCD"),
    ),
    GPU(
        "GB10",
        "128 GB LPDDR5X unified (DGX Spark)",
        _gib(121.69),
        "unified memory shared with the CPU: torch reports 121.69 GiB per GB10, "
        "https://github.com/MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks/issues/204",
        ("DGX-Spark", "Spark"),
        unified=True,
    ),
)

#: What vLLM's choice of sampler reads of the device (``current_platform``'s
#: ``get_device_capability`` and ``num_compute_units``): each NVIDIA GPU's compute capability
#: (NVIDIA's list, https://developer.nvidia.com/cuda-gpus) and SM count (NVIDIA's architecture
#: whitepapers and datasheets); an AMD GPU runs ROCm, not CUDA (no capability), and its compute
#: units (the MI250X's from its properties line above).
ARCH: Final[dict[str, tuple[tuple[int, int] | None, int]]] = {
    "H100": ((9, 0), 132), "H100-NVL": ((9, 0), 132), "H100-PCIe": ((9, 0), 114),
    "H20": ((9, 0), 78), "H200": ((9, 0), 132), "A100-80GB": ((8, 0), 108),
    "A100-40GB": ((8, 0), 108), "L40S": ((8, 9), 142), "L40": ((8, 9), 142), "A40": ((8, 6), 84),
    "L4": ((8, 9), 58), "A10G": ((8, 6), 80), "A10": ((8, 6), 72), "RTX3090": ((8, 6), 82),
    "RTX4090": ((8, 9), 128), "RTX5090": ((12, 0), 170), "B200": ((10, 0), 148),
    "B300": ((10, 3), 160), "GB200": ((10, 0), 148), "GB300": ((10, 3), 160), "T4": ((7, 5), 40),
    "V100-16GB": ((7, 0), 80), "V100-32GB": ((7, 0), 80), "RTX6000-Ada": ((8, 9), 142),
    "RTX-PRO-6000": ((12, 0), 188), "RTX-A6000": ((8, 6), 84), "MI300X": (None, 304),
    "MI325X": (None, 304), "MI355X": (None, 256), "MI250X": (None, 110), "GB10": ((12, 1), 48),
}  # fmt: skip
