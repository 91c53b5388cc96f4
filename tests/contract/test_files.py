"""``mmcli.files``: the one open-once, non-blocking, regular-files-only opener that the dump
reader and the KV config readers share, and its bounded read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import mmcli.dump.source
import mmcli.kv.inputs.readers
from mmcli import files
from mmcli.dump.source import open_file
from mmcli.errors import InputError
from mmcli.files import NotRegularFile, open_regular, read_fd
from mmcli.kv.inputs.readers import read_bytes

fifos = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def test_both_rooms_use_the_shared_opener() -> None:
    assert mmcli.dump.source.open_regular is open_regular
    assert mmcli.kv.inputs.readers.open_regular is open_regular
    assert mmcli.kv.inputs.readers.read_fd is read_fd


def test_a_regular_file_is_opened(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"0123456789")
    fd, st = open_regular(path)
    try:
        assert st.st_size == 10
        assert read_fd(fd, 100) == b"0123456789"
    finally:
        os.close(fd)


def test_read_fd_stops_one_byte_past_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 1000)
    fd, _ = open_regular(path)
    try:
        assert len(read_fd(fd, 10)) == 11  # longer than the limit: there was more
    finally:
        os.close(fd)


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(NotRegularFile) as info:
        open_regular(tmp_path)
    assert info.value.kind == "directory"
    if os.path.exists("/dev/null"):
        with pytest.raises(NotRegularFile) as info:
            open_regular("/dev/null")
        assert info.value.kind == "special"
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "missing")


@fifos
def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile) as info:
        open_regular(fifo)  # no writer: an open would block without the check
    assert info.value.kind == "special"


@fifos
def test_a_file_swapped_for_a_fifo_is_caught_after_the_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    regular = tmp_path / "regular"
    regular.write_bytes(b"{}")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real_stat = os.stat
    # The path check sees a regular file; what is then opened is a FIFO (O_NONBLOCK: no hang).
    monkeypatch.setattr(files.os, "stat", lambda path: real_stat(regular))
    with pytest.raises(NotRegularFile) as info:
        open_regular(fifo)
    assert info.value.kind == "swapped"
    # Each caller words it its own way, as before the helper was shared.
    with pytest.raises(InputError, match="^cannot read .*fifo: not a regular file$"):
        read_bytes(fifo)
    with pytest.raises(InputError, match=r"fifo: not a regular file$"):
        open_file(fifo)


def test_the_callers_wording_is_unchanged(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r": Is a directory$"):
        read_bytes(tmp_path)
    with pytest.raises(InputError, match=r": is a directory, not a safetensors file$"):
        open_file(tmp_path)
    if os.path.exists("/dev/null"):
        with pytest.raises(InputError, match=r"not a regular file \(a device, FIFO or socket\)"):
            read_bytes(Path("/dev/null"))
        with pytest.raises(InputError, match=r"/dev/null: not a regular file$"):
            open_file("/dev/null")
    with pytest.raises(InputError, match=r"missing: no such file$"):
        open_file(tmp_path / "missing")
    with pytest.raises(InputError, match=r"^cannot read .*missing: No such file or directory$"):
        read_bytes(tmp_path / "missing")
