"""The dump format: atomic writes, lazy reads, and the schema check."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from mmcli import dump_encoder_outputs, load_dump
from mmcli.dump import read_tensor
from mmcli.dump.safetensors import read_header
from mmcli.errors import InputError


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_roundtrip_per_item(tmp_path: Path) -> None:
    items = [rand(4, 8).bfloat16(), rand(1, 3, 8, seed=1)]  # broken shapes are dumped as-is
    mask = torch.tensor([1, 0, 1, 1, 1], dtype=torch.bool)
    path = dump_encoder_outputs(
        tmp_path / "d.safetensors",
        items,
        is_embed=[mask, None],
        expected_num_items=2,
        hidden_size=8,
        dtype=torch.bfloat16,
        modality="image",
        note=3,
    )
    dump = load_dump(path)
    assert dump.num_items == 2 and not dump.layout.stacked
    assert dump.metadata == {
        "format": "mm_dump",
        "format_version": "1",
        "expected_num_items": "2",
        "hidden_size": "8",
        "dtype": "bfloat16",
        "modality": "image",
        "note": "3",
    }
    assert (dump.expected_num_items, dump.hidden_size, dump.model_dtype) == (2, 8, torch.bfloat16)
    assert torch.equal(dump.embedding(0), items[0]) and dump.embedding(0).dtype == torch.bfloat16
    assert torch.equal(dump.embedding(1), items[1])
    assert dump.item_shape(1) == (1, 3, 8)
    is_embed = dump.is_embed(0)
    assert is_embed is not None and torch.equal(is_embed, mask)
    assert dump.is_embed(1) is None and dump.placeholders(0) is None
    with pytest.raises(IndexError):
        dump.embedding(2)


def test_roundtrip_stacked_reads_one_slice(tmp_path: Path) -> None:
    stacked = rand(3, 4, 8)
    dump = load_dump(dump_encoder_outputs(tmp_path / "s.safetensors", stacked))
    assert dump.layout.stacked and dump.num_items == 3 and dump.stacked_shape() == (3, 4, 8)
    assert torch.equal(dump.embedding(2), stacked[2])
    assert torch.equal(dump.stacked(), stacked)


def test_shared_storage_and_views_are_written(tmp_path: Path) -> None:
    base = rand(2, 4, 8)
    items = list(base.unbind(0))  # views of one storage: safetensors alone refuses these
    dump = load_dump(dump_encoder_outputs(tmp_path / "v.safetensors", items + [base[0].t()]))
    assert torch.equal(dump.embedding(1), base[1]) and torch.equal(dump.embedding(2), base[0].t())


def test_write_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "d.safetensors"
    dump_encoder_outputs(path, [rand(2, 2)])
    before = path.read_bytes()
    with pytest.raises(InputError):
        dump_encoder_outputs(path, [rand(2, 2)], item_counts=[2])
    with pytest.raises(InputError):
        dump_encoder_outputs(path, [rand(2, 2)], model=object())
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.safetensors"]  # no temp left
    dump_encoder_outputs(path, [rand(3, 2)])
    assert load_dump(path).item_shape(0) == (3, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.safetensors"]


def test_write_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="reserved"):
        dump_encoder_outputs(tmp_path / "d.safetensors", [rand(2, 2)], format="x")
    with pytest.raises(InputError, match="is not a directory"):
        dump_encoder_outputs(tmp_path / "nope" / "d.safetensors", [rand(2, 2)])
    # v2: a non-tensor return is recorded (its type), not refused
    written = dump_encoder_outputs(tmp_path / "d.safetensors", {"a": rand(2, 2)})
    assert load_dump(written).metadata["encoder_return_type"] == "dict"


def schema_error(tmp_path: Path, tensors: dict[str, torch.Tensor], **meta: str) -> str:
    path = tmp_path / "x.safetensors"
    save_file(tensors, str(path), metadata=meta or None)
    with pytest.raises(InputError) as info:
        load_dump(path)
    assert info.value.exit_code == 2 and info.value.hint
    return info.value.message.removeprefix(f"{path}: ")


EXPECTED = (
    "keys expected: mm_embeddings.0 … mm_embeddings.{n-1} (or one stacked mm_embeddings), "
    "optionally is_embed.{i} and placeholders.{i}"
)


def test_schema_unknown_keys(tmp_path: Path) -> None:
    message = schema_error(tmp_path, {"mm_embeddings.0": rand(2, 2), "weights": rand(2)})
    assert message == (
        "not an mm_dump file: unexpected keys [weights]; keys found: [mm_embeddings.0, "
        f"weights]; {EXPECTED}"
    )


def test_schema_gaps_and_mixtures(tmp_path: Path) -> None:
    message = schema_error(tmp_path, {"mm_embeddings.0": rand(2, 2), "mm_embeddings.2": rand(2, 2)})
    assert "items must be numbered 0..2 without gaps; missing mm_embeddings.1" in message
    message = schema_error(
        tmp_path, {"mm_embeddings": rand(1, 2, 2), "mm_embeddings.0": rand(2, 2)}
    )
    assert "both a stacked mm_embeddings and per-item mm_embeddings.{i}" in message
    message = schema_error(tmp_path, {"mm_embeddings.01": rand(2, 2)})
    assert "unexpected keys [mm_embeddings.01]" in message
    assert "no mm_embeddings tensors" in schema_error(tmp_path, {"is_embed.0": rand(2).bool()})


def test_zero_items_with_their_slots(tmp_path: Path) -> None:
    """format=mm_dump and no mm_embeddings: zero items; the masks are slots with no item."""
    path = tmp_path / "zero.safetensors"
    save_file({"is_embed.0": torch.ones(3, dtype=torch.bool)}, str(path), {"format": "mm_dump"})
    dump = load_dump(path)
    assert dump.num_items == 0 and dump.layout.num_masks == 1 and dump.is_embed(0) is not None
    save_file({"is_embed.3": torch.ones(3, dtype=torch.bool)}, str(path), {"format": "mm_dump"})
    with pytest.raises(InputError, match="is_embed.3 belongs to item 3"):
        load_dump(path)


def test_schema_metadata(tmp_path: Path) -> None:
    t = {"mm_embeddings.0": rand(2, 2)}
    assert schema_error(tmp_path, t, format="other").startswith("metadata format='other'")
    assert "format_version '3' is not supported" in schema_error(
        tmp_path, t, format="mm_dump", format_version="3"
    )
    assert schema_error(tmp_path, t, hidden_size="big") == (
        "metadata hidden_size='big' is not an integer >= 1"
    )
    assert schema_error(tmp_path, t, dtype="int4") == "metadata dtype: unknown model dtype 'int4'"


def test_files_without_metadata_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "plain.safetensors"
    save_file({"mm_embeddings.0": rand(2, 2), "is_embed.0": torch.ones(2).bool()}, str(path))
    assert load_dump(path).num_items == 1


def test_cuda_absent_is_an_input_error(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("checks the no-CUDA error")
    path = dump_encoder_outputs(tmp_path / "d.safetensors", [rand(2, 2)])
    with pytest.raises(InputError, match="CUDA is not available"):
        load_dump(path, device="cuda")


@pytest.mark.cuda
def test_reads_straight_onto_cuda(tmp_path: Path) -> None:
    path = dump_encoder_outputs(tmp_path / "d.safetensors", [rand(2, 2)])
    t = load_dump(path, device="cuda").embedding(0)
    assert t.is_cuda and torch.equal(t.cpu(), rand(2, 2))


def test_file_shrunk_after_header_read(tmp_path: Path) -> None:
    path = dump_encoder_outputs(tmp_path / "d.safetensors", [rand(4, 4)])
    header = read_header(path)
    with path.open("r+b") as f:
        f.truncate(header.file_size - 8)
    with pytest.raises(InputError, match="file ended after 56 of 64 bytes"):
        read_tensor(header, header.tensors["mm_embeddings.0"])


def test_written_files_load_with_safetensors_and_are_reproducible(tmp_path: Path) -> None:
    from safetensors import safe_open
    from safetensors.torch import load_file

    items = [rand(4, 8).bfloat16(), rand(0, 8), rand(3, 8).half(), rand(2, 8).double()]
    masks = [torch.tensor([1, 0, 1, 1, 1], dtype=torch.bool)]
    a = dump_encoder_outputs(tmp_path / "a.safetensors", items, is_embed=masks, model="m")
    b = dump_encoder_outputs(tmp_path / "b.safetensors", items, is_embed=masks, model="m")
    assert a.read_bytes() == b.read_bytes()
    loaded = load_file(str(a))
    for i, t in enumerate(items):
        assert loaded[f"mm_embeddings.{i}"].dtype == t.dtype
        assert torch.equal(loaded[f"mm_embeddings.{i}"], t)
    assert torch.equal(loaded["is_embed.0"], masks[0])
    with safe_open(str(a), "pt") as f:
        assert f.metadata()["model"] == "m"


def test_unsupported_dtype_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="complex128, which a dump cannot hold"):
        dump_encoder_outputs(tmp_path / "c.safetensors", [torch.ones(2, 2, dtype=torch.complex128)])
    assert list(tmp_path.iterdir()) == []


def test_a_dump_is_read_through_the_handle_it_was_opened_with(tmp_path: Path) -> None:
    """Issue 13: the path is opened once. A FIFO renamed over it mid-run would block a reader
    that reopened the path; this one never looks at the path again."""
    import os

    items = [rand(4, 4), rand(3, 4), rand(2, 4)]
    path = dump_encoder_outputs(tmp_path / "d.safetensors", items)
    with load_dump(path) as dump:
        first = dump.embedding(0)
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        os.replace(fifo, path)  # the path now names a FIFO nobody writes to
        assert torch.equal(first, items[0])
        assert torch.equal(dump.embedding(2), items[2])
        assert torch.equal(dump.embedding(1), items[1])
    with pytest.raises(InputError, match="the dump was closed"):
        dump.embedding(0)
    with pytest.raises(InputError, match="not a regular file"):
        load_dump(path)  # opening the FIFO itself does not block either


def test_a_read_larger_than_memory_is_refused_before_allocating(tmp_path: Path) -> None:
    import json
    import struct

    from mmcli.devices import available_bytes

    free = available_bytes(torch.device("cpu")) or 0
    rows = (free + (1 << 30)) // 4096 + 1
    header = json.dumps(
        {
            "mm_embeddings.0": {
                "dtype": "F32",
                "shape": [rows, 1024],
                "data_offsets": [0, rows * 4096],
            }
        }
    ).encode()
    path = tmp_path / "huge.safetensors"
    with path.open("wb") as f:  # sparse: nothing is written
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + rows * 4096)
    dump = load_dump(path)
    with pytest.raises(InputError, match="but only .* is available"):
        dump.embedding(0)


def test_names_in_messages_are_printable_and_short(tmp_path: Path) -> None:
    import json
    import struct

    name = "\x1b[2J" + "x" * (1 << 20)
    body = json.dumps({name: {"dtype": "F99", "shape": [], "data_offsets": [0, 0]}}).encode()
    path = tmp_path / "n.safetensors"
    path.write_bytes(struct.pack("<Q", len(body)) + body)
    with pytest.raises(InputError) as caught:
        read_header(path)
    message = caught.value.message
    assert "\x1b" not in message and "\\x1b[2J" in message and len(message) < 1000
