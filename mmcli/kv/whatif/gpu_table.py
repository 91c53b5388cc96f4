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

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB


def _gib(value: float) -> int:
    return round(value * GIB)


_OOM = "torch's OOM message 'total capacity of {} GiB' in public issues"
#: Common GPUs. Readings are torch's "total capacity" (GiB) quoted in public reports; the
#: ``source`` says which. "typical" marks a figure not seen quoted for exactly that board.
GPUS: Final[tuple[GPU, ...]] = (
    GPU("H100", "80 GB HBM3", _gib(79.11), _OOM.format("79.11"), ("H100-80GB", "H100-SXM")),
    GPU("H100-NVL", "94 GB HBM3", _gib(93.00), _OOM.format("93.00"), ("H100NVL", "H100-94GB")),
    GPU("H200", "141 GB HBM3e", _gib(139.80), _OOM.format("139.80"), ("H200-141GB", "H200-SXM")),
    GPU("A100-80GB", "80 GB HBM2e", _gib(79.25), _OOM.format("79.25"), ("A100-80G", "A100")),
    GPU("A100-40GB", "40 GB HBM2", _gib(39.39), "typical torch reading", ("A100-40G",)),
    GPU("L40S", "48 GB GDDR6", _gib(44.40), _OOM.format("44.40") + " (L40)", ("L40",)),
    GPU("L4", "24 GB GDDR6", _gib(22.03), _OOM.format("22.03"), ()),
    GPU("A10G", "24 GB GDDR6", _gib(21.99), _OOM.format("21.99") + " (A10)", ("A10",)),
    GPU(
        "RTX3090",
        "24 GB GDDR6X",
        _gib(23.58),
        "vLLM log 'total_gpu_memory=23.58GiB', https://github.com/vllm-project/vllm/issues/10517",
        ("3090", "RTX-3090"),
    ),
    GPU("RTX4090", "24 GB GDDR6X", _gib(23.52), _OOM.format("23.52"), ("4090", "RTX-4090")),
    GPU("RTX5090", "32 GB GDDR7", _gib(31.36), _OOM.format("31.36"), ("5090", "RTX-5090")),
    GPU("B200", "180 GB HBM3e", _gib(178.35), "CUDA totalGlobalMem 178.35 GiB", ("B200-180GB",)),
    GPU(
        "GB10",
        "128 GB LPDDR5X unified (DGX Spark)",
        _gib(121.69),
        "unified memory shared with the CPU: torch reports 121.69 GiB per GB10, "
        "https://github.com/MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks/issues/204",
        ("DGX-Spark", "Spark"),
    ),
)
