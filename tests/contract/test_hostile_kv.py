"""The hostile kv-share corpus: configs and ``--map`` files that are devices, FIFOs, huge or
odd (BOM, repeated keys, non-ASCII digits), and ``--emit-map`` targets that must never be
replaced. Same table style as ``test_hostile_cli.py``: exit code, no traceback, < 10 s, and
for exit 2 exactly one ``error:`` and one ``hint:`` line and nothing on stdout."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from mmcli.cli.main import main

TIME_LIMIT_S = 10.0
REPO = Path(__file__).resolve().parents[2]
TOY = str(REPO / "samples/kv/toy.toml")
LAYER0 = "model.layers.0.self_attn.attn"


def _fifo(tmp: Path) -> str:
    path = tmp / "fifo.json"
    os.mkfifo(path)
    return str(path)


def _write(name: str, data: bytes) -> Callable[[Path], str]:
    def build(tmp: Path) -> str:
        (tmp / name).write_bytes(data)
        return str(tmp / name)

    return build


def _big(tmp: Path) -> str:
    path = tmp / "big.json"
    with path.open("wb") as f:
        f.truncate((64 << 20) + 1)  # sparse: no disk used
    return str(path)


@dataclass(frozen=True)
class Case:
    build: Callable[[Path], list[str]]
    code: int
    message: str | None


def _plan_config(make: Callable[[Path], str]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["kv-share", "plan", make(tmp)]


def _plan_map(make: Callable[[Path], str]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["kv-share", "plan", TOY, "--map", make(tmp)]


def _emit(make: Callable[[Path], str]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["kv-share", "plan", TOY, "--emit-map", make(tmp)]


CASES: dict[str, Case] = {
    "read/config-fifo": Case(_plan_config(_fifo), 2, "not a regular file"),
    "read/map-fifo": Case(_plan_map(_fifo), 2, "not a regular file"),
    "read/config-dev-zero": Case(_plan_config(lambda t: "/dev/zero"), 2, "/dev/zero"),
    "read/config-dev-urandom": Case(_plan_config(lambda t: "/dev/urandom"), 2, "/dev/urandom"),
    "read/map-dev-zero": Case(_plan_map(lambda t: "/dev/zero"), 2, "not a regular file"),
    "read/config-over-64-MiB": Case(_plan_config(_big), 2, "larger than 64 MiB"),
    "read/map-over-64-MiB": Case(_plan_map(_big), 2, "larger than 64 MiB"),
    "read/config-directory": Case(_plan_config(lambda t: str(t)), 2, "holds no config.json"),
    "json/duplicate-config-key": Case(
        _plan_config(_write("dup.json", b'{"name": "a", "name": "b", "layers": []}')),
        2,
        "the key 'name' appears more than once",
    ),
    "json/escape-and-newline-in-a-layer-name": Case(
        _plan_config(
            _write(
                "esc.json",
                b'{"layers": [{"name": "a\\u001b[2J\\nb", "attention": "weird"}]}',
            )
        ),
        2,
        "layers[0] (a\\x1b[2J b): unknown attention type",
    ),
    "json/100000-character-attention-type": Case(
        _plan_config(
            _write("long.json", b'{"layers": [{"name": "a", "attention": "%s"}]}' % (b"w" * 10**5))
        ),
        2,
        "characters left out",
    ),
    "emit/dev-null": Case(_emit(lambda t: "/dev/null"), 0, None),  # the null device only
    "emit/dev-full": Case(_emit(lambda t: "/dev/full"), 2, "not a regular file"),
    "emit/dev-stdout": Case(_emit(lambda t: "/dev/stdout"), 2, "not a regular file"),
    "emit/fifo": Case(_emit(_fifo), 2, "not a regular file"),
    "emit/stdout-dash": Case(_emit(lambda t: "-"), 2, "--emit-map -"),
    "emit/the-input-config": Case(_emit(lambda t: TOY), 2, "an input of this run"),
    "emit/the-map": Case(
        lambda t: [
            "kv-share", "plan", TOY,
            "--map", _write("m.json", b"{}")(t),
            "--emit-map", str(t / "m.json"),
        ],
        2,
        "an input of this run",
    ),
    "emit/directory": Case(_emit(lambda t: str(t)), 2, "is a directory"),
}  # fmt: skip


#: A small sweep of the toy config (4 points, no matplotlib needed to refuse its --plot).
SWEEP = ["--memory", "1GiB", "--sweep", "max-model-len=1K..4K"]


def _plot_link_to(name: str) -> Callable[[Path, Path], str]:
    def build(tmp: Path, config: Path) -> str:
        (tmp / "p.png").symlink_to(tmp / name)
        return str(tmp / "p.png")

    return build


def _plot_fifo(tmp: Path, config: Path) -> str:
    os.mkfifo(tmp / "p.png")
    return str(tmp / "p.png")


def _plot_directory(tmp: Path, config: Path) -> str:
    (tmp / "p.svg").mkdir()
    return str(tmp / "p.svg")


#: ``--plot`` targets refused before any planning, like every output (``atomic_write``): the
#: run's config (a copy in tmp) is passed as MODEL, and must keep every byte.
PLOT_CASES: dict[str, tuple[Callable[[Path, Path], str], str]] = {
    "plot/link-to-the-config": (_plot_link_to("toy.json"), "it is an input of this run"),
    "plot/link-to-the-map": (_plot_link_to("map.json"), "it is an input of this run"),
    "plot/fifo": (_plot_fifo, "not a regular file"),
    "plot/directory": (_plot_directory, "is a directory"),
    "plot/missing-directory": (lambda t, c: str(t / "no" / "p.png"), "is not a directory"),
    "plot/dev-full": (lambda t, c: "/dev/full.png", "not a regular file"),
    "plot/not-png-or-svg": (lambda t, c: str(t / "p.pdf"), "neither .png nor .svg"),
}


@pytest.mark.parametrize("name", sorted(PLOT_CASES))
def test_hostile_plot(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MMCLI_DEBUG", raising=False)
    make, message = PLOT_CASES[name]
    config = tmp_path / "toy.json"
    config.write_text(json.dumps(_TOY_JSON), encoding="utf-8")
    (tmp_path / "map.json").write_text("{}", encoding="utf-8")
    target = make(tmp_path, config)
    before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    args = ["kv-share", "plan", str(config), "--map", str(tmp_path / "map.json")]
    code, out, err, elapsed = _in_process([*args, *SWEEP, "--plot", target])
    assert "Traceback" not in out + err
    assert elapsed < TIME_LIMIT_S, f"{name} took {elapsed:.1f} s"
    assert code == 2, (out, err)
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    assert message in lines[0] and "cannot read" not in lines[0], err
    assert out == ""
    assert {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    assert not (tmp_path / "no").exists()


#: The toy config as JSON (so that a copy of it in tmp reads as the sample does).
_TOY_JSON = {
    "name": "toy",
    "max_model_len": 8192,
    "layers": [
        {
            "name": f"model.layers.{i}.self_attn.attn",
            "num_kv_heads": 8,
            "head_size": 64,
            "dtype": "float16",
        }
        for i in range(4)
    ],
}


def test_plot_write_failure_keeps_the_old_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plot that cannot be written (a full disk) is one "cannot write" line; the plot
    already there keeps every byte, and no temporary file is left."""
    pytest.importorskip("matplotlib")
    import errno

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    plot = tmp_path / "p.png"
    plot.write_bytes(b"the old plot")
    monkeypatch.setattr("mmcli.atomic.os.fsync", full)
    code, out, err, _ = _in_process(["kv-share", "plan", TOY, *SWEEP, "--plot", str(plot)])
    assert code == 2, err
    assert err.splitlines()[0] == f"error: cannot write {plot}: No space left on device", err
    assert len(err.splitlines()) == 2 and out == ""
    assert plot.read_bytes() == b"the old plot" and list(tmp_path.iterdir()) == [plot]


