"""`mmcli bench`: JSON shape, options, --from DUMP, the correctness gate; no timing asserts."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

import mmcli.bench.run as bench_run
from mmcli import bench
from mmcli.cli._output import emit_json
from mmcli.cli.main import app
from mmcli.dtypes import bench_dtype
from mmcli.dump import dump_encoder_outputs
from mmcli.embeddings import fast as _fast
from mmcli.embeddings import ops

runner = CliRunner()
TINY = ["--hidden", "64", "--placeholders", "16,40", "--min-time", "0.001"]
CASE_KEYS = {
    "op",
    "impl",
    "num_placeholders",
    "num_embeds",
    "hidden",
    "dtype",
    "layout",
    "median_us",
    "iqr_us",
    "gbps",
    "copy_fraction",
    "speedup_vs_reference",
    "host_syncs",
    "copy_us",
}


def invoke(*args: str) -> Any:
    return runner.invoke(app, ["bench", *args], catch_exceptions=False)


@pytest.mark.slow
def test_quick_json_fields() -> None:
    result = invoke("--quick", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {
        "device",
        "torch_version",
        "threads",
        "cases",
        "summary",
        "warnings",
        "failures",
        "exit_code",
    }
    cuda = doc["device"].startswith("cuda")
    assert doc["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")
    assert doc["torch_version"] == torch.__version__
    assert doc["threads"] == (None if cuda else 1)
    assert doc["failures"] == []
    assert doc["exit_code"] == 0
    assert all(isinstance(w, str) for w in doc["warnings"])
    cases = doc["cases"]
    assert {(c["op"], c["impl"], c["num_placeholders"]) for c in cases} == {
        (op, impl, n)
        for op in ("scatter", "gather")
        for impl in ("reference", "fast")
        for n in bench.QUICK_SUITE
    }
    assert len(cases) == 8
    for c in cases:
        assert set(c) == CASE_KEYS
        assert c["hidden"] == 4096
        assert c["dtype"] == "bfloat16"
        assert c["layout"] == "interleaved"
        mask = bench.make_mask(c["num_placeholders"], "interleaved")
        assert c["num_embeds"] == int(mask.sum())
        for key in ("median_us", "gbps", "copy_fraction", "copy_us", "speedup_vs_reference"):
            assert isinstance(c[key], float) and c[key] > 0 and math.isfinite(c[key]), key
        assert isinstance(c["iqr_us"], float) and c["iqr_us"] >= 0
        if c["impl"] == "reference":
            assert c["speedup_vs_reference"] == 1.0
        if cuda:
            assert isinstance(c["host_syncs"], int)
            if c["impl"] == "fast":
                assert c["host_syncs"] == 0
        else:
            assert c["host_syncs"] is None
    summary = {(s["op"], s["impl"]): s for s in doc["summary"]}
    assert set(summary) == {
        (op, impl) for op in ("scatter", "gather") for impl in ("reference", "fast")
    }
    assert summary[("scatter", "reference")]["geomean_speedup_vs_reference"] == pytest.approx(1.0)
    assert all(s["cases"] == 2 for s in summary.values())


def test_table_output() -> None:
    result = invoke("--device", "cpu", *TINY, "--layout", "contiguous,random")
    assert result.exit_code == 0, result.stderr
    assert "mmcli bench · cpu · bfloat16 · hidden 64" in result.stdout
    assert "fast scatter:" in result.stdout
    assert "fast gather:" in result.stdout
    assert "contiguous" in result.stdout and "random" in result.stdout


def test_options_select_cases() -> None:
    result = invoke(
        "--device", "cpu", *TINY, "--impl", "fast", "--op", "gather", "--dtype", "fp16",
        "--layout", "contiguous", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    cases = json.loads(result.stdout)["cases"]
    assert [(c["op"], c["impl"], c["num_placeholders"]) for c in cases] == [
        ("gather", "fast", 16),
        ("gather", "fast", 40),
    ]
    assert {c["dtype"] for c in cases} == {"float16"}
    assert [c["num_embeds"] for c in cases] == [14, 38]
    # without the reference in the run there is nothing to compare with
    assert all(c["speedup_vs_reference"] is None for c in cases)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--placeholders", "abc"], "error: --placeholders: 'abc' is not a positive integer"),
        (["--placeholders", "0"], "error: --placeholders: '0' is not a positive integer"),
        (["--placeholders", ","], "error: --placeholders is empty"),
        (["--hidden", "0"], "error: --hidden must be at least 1, got 0"),
        (["--device", "tpu:0"], "error: unknown device 'tpu:0'"),
        (["--impl", "nope"], "error: --impl: unknown value 'nope'"),
        (["--op", "scan"], "error: --op: unknown value 'scan'"),
        (["--layout", "diagonal"], "error: --layout: unknown value 'diagonal'"),
        (["--dtype", "int8"], "error: unknown dtype 'int8'"),
        (["--min-time", "0"], "error: --min-time must be a positive number of seconds, got 0.0"),
        (["--threads", "0"], "error: --threads must be at least 1, got 0"),
        (
            ["--from", "x.safetensors", "--placeholders", "8", "--layout", "random"],
            "error: --placeholders, --layout cannot be combined with --from",
        ),
        (["--placeholders", "2000000000"], "error: the largest case needs about"),
        (["--placeholders", "100000000000"], "error: --placeholders: '100000000000' is too large"),
        (["--placeholders", "²"], "error: --placeholders: '²' is not a positive integer"),
        (["--placeholders", "١٢"], "error: --placeholders: '١٢' is not a positive integer"),
        (["--placeholders", ",".join(map(str, range(1, 66)))], "error: --placeholders: 65 sizes"),
        (["--hidden", str(10**400)], "error: --hidden must be at most 2,147,483,647, got a 401-"),
        (["--threads", "100000"], "error: --threads must be at most"),
        (["--threads", str(2**40)], "error: --threads must be at most"),
        (["--min-time", "inf"], "error: --min-time must be at most 60 seconds, got inf"),
        (["--min-time", "1e400"], "error: --min-time must be at most 60 seconds, got inf"),
        (["--min-time", "61"], "error: --min-time must be at most 60 seconds, got 61.0"),
        (["--layout", ""], "error: --layout is empty"),
        (["--layout", " , "], "error: --layout is empty"),
        (["--impl", ""], "error: --impl is empty"),
        (["--op", ""], "error: --op is empty"),
    ],
)
def test_bad_options_exit_2(args: list[str], error: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith(error)
    assert lines[1].startswith("hint: ")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_exits_2() -> None:
    result = invoke("--device", "cuda")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: device 'cuda' was asked for but CUDA is not available")


def test_missing_dump_exits_2(tmp_path: Path) -> None:
    result = invoke("--from", str(tmp_path / "missing.safetensors"))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr


def _dump(path: Path, masks: list[list[bool]], rows: list[int] | None = None) -> Path:
    counts = rows if rows is not None else [sum(m) for m in masks]
    embeds = [torch.randn(n, 32) for n in counts]
    dump_encoder_outputs(path, embeds, is_embed=[torch.tensor(m, dtype=torch.bool) for m in masks])
    return path


def test_from_dump_uses_real_shapes_and_masks(tmp_path: Path) -> None:
    dump = _dump(tmp_path / "d.safetensors", [[True] * 10 + [False], [False, True] * 6])
    result = invoke(
        "--from", str(dump), "--device", "cpu", "--min-time", "0.001", "--format", "json"
    )
    assert result.exit_code == 0, result.stderr
    cases = json.loads(result.stdout)["cases"]
    assert len(cases) == 8
    by_item = {(c["item"], c["op"], c["impl"]): c for c in cases}
    first = by_item[(0, "scatter", "fast")]
    assert (first["num_placeholders"], first["num_embeds"], first["hidden"]) == (11, 10, 32)
    assert first["layout"] == "dump"
    assert first["dtype"] == "float32"
    second = by_item[(1, "gather", "reference")]
    assert (second["num_placeholders"], second["num_embeds"]) == (12, 6)


def test_from_dump_stacked_and_without_masks(tmp_path: Path) -> None:
    dump = tmp_path / "stacked.safetensors"
    dump_encoder_outputs(dump, torch.randn(2, 5, 16).bfloat16())
    result = invoke(
        "--from", str(dump), "--device", "cpu", "--min-time", "0.001", "--format", "json"
    )
    assert result.exit_code == 0, result.stderr
    cases = json.loads(result.stdout)["cases"]
    assert {(c["item"], c["num_placeholders"], c["num_embeds"], c["dtype"]) for c in cases} == {
        (0, 5, 5, "bfloat16"),
        (1, 5, 5, "bfloat16"),
    }


def test_from_dump_with_a_bad_item_exits_2(tmp_path: Path) -> None:
    dump = _dump(tmp_path / "bad.safetensors", [[True] * 4, [True, False, True]], rows=[4, 3])
    result = invoke("--from", str(dump), "--device", "cpu")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {dump}: item 1: is_embed has 2 True positions but embeds has 3 rows",
        "hint: run `mmcli check-embeddings` on the dump to see every problem",
    ]


def test_an_implementation_that_disagrees_is_not_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _fast.scatter

    def broken(embeds: torch.Tensor, is_embed: torch.Tensor) -> torch.Tensor:
        out = real(embeds, is_embed)
        out[0] = 0
        return out

    monkeypatch.setattr(_fast, "scatter", broken)
    result = invoke("--device", "cpu", *TINY, "--format", "json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == 1
    assert doc["failures"] == [
        "scatter fast 16×64 interleaved: result differs from the reference",
        "scatter fast 40×64 interleaved: result differs from the reference",
    ]
    assert not [c for c in doc["cases"] if (c["op"], c["impl"]) == ("scatter", "fast")]
    assert "error: scatter fast 16×64 interleaved: result differs from the reference" in (
        result.stderr
    )


def test_help_carries_an_example() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    assert "mmcli bench --quick --format json" in result.stdout


def test_masks_of_each_layout() -> None:
    assert int(bench.make_mask(576, "interleaved").sum()) == 552
    assert int(bench.make_mask(2304, "interleaved").sum()) == 2256
    contiguous = bench.make_mask(576, "contiguous")
    assert _fast.true_runs(contiguous) == [(1, 575)]
    random = bench.make_mask(2304, "random")
    assert torch.equal(random, bench.make_mask(2304, "random"))  # seeded
    assert 0.85 < float(random.float().mean()) < 0.95
    assert bench.make_mask(1, "interleaved").tolist() == [True]


def test_parsers() -> None:
    assert bench.parse_sizes(" 576, 2304,576") == (576, 2304)
    assert bench.parse_choices("fast,REFERENCE,fast", "--impl", ops.IMPLS) == (
        "fast",
        "reference",
    )
    assert bench_dtype("bfloat16") is torch.bfloat16


def test_options_defaults_and_quick() -> None:
    full = bench.BenchOptions.parse(device="cpu")
    assert (full.sizes, full.layouts, full.hidden, full.min_time) == (
        bench.SUITE,
        ("interleaved",),
        4096,
        0.2,
    )
    assert (full.impls, full.op_names, full.threads, full.dtype) == (
        ("reference", "fast"),
        ("scatter", "gather"),
        1,
        None,
    )
    quick = bench.BenchOptions.parse(device="cpu", quick=True, dtype="fp16")
    assert (quick.sizes, quick.min_time, quick.dtype) == (bench.QUICK_SUITE, 0.05, torch.float16)
    given = bench.BenchOptions.parse(device="cpu", quick=True, placeholders="8", min_time=1.0)
    assert (given.sizes, given.min_time) == ((8,), 1.0)
    dump = bench.BenchOptions.parse(device="cpu", from_dump="d.safetensors", quick=True)
    assert (dump.from_dump, dump.dtype, dump.min_time) == ("d.safetensors", None, 0.05)


def test_cli_prints_the_results_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Fixed timings make the document reproducible: the CLI's JSON is the library's to_json().
    def fixed(fn: object, device: object, min_time: float, *, threads: int = 1) -> list[float]:
        return [1e-6, 2e-6, 4e-6]

    monkeypatch.setattr(bench_run, "sample", fixed)
    args = ["--device", "cpu", "--hidden", "8", "--placeholders", "9", "--layout", "random"]
    options = bench.BenchOptions.parse(device="cpu", hidden=8, placeholders="9", layout="random")
    result = bench_run.run(options.workloads(), options)
    assert result.exit_code == 0
    emit_json(result.to_json())
    expected = capsys.readouterr().out
    cli = invoke(*args, "--format", "json")
    assert cli.exit_code == 0, cli.stderr
    assert cli.stdout == expected
    doc = json.loads(cli.stdout)
    assert doc["exit_code"] == 0
    assert [(c["op"], c["impl"], c["median_us"], c["iqr_us"]) for c in doc["cases"]] == [
        (op, impl, 2.0, 3.0) for op in ("scatter", "gather") for impl in ("reference", "fast")
    ]


def test_from_dump_too_large_hints_what_from_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --from, the memory refusal must not suggest --placeholders or --hidden, which
    --from forbids."""
    import mmcli.bench.workloads as workloads

    monkeypatch.setattr(workloads, "available_bytes", lambda device: 1024)
    dump = _dump(tmp_path / "d.safetensors", [[True] * 10])
    result = invoke("--from", str(dump), "--device", "cpu", "--min-time", "0.001")
    assert result.exit_code == 2, result.stderr
    error, hint = result.stderr.splitlines()
    assert error.startswith("error: the largest case needs about")
    assert hint.startswith("hint: --from times the dump's items as they are")
    assert "--placeholders" not in hint and "--hidden" not in hint


