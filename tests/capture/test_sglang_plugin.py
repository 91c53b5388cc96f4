"""The SGLang plugin against stand-in module trees of covered releases (tests/capture/fake_sglang).

Each test puts one tree first on ``sys.path``, registers the plugin (or lets the tree's
``load_plugins()`` do it from the entry point declared in pyproject.toml), runs a prefill of a
tiny vision-language model through the tree's ``general_mm_embed_routine``, and reads back
what was dumped.
"""

from __future__ import annotations

import importlib
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

import mmcli
from mmcli.capture.sglang import items as sglang_items
from mmcli.capture.sglang import plugin
from mmcli.check_embeddings import check_file
from mmcli.cli.main import app
from mmcli.dump.io import load_dump

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).parent / "fake_sglang"
TREES = ["v0_4", "v0_5_11", "v0_5_23"]
HIDDEN = 16


def _forget_sglang() -> None:
    for name in list(sys.modules):
        if name == "sglang" or name.startswith(("sglang.", "fake_sglang_shared")):
            del sys.modules[name]


@pytest.fixture
def fake_sglang(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``load(tree, mode=..., register=True, **env)``: env set, plugin registered, tree on path."""
    saved = {n: m for n, m in sys.modules.items() if n == "sglang" or n.startswith("sglang.")}
    dumps = tmp_path / "dumps"

    def load(tree: str, mode: str | None = "always", register: bool = True, **env: str) -> Path:
        _forget_sglang()
        monkeypatch.setenv("MMCLI_DUMP_DIR", str(dumps))
        if mode is None:
            monkeypatch.delenv("MMCLI_DUMP_MODE", raising=False)
        else:
            monkeypatch.setenv("MMCLI_DUMP_MODE", mode)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.syspath_prepend(str(FAKE / tree))
        monkeypatch.syspath_prepend(str(FAKE))
        if register:
            plugin.register()
        return dumps

    yield load
    plugin.unregister()
    plugin._state.__init__()  # type: ignore[misc]
    _forget_sglang()
    sys.modules.update(saved)


def _prompt(tree: str, rows: list[int], pad: int = 40, **kw: Any) -> Any:
    from fake_sglang_shared.model import prompt

    schedule_batch = importlib.import_module("sglang.srt.managers.schedule_batch")
    kw.setdefault("one_item", tree == "v0_4")  # before 0.5.10: one item holds every image
    return prompt(rows, pad=pad, item_cls=schedule_batch.MultimodalDataItem, **kw)


def _prefill(
    tree: str,
    fault: str | None = None,
    *,
    per_item: bool = False,
    requests: list[Any] | None = None,
    prefix: list[int] | None = None,
) -> Any:
    from fake_sglang_shared.model import FakeVLM, batch

    model = FakeVLM(fault, per_item=per_item)
    ids, forward_batch = batch(requests or [_prompt(tree, [3, 4])], prefix)
    return model(ids, forward_batch)


def _dumps(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.safetensors"))


def _codes(path: Path) -> set[str]:
    report = check_file(path, device=torch.device("cpu"))
    return {f.code for f in report.findings if f.severity == "error"}


def _counts_and_masks(path: Path) -> tuple[list[int], list[int]]:
    dump = load_dump(path)
    rows = [dump.item_shape(i)[0] for i in range(dump.num_items)]
    masks = []
    for i in range(dump.num_items):
        mask = dump.is_embed(i)
        assert mask is not None and mask.dtype == torch.bool
        masks.append(int(mask.sum()))
    return rows, masks


def _innermost(error: BaseException) -> str:
    tb = error.__traceback__
    assert tb is not None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename


# --------------------------------------------------------------------------- registration


def test_inert_without_dump_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MMCLI_DUMP_DIR", raising=False)
    before = list(sys.meta_path)
    plugin.register()
    assert sys.meta_path == before
    assert plugin._settings is None


def test_register_imports_neither_torch_nor_sglang(tmp_path: Path) -> None:
    code = (
        "import sys, os; os.environ['MMCLI_DUMP_DIR'] = sys.argv[1];"
        "import mmcli.capture.sglang as p; p.register();"
        "print(sorted(m for m in ('torch', 'sglang') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_bad_mode_leaves_plugin_inert(fake_sglang: Callable[..., Path]) -> None:
    fake_sglang("v0_5_23", mode="sometimes")
    assert plugin._settings is None


def _declared_entry_point() -> str:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    value: str = project["entry-points"]["sglang.srt.plugins"]["mmcli"]
    return value


@pytest.mark.parametrize("tree", ["v0_5_11", "v0_5_23"])
def test_scheduler_process_loads_the_entry_point(
    tree: str, fake_sglang: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.5.11+: the scheduler process calls load_plugins(), which calls our entry point."""
    dumps = fake_sglang(tree, register=False)
    plugins = importlib.import_module("sglang.srt.plugins")
    value = _declared_entry_point()
    assert value == "mmcli.capture.sglang:register"

    def entry_points(group: str) -> list[EntryPoint]:
        return [EntryPoint("mmcli", value, group)] if group == "sglang.srt.plugins" else []

    monkeypatch.setattr(sys.modules["fake_sglang_shared.plugins"], "entry_points", entry_points)
    assert plugins.GENERAL_PLUGINS_GROUP == "sglang.srt.plugins"
    scheduler = importlib.import_module("sglang.srt.managers.scheduler")
    scheduler.run_scheduler_process(lambda: _prefill(tree))
    assert plugin._settings is not None
    assert len(_dumps(dumps)) == 1


def test_sglang_plugins_allow_list_is_respected(
    fake_sglang: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    dumps = fake_sglang("v0_5_23", register=False, SGLANG_PLUGINS="someone_else")
    importlib.import_module("sglang.srt.plugins")
    monkeypatch.setattr(
        sys.modules["fake_sglang_shared.plugins"],
        "entry_points",
        lambda group: [EntryPoint("mmcli", _declared_entry_point(), group)],
    )
    importlib.import_module("sglang.srt.managers.scheduler").run_scheduler_process(
        lambda: _prefill("v0_5_23")
    )
    assert plugin._settings is None and _dumps(dumps) == []


# --------------------------------------------------------------------------- healthy


@pytest.mark.parametrize("tree", TREES)
def test_healthy_always_dumps_merged_layout_with_masks(
    tree: str, fake_sglang: Callable[..., Path]
) -> None:
    dumps = fake_sglang(tree)
    module = importlib.import_module("sglang.srt.managers.mm_utils")
    assert getattr(module.get_embedding_and_mask, "__mmcli_wrapped__", False)
    out = _prefill(tree)
    assert out.shape == (16, HIDDEN)  # the engine's own result is untouched
    (path,) = _dumps(dumps)
    assert path.name.startswith("sglang-prefill-rx-") and path.name.endswith("-always.safetensors")
    dump = load_dump(path)
    meta = dump.metadata
    assert meta["layout"] == "merged" and meta["format_version"] == "2"
    assert meta["engine"] == "sglang"
    assert meta["phase"] == "prefill"
    assert meta["version_sglang"] == sys.modules["sglang"].__version__
    assert meta["hidden_size"] == str(HIDDEN)
    # the model's config (SGLang's model keeps it as .config): the language model's hidden
    # size, which key it came from, the image placeholder id; the dtype of its embedding
    assert meta["hidden_size_source"] == "hidden_size"
    assert meta["placeholder_token_ids"] == "63"
    assert meta["dtype"] == "float32"
    assert meta["model"] == "fake/tiny-vlm"
    assert meta["modality"] == "image"
    assert meta["item_rows"] == "placeholders"
    rows, masks = _counts_and_masks(path)
    if tree == "v0_4":  # one item holds both images: its mask has the gap between them
        assert rows == masks == [7]
        assert dump.is_embed(0).shape == (9,)
    else:
        assert rows == masks == [3, 4]
        assert float(dump.embedding(1)[0, 0]) == 41.0  # the second image's own rows
    assert _codes(path) == set()
    result = CliRunner().invoke(app, ["check-embeddings", str(dumps), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(os.stat(dumps).st_mode) == 0o700


@pytest.mark.parametrize("tree", ["v0_4", "v0_5_23"])
def test_batch_with_a_text_only_request(tree: str, fake_sglang: Callable[..., Path]) -> None:
    dumps = fake_sglang(tree)
    requests = [_prompt(tree, [3, 4]), ([1, 2, 9, 9], None), _prompt(tree, [2], pad=50)]
    _prefill(tree, requests=requests)
    (path,) = _dumps(dumps)
    rows, masks = _counts_and_masks(path)
    assert rows == masks == ([7, 2] if tree == "v0_4" else [3, 4, 2])
    assert _codes(path) == set()
    assert load_dump(path).metadata["extend_seq_lens"] == "16,9"


@pytest.mark.parametrize(
    ("tree", "one_item"),
    [("v0_4", True), ("v0_5_11", False), ("v0_5_11", True), ("v0_5_23", False), ("v0_5_23", True)],
)
def test_chunked_prefill_dumps_the_chunk(
    tree: str, one_item: bool, fake_sglang: Callable[..., Path]
) -> None:
    """The chunk starts inside the first image: its dump holds the rows of that chunk only.
    One item with two runs takes the engine's whole-request path, one per image the
    per-image path."""
    dumps = fake_sglang(tree)
    _prefill(tree, requests=[_prompt(tree, [3, 4], one_item=one_item)], prefix=[5])
    (path,) = _dumps(dumps)
    rows, masks = _counts_and_masks(path)
    assert rows == masks == ([6] if one_item else [2, 4])
    meta = load_dump(path).metadata
    assert meta["extend_prefix_lens"] == "5"
    assert _codes(path) == set()


def test_per_item_encoder_output(fake_sglang: Callable[..., Path]) -> None:
    """0.5.18+: the encoder may return one tensor per item."""
    dumps = fake_sglang("v0_5_23")
    _prefill("v0_5_23", per_item=True)
    (path,) = _dumps(dumps)
    assert _counts_and_masks(path) == ([3, 4], [3, 4])


def test_deepstack_rows_are_recorded_as_such(fake_sglang: Callable[..., Path]) -> None:
    """Qwen3-VL-like: the step's rows carry 3 deepstack levels, split off after it."""
    dumps = fake_sglang("v0_5_23")
    from fake_sglang_shared.model import FakeVLM, batch

    model = FakeVLM()
    model.deepstack_visual_indexes = [8, 16, 24]
    model(*batch([_prompt("v0_5_23", [3, 4])]))
    (path,) = _dumps(dumps)
    dump = load_dump(path)
    assert dump.item_shape(0) == (3, 4 * HIDDEN)
    assert dump.metadata["deepstack_levels"] == "3"
    assert _codes(path) == set()


# --------------------------------------------------------------------------- faults


@pytest.mark.parametrize(
    ("tree", "per_item", "raised_in", "source"),
    [
        ("v0_4", False, "Insufficient multimodal embedding length", "merged"),
        ("v0_5_11", False, "split_with_sizes", "encoder"),
        ("v0_5_23", False, "split_with_sizes", "encoder"),
        ("v0_5_23", True, "Insufficient multimodal embedding length", "merged"),
    ],
)
def test_one_row_short_reraises_engine_error_and_dumps(
    tree: str, per_item: bool, raised_in: str, source: str, fake_sglang: Callable[..., Path]
) -> None:
    dumps = fake_sglang(tree, mode=None)  # failure is the default
    with pytest.raises(RuntimeError, match=raised_in) as info:
        _prefill(tree, "one-short", per_item=per_item)
    # raised by the engine (or torch), not by the package (whatever the checkout is called)
    package = Path(mmcli.__file__).resolve().parent
    assert package not in Path(_innermost(info.value)).resolve().parents
    (path,) = _dumps(dumps)
    assert path.name.endswith("-failure.safetensors")
    meta = load_dump(path).metadata
    assert meta["engine_error"] == f"RuntimeError: {info.value}"
    assert meta["embedding_source"] == source
    rows, masks = _counts_and_masks(path)
    if tree == "v0_4":
        assert (rows, masks) == ([6], [7])
    else:
        assert (rows, masks) == ([3, 3], [3, 4])  # the short item is the one flagged
    assert meta["item_rows"] == ("attributed" if source == "encoder" else "encoder")
    assert "mask-count" in _codes(path)
    result = CliRunner().invoke(app, ["check-embeddings", str(path), "--device", "cpu"])
    assert result.exit_code == 1 and "mask-count" in result.output


@pytest.mark.parametrize("fault", ["wide", "narrow"])
@pytest.mark.parametrize("tree", TREES)
def test_scatter_error_dumps_the_step_it_failed_on(
    tree: str, fault: str, fake_sglang: Callable[..., Path]
) -> None:
    """Rows twice as wide, or one column short, pass the length check and fail in the
    scatter (the merge) that follows."""
    dumps = fake_sglang(tree, mode="failure")
    with pytest.raises(RuntimeError) as info:
        _prefill(tree, fault)
    (path,) = _dumps(dumps)
    meta = load_dump(path).metadata
    assert meta["engine_error"] == f"RuntimeError: {info.value}"
    assert "hidden-size" in _codes(path)
    assert _counts_and_masks(path)[1] == ([7] if tree == "v0_4" else [3, 4])


def test_encoder_returning_none_is_recorded(fake_sglang: Callable[..., Path]) -> None:
    dumps = fake_sglang("v0_4", mode="failure")
    with pytest.raises(AttributeError):
        _prefill("v0_4", "none")
    (path,) = _dumps(dumps)
    assert load_dump(path).metadata["encoder_return_type"] == "NoneType"
    assert "encoder-returned-none" in _codes(path)


def test_encoder_raising_is_reraised_and_not_dumped(fake_sglang: Callable[..., Path]) -> None:
    dumps = fake_sglang("v0_5_23", mode="always")
    with pytest.raises(ValueError, match="the vision tower failed"):
        _prefill("v0_5_23", "raise")
    assert _dumps(dumps) == []


def test_failure_mode_writes_nothing_when_healthy(fake_sglang: Callable[..., Path]) -> None:
    dumps = fake_sglang("v0_5_23", mode="failure")
    _prefill("v0_5_23")
    assert _dumps(dumps) == []


def test_check_mode_dumps_only_steps_with_findings(fake_sglang: Callable[..., Path]) -> None:
    dumps = fake_sglang("v0_5_11", mode="check")
    _prefill("v0_5_11")
    assert _dumps(dumps) == []
    _prefill("v0_5_11", "nan")  # the engine carries on; mmcli's diagnosis does not
    (path,) = _dumps(dumps)
    assert path.name.endswith("-check.safetensors")
    assert "non-finite" in _codes(path)


# --------------------------------------------------------------------------- limits and ranks


def test_dump_max(fake_sglang: Callable[..., Path]) -> None:
    dumps = fake_sglang("v0_5_23", MMCLI_DUMP_MAX="2")
    for _ in range(4):
        _prefill("v0_5_23")
    assert len(_dumps(dumps)) == 2


def test_dump_ranks_skips_other_ranks(fake_sglang: Callable[..., Path]) -> None:
    dumps = fake_sglang("v0_5_23", MMCLI_DUMP_RANKS="1")
    parallel_state = ModuleType("sglang.srt.distributed.parallel_state")
    parallel_state.get_tensor_model_parallel_rank = lambda: 0  # type: ignore[attr-defined]
    sys.modules["sglang.srt.distributed.parallel_state"] = parallel_state
    _prefill("v0_5_23")
    assert _dumps(dumps) == []
    parallel_state.get_tensor_model_parallel_rank = lambda: 1  # type: ignore[attr-defined]
    plugin._settings.capturers.clear()  # type: ignore[union-attr]
    _prefill("v0_5_23")
    (path,) = _dumps(dumps)
    assert "-r1-" in path.name and load_dump(path).metadata["tp_rank"] == "1"


# --------------------------------------------------------------------------- probing


def test_names_imported_before_register_are_rebound(fake_sglang: Callable[..., Path]) -> None:
    """0.5.18+: mm_utils holds mm_schedule's step by name, and model modules hold
    embed_mm_inputs by name; register() after they were imported must reach every copy."""
    dumps = fake_sglang("v0_5_23", mode="failure", register=False)
    mm_utils = importlib.import_module("sglang.srt.managers.mm_utils")
    model_module = importlib.import_module("sglang.srt.models.cosmos3_edge")
    assert not getattr(mm_utils.get_embedding_and_mask, "__mmcli_wrapped__", False)
    plugin.register()
    plugin.register()  # idempotent
    mm_schedule = sys.modules["sglang.srt.managers.mm_schedule"]
    assert mm_utils.get_embedding_and_mask is mm_schedule.get_embedding_and_mask
    assert getattr(mm_utils.get_embedding_and_mask, "__mmcli_wrapped__", False)
    assert getattr(mm_schedule._adjust_embedding_length, "__mmcli_wrapped__", False)
    assert model_module.embed_mm_inputs is mm_utils.embed_mm_inputs
    from fake_sglang_shared.model import FakeVLM, batch

    model = FakeVLM("wide")
    ids, forward_batch = batch([_prompt("v0_5_23", [3, 4])])
    with pytest.raises(RuntimeError):
        model_module.embed(model, ids, forward_batch)
    (path,) = _dumps(dumps)
    assert "hidden-size" in _codes(path)


def test_import_hook_patches_modules_imported_later(fake_sglang: Callable[..., Path]) -> None:
    fake_sglang("v0_5_23")
    assert "sglang.srt.managers.mm_utils" not in sys.modules
    mm_utils = importlib.import_module("sglang.srt.managers.mm_utils")
    assert getattr(mm_utils.get_embedding_and_mask, "__mmcli_wrapped__", False)
    assert getattr(mm_utils.embed_mm_inputs, "__mmcli_wrapped__", False)


def test_step_without_its_length_check_degrades(
    fake_sglang: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    """A release whose step does not call _adjust_embedding_length from its module: the plugin
    dumps the embedding the step returned, and says so once."""
    dumps = fake_sglang("v0_5_11", register=False)
    mm_utils = importlib.import_module("sglang.srt.managers.mm_utils")
    original = mm_utils.get_embedding_and_mask

    def get_embedding_and_mask(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    mm_utils.get_embedding_and_mask = get_embedding_and_mask
    with caplog.at_level(logging.WARNING, logger="mmcli.capture.sglang"):
        plugin.register()
        _prefill("v0_5_11")
        _prefill("v0_5_11")
    (first, _) = _dumps(dumps)
    assert _counts_and_masks(first) == ([3, 4], [3, 4])
    assert sum("_adjust_embedding_length not seen" in r.message for r in caplog.records) == 1


def test_items_without_pad_values_degrade_to_one_item(
    fake_sglang: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    dumps = fake_sglang("v0_5_23")
    monkeypatch.setattr(sglang_items, "pad_values", lambda item: None)
    _prefill("v0_5_23")
    (path,) = _dumps(dumps)
    dump = load_dump(path)
    assert dump.num_items == 1 and dump.is_embed(0) is None
    assert dump.metadata["item_rows"] == "merged"
    assert _codes(path) == set()  # 7 rows for 7 placeholder positions


def test_module_without_the_step_is_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    module = ModuleType("sglang.srt.managers.mm_utils")
    with caplog.at_level(logging.WARNING, logger="mmcli.capture.sglang"):
        assert plugin.patch_module(module) == []
    assert any("has no get_embedding_and_mask" in r.message for r in caplog.records)


def test_capture_error_never_replaces_the_engine_error(
    fake_sglang: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    dumps = fake_sglang("v0_4", mode="failure")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("mmcli bug")

    monkeypatch.setattr(plugin, "build_dump", broken)
    with pytest.raises(RuntimeError, match="Insufficient multimodal embedding length"):
        _prefill("v0_4", "one-short")
    assert _dumps(dumps) == []


# --------------------------------------------------------------------------- before plugins


def test_launcher_registers_in_the_spawned_scheduler(tmp_path: Path) -> None:
    """0.4.x has no plugins: ``python -m mmcli.capture.sglang.launch`` stands in for
    ``python -m sglang.launch_server``, and the scheduler process it spawns captures."""
    dumps = tmp_path / "dumps"
    env = {
        **os.environ,
        "MMCLI_DUMP_DIR": str(dumps),
        "PYTHONPATH": os.pathsep.join([str(FAKE / "v0_4"), str(FAKE), str(ROOT)]),
    }
    env.pop("MMCLI_DUMP_MODE", None)
    done = subprocess.run(
        [sys.executable, "-m", "mmcli.capture.sglang.launch", "--fault", "one-short"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 3, done.stderr  # the scheduler's own exit on the engine's error
    assert "Insufficient multimodal embedding length" in done.stderr
    (path,) = _dumps(dumps)
    assert path.name.endswith("-failure.safetensors")
    assert "mask-count" in _codes(path)