def test_plot_title_of_a_hostile_model_name(tmp_path: Path) -> None:
    """A lone surrogate (matplotlib cannot encode it), ``$`` (mathtext) and a 1 MiB name (a
    minute of text layout) make a plot, quickly, whose title shows at most 80 characters."""
    pytest.importorskip("matplotlib")
    for name in ("bad\udc80name", "$x^$", "n" * (1 << 20)):
        config = tmp_path / "c.json"
        config.write_text(json.dumps({**_TOY_JSON, "name": name}), encoding="utf-8")
        plot = tmp_path / "p.svg"
        code, _, err, elapsed = _in_process(
            ["kv-share", "plan", str(config), *SWEEP, "--plot", str(plot), "--format", "json"]
        )
        assert code == 0, err
        assert elapsed < TIME_LIMIT_S, f"{name[:20]!r} took {elapsed:.1f} s"
        assert err.splitlines()[-1] == f"wrote {plot}"
        assert "n" * 81 not in plot.read_text(encoding="utf-8")


def test_config_and_map_through_dev_stdin(tmp_path: Path) -> None:
    """``cat cfg | mmcli kv-share plan /dev/stdin`` reads the pipe as ``-`` does (a FIFO
    named by any other path is still refused: it could block)."""
    import subprocess
    import sys

    if not Path("/dev/stdin").exists():
        pytest.skip("no /dev/stdin")
    command = [sys.executable, "-m", "mmcli", "kv-share", "plan"]
    config = json.dumps(_TOY_JSON).encode()
    done = subprocess.run(
        [*command, "/dev/stdin", "--format", "json"], input=config, capture_output=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["model"] == "toy"
    mapping = json.dumps({LAYER0: None}).encode()
    done = subprocess.run(
        [*command, TOY, "--map", "/dev/stdin", "--format", "json"],
        input=mapping,
        capture_output=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr


def _in_process(args: list[str]) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    code: object = None
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(args)
        except SystemExit as done:
            code = done.code
    assert isinstance(code, int)
    return code, out.getvalue(), err.getvalue(), time.monotonic() - start


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_kv(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MMCLI_DEBUG", raising=False)
    case = CASES[name]
    before = Path(TOY).read_bytes()
    code, out, err, elapsed = _in_process(case.build(tmp_path))
    assert "Traceback" not in out + err
    assert "\x1b" not in out + err  # input is never a terminal escape
    assert max(map(len, err.splitlines()), default=0) <= 2100, err[:200]
    assert elapsed < TIME_LIMIT_S, f"{name} took {elapsed:.1f} s"
    assert code == case.code, (out, err)
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 2, err
        assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
        assert case.message is None or case.message in lines[0], err
        assert out == "", out
    assert Path(TOY).read_bytes() == before
    assert os.path.exists("/dev/null") and not Path("/dev/null").is_file()


def test_emit_map_full_disk_is_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("mmcli.atomic.os.fsync", full)
    target = tmp_path / "map.json"
    code, out, err, _ = _in_process(["kv-share", "plan", TOY, "--emit-map", str(target)])
    assert code == 2, err
    lines = err.splitlines()
    assert f"error: cannot write {target}: No space left on device" in lines, err
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_emit_map_254_character_name(tmp_path: Path) -> None:
    target = tmp_path / ("m" * 249 + ".json")
    code, _, err, _ = _in_process(["kv-share", "plan", TOY, "--emit-map", str(target)])
    assert code == 0, err
    assert json.loads(target.read_text())


def test_bom_and_stdin_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"layers": [{"name": LAYER0, "num_kv_heads": 1, "head_size": 64, "dtype": "float16"}]}
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc).encode())
    code, _, err, _ = _in_process(["kv-share", "plan", str(path), "--format", "json"])
    assert code == 0, err


def test_non_ascii_digit_map_key_is_not_an_index(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"\u0661": None}), encoding="utf-8")
    code, out, err, _ = _in_process(
        ["kv-share", "plan", TOY, "--map", str(path), "--format", "json"]
    )
    assert code == 1, err
    assert "unknown-layer" in out


def test_many_unknown_keys_are_quick(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({f"nope.{i}": None for i in range(100_000)}), encoding="utf-8")
    code, out, err, elapsed = _in_process(["kv-share", "plan", TOY, "--map", str(path)])
    assert code == 1, err
    assert elapsed < TIME_LIMIT_S
    assert "99,980 more keys" in out
