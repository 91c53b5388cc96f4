"""check-embeddings' item limit: a dump of more items than it checks is refused, exit 2,
naming the limit, before any item is read (a million zero-row items, a 60 MB header within
the 100 MB header limit, took minutes item by item)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from typer.testing import CliRunner

from mmcli.check_embeddings import MAX_ITEMS
from mmcli.cli.main import app

runner = CliRunner()


def zero_row_dump(path: Path, count: int) -> Path:
    """A valid dump of ``count`` (0, 4) items, laid out as ``dump_encoder_outputs`` writes
    them (the header built directly: quicker than the writer for this many)."""
    entry = '":{"dtype":"BF16","shape":[0,4],"data_offsets":[0,0]}'
    names = sorted(f"mm_embeddings.{i}" for i in range(count))
    fields = {"expected_num_items": str(count), "format": "mm_dump", "format_version": "1"}
    meta = '{"__metadata__":' + json.dumps({**fields, "hidden_size": "4"}) + ',"'
    data = (meta + ',"'.join(n + entry for n in names) + "}").encode()
    data += b" " * (-len(data) % 8)
    path.write_bytes(struct.pack("<Q", len(data)) + data)
    return path


def test_a_dump_of_more_items_than_the_limit_is_refused(tmp_path: Path) -> None:
    path = zero_row_dump(tmp_path / "many.safetensors", MAX_ITEMS + 1)
    result = runner.invoke(app, ["check-embeddings", "-q", str(path)], catch_exceptions=False)
    assert result.exit_code == 2
    assert f"{MAX_ITEMS + 1:,} items, more than the {MAX_ITEMS:,}" in result.stderr
    assert "hint: split the dump" in result.stderr


def test_a_few_zero_row_items_are_checked(tmp_path: Path) -> None:
    path = zero_row_dump(tmp_path / "few.safetensors", 3)
    result = runner.invoke(app, ["check-embeddings", str(path)], catch_exceptions=False)
    assert result.exit_code == 0
    assert "3 items" in result.stdout
    assert "empty-item" in result.stdout
