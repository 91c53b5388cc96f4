"""``kv-share plan`` options that start from what a vLLM user knows: a GPU, weights, ``auto``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.panel import Panel
from rich.table import Table

from mmcli.errors import InputError
from mmcli.text import printable, quoted

if TYPE_CHECKING:
    from mmcli.kv.whatif.gpus import Estimate


def estimate(
    gpu: str,
    weights: str | None,
    utilization: float,
    reserve: str | None,
    tensor_parallel_size: int,
    pipeline_parallel_size: int = 1,
) -> Estimate:
    """The KV-memory estimate of ``--gpu`` (with ``--weights``, utilization and reserve)."""
    from mmcli.kv.options import parse_size
    from mmcli.kv.whatif.gpus import DEFAULT_RESERVE_BYTES, estimate_kv_budget, resolve_gpu

    return estimate_kv_budget(
        resolve_gpu(gpu),
        utilization,
        weights_total(weights) if weights else 0,
        tp=tensor_parallel_size,
        pp=pipeline_parallel_size,
        reserve=parse_size(reserve) if reserve else DEFAULT_RESERVE_BYTES,
    )


def weights_total(spec: str) -> int:
    """Bytes of ``--weights``: a size (``16GiB``), or a checkpoint path.

    A path may be a ``model.safetensors.index.json`` (its ``metadata.total_size``), one
    ``.safetensors`` file (the bytes of the tensors its header declares, read by the dump
    reader's strict, bounded header parser; no tensor data is read), or a folder holding
    either (the index if present, else every ``*.safetensors`` header). An index counts every
    tensor's bytes, so both ways give the same figure for one checkpoint.
    """
    from mmcli.kv.options import parse_size
    from mmcli.kv.whatif.gpus import index_total

    path = Path(spec)
    if path.is_dir():
        index = path / "model.safetensors.index.json"
        if index.is_file():
            return index_total(index)
        shards = sorted(path.glob("*.safetensors"))
        if not shards:
            raise InputError(
                f"--weights: {printable(str(path))} holds no model.safetensors.index.json and "
                "no .safetensors file",
                hint="give the checkpoint folder, its index file, or a size such as 16GiB",
            )
        return sum(safetensors_total(p) for p in shards)
    if path.suffix == ".json" and path.is_file():
        return index_total(path)
    if path.suffix == ".safetensors":
        return safetensors_total(path)
    if path.exists():
        raise InputError(
            f"--weights: {printable(str(path))} is neither a .safetensors file nor a "
            "safetensors index (.json)",
            hint="give model.safetensors.index.json, a .safetensors file, or a size like 16GiB",
        )
    return parse_size(spec)


def safetensors_total(path: Path) -> int:
    """Bytes of the tensors a ``.safetensors`` file's header declares (no data read); a file
    that is not a valid safetensors file is one InputError naming ``--weights``."""
    from mmcli.dump.safetensors import read_header

    try:
        header = read_header(path)
    except InputError as exc:
        raise InputError(f"--weights: {exc.message}", hint=exc.hint) from None
    return sum(t.nbytes for t in header.tensors.values())


def estimate_panel(est: Estimate) -> Panel:
    """Every term of the estimate, right-aligned, under a title that says it is one."""
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("")
    table.add_column("", justify="right")
    for label, value in est.terms():
        table.add_row(label, f"{abs(value) / 2**30:,.2f} GiB")  # the label carries the sign
    return Panel(table, title="KV memory per GPU: an ESTIMATE", expand=False)


def parse_partition(text: str) -> tuple[int, ...]:
    """``--pp-layer-partition 8,12,12`` → ``(8, 12, 12)``."""
    parts = text.split(",")
    if len(text) > 10_000 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise InputError(
            f"--pp-layer-partition: cannot read {quoted(text)} as layer counts",
            hint="one count per stage, comma-separated, e.g. 8,12,12",
        )
    return tuple(int(p) for p in parts)
