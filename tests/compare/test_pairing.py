"""Pairing directories: by file name, by token ids or mm_hashes, in capture order, or refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from compare_pairs import codes

import mmcli
from mmcli.errors import InputError


def _write(directory: Path, name: str, item: torch.Tensor, **meta: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return mmcli.dump_encoder_outputs(directory / name, [item], **meta)


@pytest.fixture
def items(base) -> list[torch.Tensor]:
    return [base[0], base[2], base[1]]


def test_directories_paired_by_file_name(tmp_path: Path, items) -> None:
    for i, t in enumerate(items):
        _write(tmp_path / "a", f"p{i}.safetensors", t)
        _write(tmp_path / "b", f"p{i}.safetensors", t)
    report = mmcli.compare_dumps(tmp_path / "a", tmp_path / "b")
    assert report.how == "name" and len(report.pairs) == 3 and report.exit_code == 0
    assert all(Path(p.ref).name == Path(p.cand).name for p in report.pairs)


def test_transformers_and_vllm_captures_paired_by_token_ids(tmp_path: Path, items) -> None:
    # The two engines name files differently (mmcli.capture: engine-phase-rank-pid-seq-reason)
    # and write them in different orders; both record the prompt's input_ids.
    prompts = [[1, 32000, 32000, 5], [1, 32000, 7, 8], [2, 32000, 9]]
    for i, (t, ids) in enumerate(zip(items, prompts, strict=True)):
        _write(
            tmp_path / "hf",
            f"transformers-prefill-rx-p11-{i:04d}-always.safetensors",
            t,
            input_ids=ids,
            engine="transformers",
            phase="prefill",
        )
        j = 2 - i
        _write(
            tmp_path / "vllm",
            f"vllm-prefill-r0-p22-{j:04d}-always.safetensors",
            t,
            input_ids=ids,
            engine="vllm",
            phase="prefill",
            mm_hashes=f"h{i}",
        )
    # vLLM's profiling run: dummy inputs, skipped.
    _write(
        tmp_path / "vllm",
        "vllm-profile-r0-p22-0003-always.safetensors",
        torch.zeros(4, 64),
        engine="vllm",
        phase="profile",
    )
    report = mmcli.compare_dumps(tmp_path / "hf", tmp_path / "vllm")
    assert report.how == "input_ids" and report.exit_code == 0, codes(report)
    assert len(report.pairs) == 3 and [Path(s).name for s in report.skipped] == [
        "vllm-profile-r0-p22-0003-always.safetensors"
    ]
    for p in report.pairs:
        assert p.items[0].metrics is not None and p.items[0].metrics.bit_identical


def test_paired_by_mm_hashes(tmp_path: Path, items) -> None:
    for i, t in enumerate(items):
        _write(tmp_path / "a", f"x{i}.safetensors", t, mm_hashes=f"hash{i}")
        _write(tmp_path / "b", f"y{2 - i}.safetensors", t, mm_hashes=f"hash{i}")
    report = mmcli.compare_dumps(tmp_path / "a", tmp_path / "b")
    assert report.how == "mm_hashes" and report.exit_code == 0


def test_unpairable_directories_are_refused(tmp_path: Path, items) -> None:
    for i, t in enumerate(items):
        _write(tmp_path / "a", f"x{i}.safetensors", t)
        _write(tmp_path / "b", f"y{i}.safetensors", t)
    with pytest.raises(InputError, match="cannot pair the dumps") as info:
        mmcli.compare_dumps(tmp_path / "a", tmp_path / "b")
    assert info.value.hint is not None and "--pair order" in info.value.hint


def test_pair_order_follows_capture_sequence(tmp_path: Path, items) -> None:
    for i, t in enumerate(items):
        # Names sort differently from the sequence numbers (pids differ).
        _write(tmp_path / "a", f"transformers-prefill-rx-p9-{i:04d}-always.safetensors", t)
        _write(tmp_path / "b", f"vllm-prefill-r0-p{100 - i}-{i:04d}-always.safetensors", t)
    report = mmcli.compare_dumps(tmp_path / "a", tmp_path / "b", pair="order")
    assert report.how == "order" and report.exit_code == 0


def test_unpaired_files_are_findings(tmp_path: Path, items) -> None:
    for i, t in enumerate(items):
        _write(tmp_path / "a", f"p{i}.safetensors", t)
    _write(tmp_path / "b", "p0.safetensors", items[0])
    report = mmcli.compare_dumps(tmp_path / "a", tmp_path / "b", pair="name")
    assert codes(report) == [("compare-unpaired", None)] * 2 and report.exit_code == 1
    assert "REF dump" in report.findings[0].message


def test_same_token_ids_twice_is_refused(tmp_path: Path, items) -> None:
    for i in range(2):
        _write(tmp_path / "a", f"x{i}.safetensors", items[i], input_ids=[1, 2])
        _write(tmp_path / "b", f"y{i}.safetensors", items[i], input_ids=[1, 2])
    with pytest.raises(InputError, match="have the same input ids"):
        mmcli.compare_dumps(tmp_path / "a", tmp_path / "b")


def test_file_against_directory_is_refused(tmp_path: Path, items) -> None:
    path = _write(tmp_path / "a", "x.safetensors", items[0])
    with pytest.raises(InputError, match="is a file but .* is a directory"):
        mmcli.compare_dumps(path, tmp_path / "a")


def test_merged_and_stacked_layouts_align_with_per_item(tmp_path: Path, items) -> None:
    per_item = mmcli.dump_encoder_outputs(tmp_path / "items.safetensors", items)
    merged = mmcli.dump_encoder_outputs(
        tmp_path / "merged.safetensors",
        torch.cat(items),
        item_counts=[t.shape[0] for t in items],
    )
    report = mmcli.compare_dumps(per_item, merged)
    assert report.exit_code == 0 and codes(report) == [] and len(report.pairs[0].items) == 3
    same = [items[1], items[1].flip(0)]
    stacked = mmcli.dump_encoder_outputs(tmp_path / "stacked.safetensors", torch.stack(same))
    report = mmcli.compare_dumps(
        mmcli.dump_encoder_outputs(tmp_path / "two.safetensors", same), stacked
    )
    assert report.exit_code == 0 and len(report.pairs[0].items) == 2


def test_not_a_dump_is_refused(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    bad = tmp_path / "weights.safetensors"
    save_file({"weight": torch.zeros(2, 2)}, bad)
    with pytest.raises(InputError):
        mmcli.compare_dumps(bad, bad)
