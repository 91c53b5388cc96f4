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
    """Memory free for new tensors on ``device`` (None when it cannot be told).

    On CPU: the kernel's ``MemAvailable``, lowered to what the process's cgroup (a container's
    memory limit) still allows.
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type != "cpu":
        return None
    available: int | None = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    limit = _cgroup_room()
    if limit is not None:
        available = limit if available is None else min(available, limit)
    return available


def _cgroup_room() -> int | None:
    """Bytes the cgroup memory limit (v2 or v1) still allows (None without a limit)."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = [ln.split(":", 2) for ln in f.read().splitlines() if ln.count(":") >= 2]
    except OSError:
        return None
    candidates: list[tuple[str, str, str]] = []
    for _, controllers, rel in lines:
        rel = rel.rstrip("/")
        if controllers == "":
            candidates += [(f"/sys/fs/cgroup{rel}", "memory.max", "memory.current")]
        elif "memory" in controllers.split(","):
            for base in (f"/sys/fs/cgroup/memory{rel}", "/sys/fs/cgroup/memory"):
                candidates.append((base, "memory.limit_in_bytes", "memory.usage_in_bytes"))
    for base, limit_file, usage_file in candidates:
        try:
            with open(f"{base}/{limit_file}") as f:
                text = f.read().strip()
            if text == "max" or int(text) >= 1 << 60:
                continue
            with open(f"{base}/{usage_file}") as f:
                used = int(f.read().strip())
        except (OSError, ValueError):
            continue
        return max(int(text) - used, 0)
    return None


def require_memory(
    nbytes: int, device: torch.device, what: str, *, hint: str | None = None
) -> None:
    """Refuse (InputError, before allocating) work that needs ``nbytes`` on ``device`` when
    the device has less available; a device whose free memory cannot be told is trusted."""
    available = available_bytes(device)
    if available is not None and nbytes > available:
        from mmcli.text import human_bytes

        raise InputError(
            f"{what} needs about {human_bytes(nbytes)} on {device} but only "
            f"{human_bytes(available)} is available",
            hint=hint or "check it on a machine (or device) with more free memory",
        )
