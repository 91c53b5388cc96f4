"""``mmcli check-embeddings``: every finding code, exit codes, JSON shape, paths, bad input."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from mmcli import dump_encoder_outputs
from mmcli.cli.main import app

runner = CliRunner()
SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "dumps"
H = 8


def run(*args: str) -> Any:
    return runner.invoke(app, ["check-embeddings", *args], catch_exceptions=False)


def run_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = run(*args, "--device", "cpu", "--format", "json")
    return result.exit_code, json.loads(result.stdout)


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def good_items() -> list[torch.Tensor]:
    return [rand(4, H, seed=1), rand(3, H, seed=2), rand(5, H, seed=3)]


def good_masks() -> list[torch.Tensor]:
    m0 = torch.tensor([1, 1, 0, 1, 1], dtype=torch.bool)  # an image-break position
    return [m0, torch.ones(3, dtype=torch.bool), torch.ones(5, dtype=torch.bool)]


Case = Callable[[Path], Path]


def dump(path: Path, items: Any = None, masks: Any = None, **kw: Any) -> Path:
    items = good_items() if items is None else items
    masks = good_masks() if masks is None else masks
    kw.setdefault("expected_num_items", 3)
    kw.setdefault("hidden_size", H)
    kw.setdefault("dtype", "float32")
    return dump_encoder_outputs(path, items, is_embed=masks, **kw)


def with_item(i: int, value: torch.Tensor) -> list[torch.Tensor]:
    items = good_items()
    items[i] = value
    return items


def with_mask(i: int, value: torch.Tensor) -> list[torch.Tensor]:
    masks = good_masks()
    masks[i] = value
    return masks


def nan_item() -> torch.Tensor:
    t = rand(3, H, seed=2)
    t[1, 2] = float("nan")
    return t


def zero_row_item() -> torch.Tensor:
    t = rand(3, H, seed=2)
    t[2] = 0
    return t


def stacked(p: Path, shape: tuple[int, ...]) -> Path:
    n = shape[0]
    return dump_encoder_outputs(p, rand(*shape), expected_num_items=n, hidden_size=shape[-1])


def four_outlier_items(scale: float) -> list[torch.Tensor]:
    return [rand(4, H, seed=s) * (scale if s == 3 else 1.0) for s in range(4)]


# code -> (a dump that triggers it, a near-identical dump that does not)
CASES: dict[str, tuple[Case, Case]] = {
    "item-count": (
        lambda p: dump(p, expected_num_items=4),
        lambda p: dump(p, expected_num_items=3),
    ),
    "item-ndim": (
        lambda p: dump(p, with_item(1, rand(1, 3, H, seed=2))),
        lambda p: dump(p, with_item(1, rand(3, H, seed=2))),
    ),
    "stacked-ndim": (lambda p: stacked(p, (12, H)), lambda p: stacked(p, (3, 4, H))),
    "hidden-size": (
        lambda p: dump(p, with_item(2, rand(5, H * 2, seed=3))),
        lambda p: dump(p, with_item(2, rand(5, H, seed=3))),
    ),
    "non-finite": (
        lambda p: dump(p, with_item(1, nan_item())),
        lambda p: dump(p, with_item(1, rand(3, H, seed=2))),
    ),
    "integer-dtype": (
        lambda p: dump(p, with_item(1, torch.ones(3, H, dtype=torch.int32))),
        lambda p: dump(p, with_item(1, torch.ones(3, H, dtype=torch.float32))),
    ),
    "mask-shape": (
        lambda p: dump(p, masks=with_mask(1, torch.ones(1, 3, dtype=torch.bool))),
        lambda p: dump(p, masks=with_mask(1, torch.ones(3, dtype=torch.bool))),
    ),
    "mask-dtype": (
        lambda p: dump(p, masks=with_mask(1, torch.ones(3, dtype=torch.int64))),
        lambda p: dump(p, masks=with_mask(1, torch.ones(3, dtype=torch.bool))),
    ),
    "mask-count": (
        lambda p: dump(p, masks=with_mask(1, torch.ones(4, dtype=torch.bool))),
        lambda p: dump(p, masks=with_mask(1, torch.tensor([1, 1, 0, 1], dtype=torch.bool))),
    ),
    "roundtrip": (
        lambda p: dump(p, placeholders=[rand(5, H, seed=9), None, None]),
        lambda p: dump(p, placeholders=[scattered(good_items()[0], good_masks()[0]), None, None]),
    ),
    "dtype-mix": (
        lambda p: dump(p, with_item(1, rand(3, H, seed=2).bfloat16())),
        lambda p: dump(p, with_item(1, rand(3, H, seed=2))),
    ),
    "empty-item": (
        lambda p: dump(p, with_item(1, rand(0, H)), with_mask(1, torch.zeros(0, dtype=torch.bool))),
        lambda p: dump(p, with_item(1, rand(1, H)), with_mask(1, torch.ones(1, dtype=torch.bool))),
    ),
    "zero-rows": (
        lambda p: dump(p, with_item(1, zero_row_item())),
        lambda p: dump(p, with_item(1, rand(3, H, seed=2))),
    ),
    "duplicate-items": (
        lambda p: dump(
            p,
            [rand(4, H, seed=1), rand(4, H, seed=1), rand(5, H, seed=3)],
            with_mask(1, torch.tensor([1, 1, 0, 1, 1]).bool()),
        ),
        lambda p: dump(
            p,
            [rand(4, H, seed=1), rand(4, H, seed=4), rand(5, H, seed=3)],
            with_mask(1, torch.tensor([1, 1, 0, 1, 1]).bool()),
        ),
    ),  # fmt: skip
    "norm-outlier": (
        lambda p: dump(p, four_outlier_items(50.0), [], expected_num_items=4),
        lambda p: dump(p, four_outlier_items(2.0), [], expected_num_items=4),
    ),
    "stacked-3d": (lambda p: stacked(p, (3, 4, H)), lambda p: dump(p)),
}


def scattered(emb: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = emb.new_full((mask.numel(), emb.shape[1]), float("nan"))
    out[mask] = emb
    return out


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_finding_code(tmp_path: Path, code: str) -> None:
    bad, good = CASES[code]
    _, doc = run_json(str(bad(tmp_path / "bad.safetensors")))
    found = doc["files"][0]["findings"]
    hit = [f for f in found if f["code"] == code]
    assert hit, found
    assert all(f["hint"] for f in hit)
    _, doc = run_json(str(good(tmp_path / "good.safetensors")))
    assert code not in {f["code"] for f in doc["files"][0]["findings"]}


def test_messages_carry_the_numbers(tmp_path: Path) -> None:
    path = dump(tmp_path / "d.safetensors", masks=with_mask(1, torch.ones(4, dtype=torch.bool)))
    code, doc = run_json(str(path))
    assert code == 1
    (finding,) = doc["files"][0]["findings"]
    assert finding == {
        "code": "mask-count",
        "severity": "error",
        "item": 1,
        "message": "mask for item 1 has 4 True positions but the item has 3 embedding rows",
        "hint": finding["hint"],
    }
    path = dump(tmp_path / "n.safetensors", with_item(1, nan_item()))
    _, doc = run_json(str(path))
    (finding,) = doc["files"][0]["findings"]
    assert finding["message"] == (
        "item 1 has 1 NaN and 0 inf values in 1 of 3 rows; first at (item 1, row 1, column 2)"
    )


def test_json_shape_and_exit_0(tmp_path: Path) -> None:
    code, doc = run_json(str(dump(tmp_path / "ok.safetensors")))
    assert code == 0
    assert set(doc) == {"mmcli_version", "device", "files", "summary", "exit_code"}
    assert doc["device"] == "cpu" and doc["exit_code"] == 0
    (f,) = doc["files"]
    assert f["status"] == "ok" and f["findings"] == []
    assert set(f["timings_ms"]) == {"load", "check", "scatter", "gather"}
    assert f["items"][0] == {
        "index": 0,
        "shape": [4, H],
        "dtype": "float32",
        "num_placeholders": 5,
        "num_embeds": 4,
        "finite": True,
        "status": "ok",
    }
    assert doc["summary"] == {"files": 1, "items": 3, "errors": 0, "warnings": 0}


def test_json_is_the_library_document(tmp_path: Path) -> None:
    # The CLI only renders: its JSON is run_document's, built from the FileReports.
    from mmcli.check_embeddings import check_file, run_document

    paths = [dump(tmp_path / "ok.safetensors"), tmp_path / "garbage.safetensors"]
    paths[1].write_bytes(b"not a dump")
    result = run(*map(str, paths), "--device", "cpu", "--format", "json")
    cli = json.loads(result.stdout)
    # On exit 2 the CLI adds the error document's keys: the first file that was not checked.
    error = {key: cli.pop(key) for key in ("error", "hint", "input")}
    assert error["input"] == str(paths[1]) and "absurd length" in error["error"]
    reports = [check_file(p, device=torch.device("cpu")) for p in paths]
    library = run_document(reports, torch.device("cpu"))
    for doc in (cli, library):
        for f in doc["files"]:
            f["timings_ms"] = dict.fromkeys(f["timings_ms"], 0.0)
    assert json.dumps(cli, indent=2) == json.dumps(library, indent=2)
    assert result.exit_code == library["exit_code"] == 2


def test_strict_turns_warnings_into_failures(tmp_path: Path) -> None:
    path = str(dump(tmp_path / "w.safetensors", with_item(1, zero_row_item())))
    assert run_json(path)[0] == 0
    code, doc = run_json(path, "--strict")
    assert code == 1 and doc["files"][0]["status"] == "failed"


def test_options_override_metadata(tmp_path: Path) -> None:
    path = str(dump(tmp_path / "d.safetensors"))
    assert run_json(path, "--expected-items", "2")[0] == 1
    assert run_json(path, "--hidden-size", "16")[0] == 1
    _, doc = run_json(path, "--dtype", "bf16")
    assert [f["code"] for f in doc["files"][0]["findings"]] == ["dtype-mix"]


def test_directories_several_paths_and_worst_exit_code(tmp_path: Path) -> None:
    root = tmp_path / "dumps"
    (root / "sub").mkdir(parents=True)
    dump(root / "a.safetensors")
    dump(root / "sub" / "b.safetensors", expected_num_items=4)
    (root / "c.safetensors").write_bytes(b"\x00" * 4)  # unreadable
    (root / "dir.safetensors").mkdir()  # a directory matching the glob is skipped
    (root / "notes.txt").write_text("x")
    result = run(str(root), "--device", "cpu", "--format", "json")
    doc = json.loads(result.stdout)
    paths = [Path(f["path"]).relative_to(root).as_posix() for f in doc["files"]]
    assert paths == ["a.safetensors", "c.safetensors", "sub/b.safetensors"]
    assert [f["status"] for f in doc["files"]] == ["ok", "error", "failed"]
    assert doc["files"][1]["error"]["message"].endswith("too short for the 8-byte header "
                                                        "length of a safetensors file")  # fmt: skip
    assert result.exit_code == doc["exit_code"] == 2
    assert result.stderr.startswith(f"error: {root / 'c.safetensors'}: file is 4 bytes")
    # Without the unreadable file the worst is a failed check.
    (root / "c.safetensors").unlink()
    assert run(str(root), "--device", "cpu").exit_code == 1


def test_directory_named_like_a_dump_is_searched(tmp_path: Path) -> None:
    d = tmp_path / "x.safetensors"
    d.mkdir()
    dump(d / "inner.safetensors")
    assert run_json(str(d))[0] == 0


def test_table_output_and_summary(tmp_path: Path) -> None:
    path = dump(tmp_path / "d.safetensors", masks=with_mask(1, torch.ones(4, dtype=torch.bool)))
    result = run(str(path), "--device", "cpu")
    assert result.exit_code == 1
    assert "mask-count" in result.stdout and "hint:" in result.stdout
    assert "[4, 8]" in result.stdout  # brackets survive Rich markup
    assert "timings on cpu: load" in result.stdout
    assert (
        result.stdout.strip().splitlines()[-1] == "1 file, 3 items, 1 error, 0 warnings (1 failed)"
    )
    quiet = run(str(path), "--device", "cpu", "--quiet")
    assert "timings" not in quiet.stdout and "mask-count" in quiet.stdout


def test_inputs_are_not_modified(tmp_path: Path) -> None:
    path = dump(tmp_path / "d.safetensors", with_item(1, nan_item()))
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    run_json(str(path))
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_samples() -> None:
    assert run_json(str(SAMPLES / "healthy.safetensors"))[0] == 0
    code, doc = run_json(str(SAMPLES))
    assert code == 1
    codes = {Path(f["path"]).stem: sorted({x["code"] for x in f["findings"]}) for f in doc["files"]}
    assert codes == {
        "batch_dim_kept": ["item-ndim"],
        "healthy": [],
        "hidden_size_mismatch": ["hidden-size"],
        "mask_off_by_one": ["mask-count"],
        "nan": ["non-finite"],
        "wrong_count": ["item-count"],
    }


def bad_file(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.safetensors"
    if kind == "truncated":
        dump(path)
        path.write_bytes(path.read_bytes()[:-10])
    elif kind == "absurd":
        path.write_bytes(struct.pack("<Q", 2**50) + b"{}")
    elif kind == "past-end":
        header = json.dumps({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})
        path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + b"\0" * 8)
    elif kind == "dtype":
        header = json.dumps({"t": {"dtype": "F99", "shape": [2], "data_offsets": [0, 8]}})
        path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + b"\0" * 8)
    elif kind == "metadata":
        header = json.dumps({"__metadata__": {"hidden_size": 4096}})
        path.write_bytes(struct.pack("<Q", len(header)) + header.encode())
    elif kind == "schema":
        save_file({"weight": torch.ones(2)}, str(path))
    elif kind == "directory-without-dumps":
        path = tmp_path / "empty"
        path.mkdir()
    elif kind == "missing":
        path = tmp_path / "nope.safetensors"
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("truncated", "past the end of the data"),
        ("absurd", f"header declares an absurd length of {2**50} bytes (>= 2^40)"),
        ("past-end", "past the end of the data"),
        ("dtype", 'has unknown dtype "F99"'),
        ("metadata", "__metadata__['hidden_size'] is a JSON int (4096), expected a string"),
        ("schema", "not an mm_dump file: unexpected keys [weight]; keys found: [weight]"),
        ("directory-without-dumps", "directory holds no *.safetensors files"),
        ("missing", "no such file or directory"),
    ],
)
def test_bad_input_is_one_line_and_a_hint(tmp_path: Path, kind: str, message: str) -> None:
    path = bad_file(tmp_path, kind)
    result = run(str(path), "--device", "cpu")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith(f"error: {path}: ") and message in lines[0]
    assert lines[1].startswith("hint: ")
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_absent_is_exit_2(tmp_path: Path) -> None:
    result = run(str(dump(tmp_path / "d.safetensors")), "--device", "cuda")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        "error: device 'cuda' was asked for but CUDA is not available here"
    )


@pytest.mark.cuda
def test_cuda_roundtrip(tmp_path: Path) -> None:
    result = run(str(dump(tmp_path / "d.safetensors")), "--device", "cuda", "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["device"] == "cuda:0"


@pytest.mark.cuda
def test_cuda_findings_match_cpu(tmp_path: Path) -> None:
    path = str(dump(tmp_path / "d.safetensors", with_item(1, nan_item())))
    _, cpu = run_json(path)
    result = run(path, "--device", "cuda", "--format", "json")
    gpu = json.loads(result.stdout)
    assert cpu["files"][0]["findings"] == gpu["files"][0]["findings"]


# -- one file's failure is that file's error: the others are still checked (issue 13) --------


def _three_good(tmp_path: Path) -> Path:
    root = tmp_path / "dumps"
    root.mkdir()
    for name in ("a", "b", "c"):
        dump(root / f"{name}.safetensors")
    return root


def test_permission_denied_file_is_isolated(tmp_path: Path, monkeypatch: Any) -> None:
    import os as os_module

    from mmcli.dump import safetensors

    root = _three_good(tmp_path)
    real_open = os_module.open

    def fake_open(path: Any, flags: int, *args: Any) -> int:
        if str(path).endswith("b.safetensors"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(safetensors.os, "open", fake_open)
    result = run(str(root), "--device", "cpu")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and "b.safetensors: cannot read: Permission denied" in lines[0]
    assert "a.safetensors  ok" in result.stdout and "c.safetensors  ok" in result.stdout
    code, doc = run_json(str(root))
    assert code == doc["exit_code"] == 2
    assert [f["status"] for f in doc["files"]] == ["ok", "error", "ok"]
    assert "Permission denied" in doc["files"][1]["error"]["message"]


def test_internal_error_in_one_file_is_isolated(tmp_path: Path, monkeypatch: Any) -> None:
    """A bug met in one file is that file's error (exit 3, the worst code); the others are
    checked and the JSON document is still printed."""
    from mmcli.embeddings.diagnosis.state import Diagnosis

    root = _three_good(tmp_path)
    real_check = Diagnosis.check
    calls = {"n": 0}

    def flaky(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 4:  # the first item of the second file
            raise RuntimeError("boom")
        return real_check(self, *args, **kwargs)

    monkeypatch.delenv("MMCLI_DEBUG", raising=False)
    monkeypatch.setattr(Diagnosis, "check", flaky)
    code, doc = run_json(str(root))
    assert code == doc["exit_code"] == 3
    assert [f["status"] for f in doc["files"]] == ["ok", "error", "ok"]
    assert (
        "internal error (a bug in mmcli): RuntimeError: boom"
        in (doc["files"][1]["error"]["message"])
    )


def test_unreadable_subdirectory_is_reported(tmp_path: Path, monkeypatch: Any) -> None:
    import os as os_module

    root = _three_good(tmp_path)
    (root / "locked").mkdir()
    dump(root / "locked" / "d.safetensors")
    real_scandir = os_module.scandir

    def fake_scandir(path: Any) -> Any:
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr("mmcli.check_embeddings.os.scandir", fake_scandir)
    result = run(str(root), "--device", "cpu")
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 2
    assert "locked: cannot read directory: Permission denied" in lines[0]
    assert "4 files" in result.stdout and "(1 could not be read)" in result.stdout
    code, doc = run_json(str(root))
    assert code == 2 and len(doc["files"]) == 4


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads anything")
def test_unreadable_subdirectory_for_real(tmp_path: Path) -> None:
    root = _three_good(tmp_path)
    locked = root / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        result = run(str(root), "--device", "cpu")
    finally:
        locked.chmod(0o755)
    assert result.exit_code == 2 and "cannot read directory" in result.stderr


def test_items_table_matches_rich(tmp_path: Path) -> None:
    """The items table laid out without Rich is the table Rich lays out."""
    import io

    from rich.console import Console

    from mmcli.check_embeddings import check_file
    from mmcli.cli import check_embeddings as cli

    path = dump(tmp_path / "d.safetensors", masks=with_mask(1, torch.ones(4, dtype=torch.bool)))
    report = check_file(path, device=torch.device("cpu"))
    lines = cli._Lines()
    lines.plain, lines.pending = True, []
    cli._items(lines, report)
    rows = [line.split() for line in lines.pending]
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, color_system=None)
    worst = {s.index: report.item_status(s.index) for s in report.items}
    table_rows = [
        [
            str(s.index),
            "[" + ", ".join(str(d) for d in s.shape) + "]",
            s.dtype,
            "-" if s.num_placeholders is None else str(s.num_placeholders),
            "-" if s.num_embeds is None else str(s.num_embeds),
            "-" if s.finite is None else ("yes" if s.finite else "no"),
            worst[s.index],
        ]
        for s in report.items
    ]
    console.print(cli._items_table(table_rows))
    assert lines.pending == buffer.getvalue().splitlines()
    assert rows[0][0] == "item"


def test_ten_thousand_files_do_not_leak_descriptors(tmp_path: Path) -> None:
    from mmcli.check_embeddings import check_file

    path = dump(tmp_path / "d.safetensors")
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0
    for _ in range(300):
        check_file(path, device=torch.device("cpu"))
    after = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0
    assert after <= before + 2


def test_a_token_id_beyond_the_prompts_int_type_is_a_finding(tmp_path: Path) -> None:
    # Before: int32 could not hold the id when it was made a tensor (exit 3, internal error).
    path = tmp_path / "i32.safetensors"
    prompt = torch.tensor([1, 2, 7, 7, 7, 7, 3], dtype=torch.int32)
    dump_encoder_outputs(path, [rand(4, H)], input_ids=prompt, placeholder_token_ids=[7])
    # The project's writer stores int64; narrow input_ids as an int32 capture would store it.
    header_len = struct.unpack("<Q", path.read_bytes()[:8])[0]
    header = json.loads(path.read_bytes()[8 : 8 + header_len])
    meta = {**header["__metadata__"], "placeholder_token_ids": "3000000000"}
    tensors = {"mm_embeddings.0": rand(4, H), "input_ids": prompt}
    save_file(tensors, str(path), metadata=meta)
    result = run(str(path))
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "no-placeholder" in result.stdout
    assert "3000000000 cannot occur in the int32 input_ids" in result.stdout
    assert "2,147,483,647" in result.stdout
    # An id int32 holds is still found: the same prompt with id 7 passes.
    save_file(tensors, str(path), metadata={**meta, "placeholder_token_ids": "7"})
    assert run(str(path)).exit_code == 0