def test_memory_message_prints_any_size() -> None:
    from mmcli.bench.workloads import _gib

    assert _gib(3 * 2**29) == "1.5 GiB"
    assert _gib(0) == "0.0 GiB"
    assert _gib(10**400) == "over 100,000,000,000 GiB"


def test_threads_are_bounded_by_the_usable_cpus() -> None:
    cpus = bench.options.usable_cpus()
    assert bench.BenchOptions.parse(device="cpu", threads=cpus).threads == cpus
    with pytest.raises(bench.options.InputError, match="--threads must be at most"):
        bench.BenchOptions.parse(device="cpu", threads=cpus + 1)


def test_from_a_float8_dump_is_refused_unless_converted(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    path = tmp_path / "f8.safetensors"
    items = {"mm_embeddings.0": torch.zeros(4, 8).to(torch.float8_e4m3fn)}
    save_file(items, str(path), metadata={"format": "mm_dump", "format_version": "1"})
    runner = CliRunner()
    result = runner.invoke(app, ["bench", "--from", str(path), "--quick"])
    assert result.exit_code == 2
    assert "item 0 is float8_e4m3fn" in result.stderr
    converted = runner.invoke(app, ["bench", "--from", str(path), "--quick", "--dtype", "bf16"])
    assert converted.exit_code == 0, converted.stderr


def test_bench_collects_cycles_though_the_cli_runs_without_the_collector() -> None:
    """``python -m mmcli`` turns the cyclic collector off (a run builds millions of acyclic
    objects); bench turns it back on, since timing leaves cycles that hold tensors."""
    import gc

    gc.disable()
    try:
        result = invoke("--quick", "--op", "scatter", "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert gc.isenabled()
    finally:
        gc.enable()


def test_the_cli_entry_point_runs_without_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import signal

    import mmcli.__main__ as entry

    seen: list[bool] = []

    def run() -> None:
        seen.append(gc.isenabled())
        raise SystemExit(0)

    monkeypatch.setattr("mmcli.cli.main.main", run)
    handler = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit):
            entry.main()
    finally:
        gc.enable()
        signal.signal(signal.SIGINT, handler)  # the entry point ignores Ctrl-C on its way out
    assert seen == [False]


def test_the_sync_debug_modes_prototype_warning_is_not_a_sync() -> None:
    # Messages as torch's sync debug mode words them (c10/cuda warn_or_error_on_sync and the
    # warning torch.cuda.set_sync_debug_mode gives on its first use in a process).
    from mmcli.bench.timing import host_syncs_in

    prototype = (
        "Synchronization debug mode is a prototype feature and does not yet detect all "
        "synchronizing operations (Triggered internally at torch/csrc/cuda/Module.cpp:1003.)"
    )
    sync = "called a synchronizing CUDA operation (Triggered internally at c10/cuda/...)"
    assert host_syncs_in([prototype]) == 0
    assert host_syncs_in([prototype, sync, sync]) == 2


def test_a_noisy_copy_baseline_is_warned_about(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every "of copy" figure divides by the copy's median: a noisy copy (once, "of copy
    965 %") is named, even when the implementations' own timings are steady."""

    def timed(fn: Any, device: object, min_time: float, *, threads: int = 1) -> list[float]:
        if getattr(fn, "__name__", "") == "clone":  # the copy ceiling: source.clone
            return [1e-6, 1e-6, 10e-6, 10e-6]
        return [2e-6, 2e-6, 2e-6, 2e-6]

    monkeypatch.setattr(bench_run, "sample", timed)
    options = bench.BenchOptions.parse(device="cpu", hidden=8, placeholders="9")
    result = bench_run.run(options.workloads(), options)
    spread = bench_run.summarise([1e-6, 1e-6, 10e-6, 10e-6] * bench_run.ROUNDS).spread
    assert result.warnings == [
        f"{op} copy 9×8 interleaved: IQR {spread:.0%} of the median (a busy machine? rerun, or "
        "raise --min-time)"
        for op in ("scatter", "gather")
    ]


# -- third-party warnings: out of the report, once each as a note on stderr -----------------

#: What torch says on a machine without a GPU, with a CUDA build: a Python warning when asked
#: whether CUDA is available, a log record when torch.utils.benchmark loads cpp_extension.
NO_DRIVER = "CUDA initialization: Found no NVIDIA driver on your system (injected)"
NO_RUNTIME = "No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda' (injected)"


def _torch_without_a_gpu() -> bool:
    import logging
    import warnings

    warnings.warn(NO_DRIVER, UserWarning, stacklevel=2)
    logging.getLogger("torch.utils.cpp_extension").warning(NO_RUNTIME)
    return False


def test_torch_warnings_stay_out_of_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    from torch.utils.benchmark import Timer

    real = Timer.blocked_autorange

    def noisy(self: Timer, *args: Any, **kwargs: Any) -> Any:  # every timing warns
        warnings.warn("torch.utils.benchmark says so (injected)", FutureWarning, stacklevel=2)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.cuda, "is_available", _torch_without_a_gpu)
    monkeypatch.setattr(Timer, "blocked_autorange", noisy)
    result = invoke("--device", "auto", *TINY, "--op", "scatter", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert "injected" not in result.stdout
    assert json.loads(result.stdout)["device"] == "cpu"
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [
        f"note: UserWarning: {NO_DRIVER}",
        "note: FutureWarning: torch.utils.benchmark says so (injected)",
        f"note: torch.utils.cpp_extension: {NO_RUNTIME}",
    ]


@pytest.mark.slow  # a fresh interpreter, as a user runs it (no pytest catching warnings)
def test_torch_warnings_are_notes_in_a_real_run() -> None:
    import subprocess
    import sys

    code = (
        "import logging, sys, warnings, torch\n"
        "def is_available():\n"
        f"    warnings.warn({NO_DRIVER!r})\n"
        f"    logging.getLogger('torch.utils.cpp_extension').warning({NO_RUNTIME!r})\n"
        "    return False\n"
        "torch.cuda.is_available = is_available\n"
        f"sys.argv = ['mmcli', 'bench', '--op', 'scatter', *{TINY!r}]\n"
        "from mmcli.__main__ import main\n"
        "main()\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "mmcli bench · cpu" in proc.stdout and "injected" not in proc.stdout
    said = [line for line in proc.stderr.splitlines() if "injected" in line]
    assert said == [
        f"note: UserWarning: {NO_DRIVER}",
        f"note: torch.utils.cpp_extension: {NO_RUNTIME}",
    ]


def test_notes_restore_torch_logging_and_are_dropped_on_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import logging
    import warnings

    from mmcli.cli._notes import third_party_notes

    torch_logger = logging.getLogger("torch")
    before = (list(torch_logger.handlers), torch_logger.propagate)
    with pytest.raises(ValueError), third_party_notes():  # the command's error says it all
        warnings.warn("dropped (injected)", stacklevel=1)
        raise ValueError
    assert (torch_logger.handlers, torch_logger.propagate) == before
    assert "injected" not in capsys.readouterr().err
