"""Device selection and synchronisation, with clear errors for devices that are not there."""

from __future__ import annotations

import re

import torch

from mmcli.errors import InputError

_DEVICE = re.compile(r"^(auto|cpu|meta|cuda)(?::(\d+))?$")


def resolve_device(spec: str, *, allow_meta: bool = False) -> torch.device:
    """Turn ``auto|cpu|cuda|cuda:N`` (and ``meta`` when allowed) into a present device."""
    text = spec.strip().lower()
    match = _DEVICE.match(text)
    kinds = "auto, cpu, cuda, cuda:N" + (", meta" if allow_meta else "")
    if match is None or (match.group(1) in ("auto", "cpu", "meta") and match.group(2)):
        raise InputError(f"unknown device {spec!r}", hint=f"use one of: {kinds}")
    kind, index = match.group(1), match.group(2)
    if kind == "meta" and not allow_meta:
        raise InputError("the meta device holds no data and cannot run this check", hint=kinds)
    if kind == "auto":
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    if kind != "cuda":
        return torch.device(kind)
    if not torch.cuda.is_available():
        raise InputError(
            f"device {spec!r} was asked for but CUDA is not available here",
            hint="use --device cpu (or auto), or run on a machine with a CUDA GPU",
        )
    count = torch.cuda.device_count()
    ordinal = int(index) if index is not None else 0
    if ordinal >= count:
        raise InputError(
            f"device {spec!r} does not exist: this machine has {count} CUDA device(s)",
            hint=f"use cuda:0 … cuda:{count - 1}",
        )
    return torch.device("cuda", ordinal)


def synchronize(device: torch.device) -> None:
    """Wait for queued work on ``device`` (a no-op on CPU), so timings include it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def available_bytes(device: torch.device) -> int | None:
    """Memory free for new tensors on ``device`` (None when it cannot be told)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
