"""The ``check-embeddings`` engine: stream a dump item by item, check it, time every stage."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch

from mmcli._version import __version__
from mmcli.devices import synchronize
from mmcli.dump.context import read_context
from mmcli.dump.io import Dump, load_dump, read_tensor
from mmcli.embeddings.diagnosis import Diagnosis, ItemStats
from mmcli.embeddings.ops import Impl
from mmcli.errors import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_INTERNAL, EXIT_OK, InputError
from mmcli.findings import Finding, count
from mmcli.text import human_bytes, printable

Status = Literal["ok", "failed", "error"]
STAGES = ("load", "check", "scatter", "gather")
#: At most this many items in one dump: each is read and judged on its own (tens of
#: microseconds), so this many take a few seconds; a header may name ten times as many
#: (a million zero-row items fit in its 100 MB), which would take minutes.
MAX_ITEMS = 100_000
#: An item's status from the worst severity among its findings (info counts as ok).
_STATUSES = ("ok", "warning", "error")
_RANK = {"warning": 1, "error": 2}


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
    #: The error is a bug in mmcli (exit 3), not a problem with the file.
    internal: bool = False

    @property
    def errors(self) -> int:
        """Error findings."""
        return count(self.findings, "error")

    @property
    def warnings(self) -> int:
        """Warning findings."""
        return count(self.findings, "warning")

    def item_status(self, index: int) -> str:
        """``error``, ``warning`` or ``ok`` for one item: the worst of its own findings and of
        the findings about the whole file (``item`` None: the prompt's placeholders, the item
        count, a hidden size several items share), which name no single item but concern
        every one (an item is not ``ok`` in a dump the engine would refuse)."""
        severities = {f.severity for f in self.findings if f.item == index or f.item is None}
        return "error" if "error" in severities else "warning" if "warning" in severities else "ok"

    def item_statuses(self) -> dict[int, str]:
        """:meth:`item_status` of every item, in one pass over the findings."""
        worst: dict[int | None, int] = {}
        for f in self.findings:
            rank = _RANK.get(f.severity, 0)
            if rank > worst.get(f.item, 0):
                worst[f.item] = rank
        whole = worst.get(None, 0)
        return {s.index: _STATUSES[max(worst.get(s.index, 0), whole)] for s in self.items}

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object: its status, items (each with its :meth:`item_status`, as
        the table shows it), findings and stage timings (ms, to three decimals), plus
        ``error: {message, hint}`` for a file that could not be checked."""
        statuses = self.item_statuses()
        doc: dict[str, Any] = {
            "path": self.path,
            "status": self.status,
            "items": [{**s.to_json(), "status": statuses[s.index]} for s in self.items],
            "findings": [f.to_json(location="item") for f in self.findings],
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }
        if self.status == "error":
            doc["error"] = {"message": self.error, "hint": self.hint}
        return doc


def find_files(
    paths: Sequence[str | os.PathLike[str]], problems: list[FileReport] | None = None
) -> list[Path]:
    """Expand files and directories (searched recursively for ``*.safetensors``, sorted).

    A directory is always searched, whatever its name, with an iterative walk (any depth);
    matches that are themselves directories are skipped, and symbolic links to directories
    are not followed. An explicitly named file is checked whatever its suffix. A path that
    cannot be searched (missing, a directory that cannot be read, one with no dumps) is an
    InputError, or, when ``problems`` is given, an error report appended to it while the
    other paths are still searched.
    """
    found: list[Path] = []

    def problem(path: Path | str, message: str, hint: str) -> None:
        error = f"{printable(str(path))}: {message}" if str(path) else message
        if problems is None:
            raise InputError(error, hint=hint)
        problems.append(FileReport(path=str(path), status="error", error=error, hint=hint))

    for raw in paths:
        if not os.fspath(raw):  # Path("") is "." and would search the working directory
            problem("", "empty path ''", "give a file or directory name")
            continue
        path = Path(raw)
        try:
            st = path.stat()
        except FileNotFoundError:
            if path.is_symlink():
                problem(path, "broken symbolic link", "check where the link points")
            else:
                problem(path, "no such file or directory", "check the path")
            continue
        except OSError as exc:  # a symlink loop, a permission, a name too long
            problem(
                path,
                f"cannot read: {exc.strerror or type(exc).__name__}",
                "check the path and any symbolic links on it",
            )
            continue
        if not stat.S_ISDIR(st.st_mode):
            found.append(path)
            continue
        before = len(problems) if problems is not None else 0
        matches = sorted(_walk(path, problem))
        if not matches and (problems is None or len(problems) == before):
            problem(
                path,
                "directory holds no *.safetensors files",
                "give dump files, or a directory that contains some",
            )
        found.extend(matches)
    unique: dict[Path, None] = {}
    for p in found:
        unique.setdefault(p, None)
    return list(unique)


