"""``layout=merged`` is version 2's: a file declaring it under version 1 (or none) is refused
as not a dump, never an internal error (a fuzzed header found the KeyError)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.dump.safetensors import read_header
from mmcli.dump.schema import check_schema
from mmcli.errors import InputError


@pytest.mark.parametrize("version", [None, "1"])
def test_merged_layout_needs_version_2(tmp_path: Path, version: str | None) -> None:
    path = tmp_path / "d.safetensors"
    metadata = {"layout": "merged"} | ({"format_version": version} if version else {})
    save_file({"mm_embeddings": torch.ones(2, 3, 4)}, str(path), metadata=metadata)
    with pytest.raises(InputError, match="layout=merged needs format_version 2"):
        check_schema(read_header(path))
    result = CliRunner().invoke(app, ["inspect", str(path)], catch_exceptions=False)
    assert result.exit_code == 0
    assert "not an mm_dump dump: " in result.stdout.splitlines()[-1]
