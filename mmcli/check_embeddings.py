"""The ``check-embeddings`` engine: stream a dump item by item, check it, time every stage."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from mmcli._version import __version__
from mmcli.devices import synchronize
from mmcli.dump.io import load_dump
from mmcli.embeddings.diagnosis import Diagnosis, ItemStats
from mmcli.embeddings.ops import Impl
from mmcli.errors import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_OK, InputError
from mmcli.findings import Finding, count

Status = Literal["ok", "failed", "error"]
STAGES = ("load", "check", "scatter", "gather")


@dataclass
class FileReport:
    """The result of checking one file."""

    path: str
    status: Status
    items: list[ItemStats] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    error: str | None = None
    hint: str | None = None

    @property
    def errors(self) -> int:
        """Error findings."""
        return count(self.findings, "error")

    @property
    def warnings(self) -> int:
        """Warning findings."""
        return count(self.findings, "warning")

    def item_status(self, index: int) -> str:
        """``error``, ``warning`` or ``ok`` for one item, from its findings."""
        severities = {f.severity for f in self.findings if f.item == index}
        return "error" if "error" in severities else "warning" if "warning" in severities else "ok"

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object: its status, items, findings and stage timings (ms, to three
        decimals), plus ``error: {message, hint}`` for a file that could not be checked."""
        doc: dict[str, Any] = {
            "path": self.path,
            "status": self.status,
            "items": [s.to_json() for s in self.items],
            "findings": [f.to_json(location="item") for f in self.findings],
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }
        if self.status == "error":
            doc["error"] = {"message": self.error, "hint": self.hint}
        return doc


def find_files(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Expand files and directories (searched recursively for ``*.safetensors``, sorted).

    A directory is always searched, whatever its name; matches that are themselves
    directories are skipped. An explicitly named file is checked whatever its suffix.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            matches = sorted(p for p in path.rglob("*.safetensors") if p.is_file())
            if not matches:
                raise InputError(
                    f"{path}: directory holds no *.safetensors files",
                    hint="give dump files, or a directory that contains some",
                )
            found.extend(matches)
        elif path.exists():
            found.append(path)
        else:
            try:
                path.stat()
            except FileNotFoundError:
                raise InputError(
                    f"{path}: no such file or directory", hint="check the path"
                ) from None
            except OSError as exc:  # exists() hides why: a symlink loop, a permission
                raise InputError(
                    f"{path}: cannot read: {exc.strerror or type(exc).__name__}",
                    hint="check the path and any symbolic links on it",
                ) from None
            found.append(path)
    unique: dict[Path, None] = {}
    for p in found:
        unique.setdefault(p, None)
    return list(unique)


class _Clock:
    """Accumulates milliseconds per stage, synchronising the device before reading the time."""

    def __init__(self, device: torch.device, timings: dict[str, float]) -> None:
        self.device = device
        self.timings = timings

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        synchronize(self.device)
        start = time.perf_counter()
        try:
            yield
        finally:
            synchronize(self.device)
            self.timings[stage] += (time.perf_counter() - start) * 1000.0


def check_file(
    path: str | os.PathLike[str],
    *,
    device: torch.device,
    expected_items: int | None = None,
    hidden_size: int | None = None,
    model_dtype: str | torch.dtype | None = None,
    strict: bool = False,
    impl: Impl = "reference",
) -> FileReport:
    """Check one dump; a file that cannot be read or is not a dump gives status ``error``.

    Options override the dump's metadata. Items are read one at a time onto ``device``.
    """
    report = FileReport(path=str(path), status="ok")
    clock = _Clock(device, report.timings_ms)
    try:
        _run(report, clock, Path(path), device, expected_items, hidden_size, model_dtype, impl)
    except InputError as exc:
        report.status = "error"
        report.error = exc.message
        report.hint = exc.hint
        return report
    if report.errors or (strict and report.warnings):
        report.status = "failed"
    return report


def _run(
    report: FileReport,
    clock: _Clock,
    path: Path,
    device: torch.device,
    expected_items: int | None,
    hidden_size: int | None,
    model_dtype: str | torch.dtype | None,
    impl: Impl,
) -> None:
    with clock("load"):
        dump = load_dump(path, device=device)
        expected = expected_items if expected_items is not None else dump.expected_num_items
        hidden = hidden_size if hidden_size is not None else dump.hidden_size
        dtype = model_dtype if model_dtype is not None else dump.model_dtype
    diagnosis = Diagnosis(
        expected_num_items=expected, hidden_size=hidden, model_dtype=dtype, fetch=dump.embedding
    )
    stacked = dump.stacked_shape()
    if stacked is not None and not diagnosis.stacked(stacked):
        report.findings = diagnosis.finish(dump.num_items, num_masks=dump.layout.num_masks)
        return
    for index in range(dump.num_items):
        with clock("load"):
            emb = dump.embedding(index)
            mask = dump.is_embed(index)
            stored = dump.placeholders(index)
        diagnosis.check(index, emb, mask, stored=stored, impl=impl, clock=clock)
        del emb, mask, stored
    with clock("check"):
        report.findings = diagnosis.finish(dump.num_items, num_masks=dump.layout.num_masks)
    report.items = diagnosis.items


def exit_code(reports: Sequence[FileReport]) -> int:
    """The worst outcome: 2 if any file could not be checked, else 1 if any failed, else 0."""
    if any(r.status == "error" for r in reports):
        return EXIT_BAD_INPUT
    if any(r.status == "failed" for r in reports):
        return EXIT_FINDINGS
    return EXIT_OK


def summary(reports: Sequence[FileReport]) -> dict[str, int]:
    """Files, items, error and warning findings, over every report."""
    return {
        "files": len(reports),
        "items": sum(len(r.items) for r in reports),
        "errors": sum(r.errors for r in reports),
        "warnings": sum(r.warnings for r in reports),
    }


def run_document(reports: Sequence[FileReport], device: torch.device | str) -> dict[str, Any]:
    """The JSON document of a whole run: version, device, each file's report, the totals and
    the exit code."""
    return {
        "mmcli_version": __version__,
        "device": str(device),
        "files": [r.to_json() for r in reports],
        "summary": summary(reports),
        "exit_code": exit_code(reports),
    }