def _walk(root: Path, problem: Callable[[Path | str, str, str], None]) -> list[Path]:
    """Every ``*.safetensors`` below ``root`` that is not a directory, depth-first with an
    explicit stack (a tree 10,000 levels deep is fine); unreadable directories go to
    ``problem``."""
    matches: list[Path] = []
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                listed = list(entries)
        except OSError as exc:
            problem(
                directory,
                f"cannot read directory: {exc.strerror or type(exc).__name__}",
                "check the directory's permissions; the files that could be read were checked",
            )
            continue
        for entry in listed:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                stack.append(Path(entry.path))
            elif entry.name.endswith(".safetensors"):
                try:
                    if entry.is_dir():  # a symbolic link to a directory
                        continue
                except OSError:
                    pass
                matches.append(Path(entry.path))
    return matches


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
        return _failed(report, exc.message, exc.hint)
    except MemoryError:
        return _failed(
            report,
            f"{printable(str(path))}: ran out of memory while checking it",
            "check it on a machine with more free memory",
        )
    except OSError as exc:
        return _failed(
            report,
            f"{printable(str(path))}: cannot read: {exc.strerror or type(exc).__name__}",
            "check the file's permissions and the disk it is on",
        )
    except Exception as exc:  # a bug: reported as this file's error, the others still run
        if os.environ.get("MMCLI_DEBUG") == "1":
            raise
        report.internal = True
        return _failed(
            report,
            f"{printable(str(path))}: internal error (a bug in mmcli): "
            f"{type(exc).__name__}: {printable(str(exc))}",
            "rerun with MMCLI_DEBUG=1 to see the traceback, and report it",
        )
    if report.errors or (strict and report.warnings):
        report.status = "failed"
    return report


def _failed(report: FileReport, message: str, hint: str | None) -> FileReport:
    report.status = "error"
    report.error = message
    report.hint = hint
    report.items, report.findings = [], []
    return report


def _check_memory(dump: Dump, device: torch.device) -> None:
    """Refuse, before reading any item, a dump whose largest item cannot be checked in the
    memory ``device`` has: an item, its scattered copy over its mask's positions, the
    gathered copy, and (for float8 and other rare dtypes) an fp32 copy."""
    tensors = dump.header.tensors
    worst, where = 0, 0
    for index in range(dump.num_items if not (dump.layout.stacked or dump.layout.merged) else 1):
        if dump.layout.stacked or dump.layout.merged:
            info = tensors["mm_embeddings"]
            rows = info.shape[0] if dump.layout.merged else (info.shape[1:] or (1,))[0]
            count = max((info.shape or (1,))[0], 1)  # a 0-D stacked tensor is one value
            nbytes = info.nbytes if dump.layout.merged else info.nbytes // count
            numel = info.numel if dump.layout.merged else info.numel // count
        else:
            info = tensors[f"mm_embeddings.{index}"]
            rows, nbytes, numel = (info.shape or (1,))[0], info.nbytes, info.numel
        mask = tensors.get(f"is_embed.{index}")
        positions = mask.numel if mask is not None else rows
        row = nbytes // max(rows, 1)
        stored = tensors.get(f"placeholders.{index}")
        need = 2 * nbytes + 2 * positions * row + 4 * numel
        need += (mask.nbytes if mask is not None else 0) + (stored.nbytes if stored else 0)
        if need > worst:
            worst, where = need, index
    if worst >= 64 << 20:
        from mmcli.devices import require_memory

        require_memory(
            worst,
            device,
            f"{printable(str(dump.path))}: checking item {where} ({human_bytes(worst)} with its "
            "scattered and gathered copies)",
            hint="check the dump on a machine (or device) with more free memory",
        )


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
        if dump.num_items > MAX_ITEMS:  # refused before any item is read
            raise InputError(
                f"{printable(str(path))}: {dump.num_items:,} items, more than the "
                f"{MAX_ITEMS:,} check-embeddings checks in one dump",
                hint=f"split the dump into files of at most {MAX_ITEMS:,} items",
            )
        context = read_context(dump.header, read_tensor)
        if hidden_size is not None:
            context = replace(context, hidden_size_source="--hidden-size")
    diagnosis = Diagnosis(
        expected_num_items=expected,
        hidden_size=hidden,
        model_dtype=dtype,
        fetch=dump.embedding,
        context=context,
    )
    _check_memory(dump, device)
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
    """The worst outcome: 3 if checking any file hit a bug in mmcli, else 2 if any file could
    not be checked, else 1 if any failed, else 0."""
    if any(r.internal for r in reports):
        return EXIT_INTERNAL
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
