"""The vLLM plugin against stand-in module trees of the covered releases (tests/capture/fake_vllm).

Each test puts one tree first on ``sys.path``, registers the plugin (which installs its import
hook), imports the tree's runner modules as vLLM would, runs the encoder step or start-up
profiling with a tiny fake model, and reads back what was dumped.
"""

from __future__ import annotations

import importlib
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch

from mmcli.capture.vllm import plugin, write
from mmcli.capture.vllm.state import holder, state
from mmcli.check_embeddings import check_file
from mmcli.dump.io import load_dump

FAKE = Path(__file__).parent / "fake_vllm"
HIDDEN = 16
ROWS = 4  # embeddings per image
IMAGE_TOKEN, BREAK = 9, 10  # each range: a break token, ROWS image tokens, a break token
PROMPT = [1, 2, 3, 4, 5, BREAK, *[IMAGE_TOKEN] * ROWS, BREAK, 6, 6, 6, 6, BREAK]
PROMPT += [*[IMAGE_TOKEN] * ROWS, BREAK, 7, 8]
#: The model's config as vLLM holds it (``model_config.hf_config``): a language model wider
#: than the vision tower's rows would be would show here, not in the rows.
CONFIG = SimpleNamespace(
    text_config=SimpleNamespace(hidden_size=HIDDEN), image_token_index=IMAGE_TOKEN
)

#: A LLaVA-like config with its vision tower: no ``deepstack_visual_indexes`` (vLLM 0.20.0
#: vllm/model_executor/models/qwen3_vl.py: no such key, no deepstack levels).
LLAVA_CONFIG = SimpleNamespace(
    text_config=SimpleNamespace(hidden_size=HIDDEN),
    vision_config=SimpleNamespace(hidden_size=8),
    image_token_index=IMAGE_TOKEN,
)


def _forget_vllm() -> None:
    for name in list(sys.modules):
        if name == "vllm" or name.startswith(("vllm.", "fake_vllm_shared")):
            del sys.modules[name]


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``load(tree, mode=..., register=True, **env)``: env set, plugin registered, tree on path."""
    saved = {n: m for n, m in sys.modules.items() if n == "vllm" or n.startswith("vllm.")}
    dumps = tmp_path / "dumps"

    def load(tree: str, mode: str | None = "always", register: bool = True, **env: str) -> Path:
        _forget_vllm()
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
    state.__init__()  # type: ignore[misc]
    _forget_vllm()
    sys.modules.update(saved)


class FakeModel:
    """``embed_multimodal``/``get_multimodal_embeddings``: ROWS rows per image, or a fault."""

    def __init__(self, fault: str | None = None) -> None:
        self.fault = fault
        self.calls = 0
        self.config = LLAVA_CONFIG if fault == "wide" else CONFIG

    def embed_multimodal(self, pixel_values: torch.Tensor) -> Any:
        self.calls += 1
        n = pixel_values.shape[0]
        base = pixel_values.reshape(n, -1)[:, :1]  # each image's first pixel marks its rows
        out = [base[i].expand(ROWS, HIDDEN).clone() + torch.arange(HIDDEN) for i in range(n)]
        if self.fault == "batch-dim":
            return [o.unsqueeze(0) for o in out]
        if self.fault == "one-short":
            return out[:-1]
        if self.fault == "none":
            return None
        if self.fault == "zero":  # no item at all for a prompt with images
            return []
        if self.fault == "narrow":  # a projector one column short: the check passes
            return [o[:, :-1] for o in out]
        if self.fault == "wide":  # a projector twice the language model's width
            return [torch.cat([o, o], dim=-1) for o in out]
        if self.fault == "row-short":  # item 0 one row short of its mask: the check passes
            return [out[0][:-1], *out[1:]]
        return out

    get_multimodal_embeddings = embed_multimodal


def _image(value: float, modality: str = "image") -> Any:
    from vllm.multimodal.inputs import MultiModalKwargsItem

    return MultiModalKwargsItem(modality, pixel_values=torch.full((3, 8, 8), value))


def _features(values: list[float], *, offset: int = 5, modality: str = "image") -> list[Any]:
    """One feature per value; item i's range has ROWS + 2 positions, the ends not embeds."""
    from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange

    mask = torch.tensor([False] + [True] * ROWS + [False])
    return [
        MultiModalFeatureSpec(
            data=_image(v, modality),
            modality=modality,
            identifier=f"hash{v:g}",
            mm_position=PlaceholderRange(offset + 10 * i, ROWS + 2, mask),
        )
        for i, v in enumerate(values)
    ]


def _scheduled(**reqs: list[int]) -> SimpleNamespace:
    return SimpleNamespace(scheduled_encoder_inputs=dict(reqs))


def _v1_runner(tree: str, fault: str | None = None) -> Any:
    module = importlib.import_module("vllm.v1.worker.gpu_model_runner")
    runner = module.GPUModelRunner(FakeModel(fault), HIDDEN)
    batch = importlib.import_module("vllm.v1.worker.gpu_input_batch")
    if tree == "v0_10":
        from vllm.multimodal.inputs import PlaceholderRange

        mask = torch.tensor([False] + [True] * ROWS + [False])
        runner.requests["r0"] = batch.CachedRequestState(
            "r0",
            mm_kwargs=[_image(1.0), _image(2.0)],
            mm_hashes=["hash1", "hash2"],
            mm_positions=[PlaceholderRange(5, ROWS + 2, mask), PlaceholderRange(15, ROWS)],
        )
    else:
        runner.requests["r0"] = batch.CachedRequestState(
            "r0", mm_features=_features([1.0, 2.0]), prompt_token_ids=PROMPT
        )
    return runner


def _dumps(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.safetensors"))


def _ranges(path: Path) -> list[list[int]]:
    from safetensors.torch import load_file

    ranges: list[list[int]] = load_file(str(path))["placeholder_ranges"].tolist()
    return ranges


def _codes(path: Path) -> set[str]:
    report = check_file(path, device=torch.device("cpu"))
    return {f.code for f in report.findings if f.severity == "error"}


def _assert_masks(path: Path, ranges: list[tuple[int, int]]) -> None:
    dump = load_dump(path)
    assert dump.num_items == len(ranges)
    for i in range(dump.num_items):
        mask = dump.is_embed(i)
        assert mask is not None and mask.dtype == torch.bool
        assert mask.shape == (ranges[i][1],) and int(mask.sum()) == ROWS


# --------------------------------------------------------------------------- registration


def test_inert_without_dump_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MMCLI_DUMP_DIR", raising=False)
    before = list(sys.meta_path)
    plugin.register()
    assert sys.meta_path == before
    assert holder.settings is None


def test_register_imports_neither_torch_nor_vllm(tmp_path: Path) -> None:
    import subprocess

    code = (
        "import sys, os; os.environ['MMCLI_DUMP_DIR'] = sys.argv[1];"
        "import mmcli.capture.vllm as p; p.register();"
        "print(sorted(m for m in ('torch', 'vllm') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_bad_mode_leaves_plugin_inert(fake_vllm: Callable[..., Path]) -> None:
    fake_vllm("v0_29", mode="sometimes")
    assert holder.settings is None


# --------------------------------------------------------------------------- V1 runner


@pytest.mark.parametrize("tree", ["v0_10", "v0_15", "v0_29"])
def test_v1_healthy_always_dumps_with_masks(tree: str, fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm(tree)
    runner = _v1_runner(tree)
    module = sys.modules["vllm.v1.worker.gpu_model_runner"]
    assert getattr(module.sanity_check_mm_encoder_outputs, "__mmcli_wrapped__", False)
    runner._execute_mm_encoder(_scheduled(r0=[0, 1]))
    (path,) = _dumps(dumps)
    assert "-execute-" in path.name and path.name.endswith("-always.safetensors")
    _assert_masks(path, [(5, ROWS + 2), (15, ROWS if tree == "v0_10" else ROWS + 2)])
    meta = load_dump(path).metadata
    assert meta["engine"] == "vllm"
    assert meta["phase"] == "execute"
    assert meta["runner"] == "v1"
    assert meta["hidden_size"] == str(HIDDEN)
    assert meta["expected_num_items"] == "2"
    assert meta["version_vllm"] == sys.modules["vllm"].__version__
    assert _codes(path) == set()
    # dump directory is private
    assert stat.S_IMODE(os.stat(dumps).st_mode) == 0o700


@pytest.mark.parametrize("tree", ["v0_10", "v0_15", "v0_29"])
@pytest.mark.parametrize(
    ("fault", "code"), [("batch-dim", "item-ndim"), ("one-short", "item-count")]
)
def test_v1_failure_reraises_engine_error_and_dumps(
    tree: str, fault: str, code: str, fake_vllm: Callable[..., Path]
) -> None:
    dumps = fake_vllm(tree, mode=None)  # failure is the default
    runner = _v1_runner(tree, fault)
    with pytest.raises(AssertionError) as info:
        runner._execute_mm_encoder(_scheduled(r0=[0, 1]))
    # the engine's own error, unchanged: raised from the engine's check
    assert info.value.__traceback__ is not None
    frames = [f.co_name for f in _frames(info.value.__traceback__)]
    assert frames[-1] == "sanity_check_mm_encoder_outputs"
    assert "Expected" in str(info.value)
    (path,) = _dumps(dumps)
    assert path.name.endswith("-failure.safetensors")
    meta = load_dump(path).metadata
    assert meta["engine_error"].startswith("AssertionError: Expected")
    assert code in _codes(path)


def _frames(tb: Any) -> Iterator[Any]:
    while tb is not None:
        yield tb.tb_frame.f_code
        tb = tb.tb_next


def test_failure_mode_writes_nothing_when_healthy(fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm("v0_29", mode="failure")
    _v1_runner("v0_29")._execute_mm_encoder(_scheduled(r0=[0, 1]))
    assert _dumps(dumps) == []


def test_none_return_is_dumped_as_a_record(fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm("v0_29", mode="failure")
    with pytest.raises(AssertionError):
        _v1_runner("v0_29", "none")._execute_mm_encoder(_scheduled(r0=[0, 1]))
    (path,) = _dumps(dumps)
    assert load_dump(path).metadata.get("encoder_return_type") == "NoneType"


def test_check_mode_dumps_only_batches_with_findings(fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm("v0_29", mode="check")
    runner = _v1_runner("v0_29")
    runner._execute_mm_encoder(_scheduled(r0=[0, 1]))
    assert _dumps(dumps) == []
    # A mask that claims one embedding too many: the engine's check passes, mmcli's does not.
    from vllm.multimodal.inputs import PlaceholderRange

    wide = torch.tensor([True] * (ROWS + 1) + [False])
    runner.requests["r0"].mm_features[1].mm_position = PlaceholderRange(15, ROWS + 2, wide)
    runner._execute_mm_encoder(_scheduled(r0=[0, 1]))
    (path,) = _dumps(dumps)
    assert path.name.endswith("-check.safetensors")
    assert "mask-count" in _codes(path)


def test_sequential_video_batches_keep_their_ranges(fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm("v0_29")
    runner = _v1_runner("v0_29")
    runner.requests["r1"] = importlib.import_module(
        "vllm.v1.worker.gpu_input_batch"
    ).CachedRequestState("r1", mm_features=_features([3.0, 4.0], offset=100, modality="video"))
    runner._execute_mm_encoder(_scheduled(r0=[0, 1], r1=[0, 1]))
    paths = _dumps(dumps)
    assert len(paths) == 2  # one image batch, one video batch (encoded item by item)
    by_modality = {load_dump(p).metadata.get("modality"): p for p in paths}
    assert set(by_modality) == {"image", "video"}
    video = load_dump(by_modality["video"])
    assert video.num_items == 2 and video.is_embed(1) is not None
    assert _ranges(by_modality["video"]) == [[100, ROWS + 2], [110, ROWS + 2]]
    assert _ranges(by_modality["image"]) == [[5, ROWS + 2], [15, ROWS + 2]]


def test_profile_run_is_captured_without_masks(fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm("v0_29")
    module = importlib.import_module("vllm.v1.worker.cpu_model_runner")
    runner = module.CPUModelRunner(FakeModel(), HIDDEN)
    runner.warming_up_model()
    (path,) = _dumps(dumps)
    assert "-profile-" in path.name
    dump = load_dump(path)
    assert dump.metadata["phase"] == "profile"
    assert dump.num_items == runner.dummy_items and dump.is_embed(0) is None


def test_profile_failure_reraises(fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm("v0_10", mode="failure")
    module = importlib.import_module("vllm.v1.worker.gpu_model_runner")
    with pytest.raises(AssertionError):
        module.GPUModelRunner(FakeModel("one-short"), HIDDEN).profile_run()
    (path,) = _dumps(dumps)
    assert "-profile-" in path.name and "item-count" in _codes(path)


# --------------------------------------------------------------------------- Model Runner V2


def _v2_runner(tree: str, fault: str | None = None, where: str = "gpu") -> tuple[Any, Any]:
    model = FakeModel(fault)
    module = importlib.import_module(
        f"vllm.v1.worker.{where}.mm.encoder_runner".replace("cpu.mm.", "cpu.")
    )
    if tree == "v0_15":
        runner = module.EncoderRunner(64, HIDDEN, torch.float32, torch.device("cpu"))
        runner.add_request("r0", _features([1.0, 2.0]))
        return runner, model
    cache_module = importlib.import_module(
        f"vllm.v1.worker.{where}.mm.encoder_cache".replace("cpu.mm.", "cpu.")
    )
    cache = cache_module.EncoderCache()
    cache.add_request("r0", _features([1.0, 2.0]))
    runner = module.EncoderRunner(model, 64, HIDDEN, cache, torch.float32, torch.device("cpu"))
    return runner, model


def _v2_step(tree: str, runner: Any, model: Any, scheduled: dict[str, list[int]]) -> Any:
    mm_hashes, mm_kwargs = runner.prepare_mm_inputs(scheduled)
    if tree == "v0_15":
        return runner.execute_mm_encoder(model, mm_hashes, mm_kwargs)
    return runner.execute_mm_encoder(mm_kwargs)


@pytest.mark.parametrize(
    ("tree", "where"), [("v0_15", "gpu"), ("v0_29", "gpu"), ("v0_34", "gpu"), ("v0_34", "cpu")]
)
def test_v2_healthy_and_faulted(tree: str, where: str, fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm(tree, mode="check")
    runner, model = _v2_runner(tree, where=where)
    _v2_step(tree, runner, model, {"r0": [0, 1]})
    assert _dumps(dumps) == []
    runner, model = _v2_runner(tree, "batch-dim", where=where)
    with pytest.raises(AssertionError, match="2D"):
        _v2_step(tree, runner, model, {"r0": [0, 1]})
    (path,) = _dumps(dumps)
    assert load_dump(path).metadata["runner"] == "v2"
    assert "item-ndim" in _codes(path)
    dump = load_dump(path)
    assert dump.is_embed(0) is not None and int(dump.is_embed(0).sum()) == ROWS


def test_v2_modality_sort_keeps_ranges_with_their_items(fake_vllm: Callable[..., Path]) -> None:
    """0.34 sorts items by modality before batching: masks must follow the items."""
    dumps = fake_vllm("v0_34")
    runner, model = _v2_runner("v0_34")
    video = _features([7.0], offset=200, modality="video")
    runner.encoder_cache.add_request("r1", video)
    runner.encoder_cache.add_request("r2", _features([9.0], offset=300))  # image after the video
    _v2_step("v0_34", runner, model, {"r1": [0], "r2": [0]})
    paths = _dumps(dumps)
    ranges = {load_dump(p).metadata["modality"]: _ranges(p) for p in paths}
    assert ranges == {"image": [[300, ROWS + 2]], "video": [[200, ROWS + 2]]}
    image = next(p for p in paths if load_dump(p).metadata["modality"] == "image")
    assert float(load_dump(image).embedding(0)[0, 0]) == 9.0  # the image's own rows


def test_v2_profile_encoder_cache(fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm("v0_29", mode="failure")
    runner, _ = _v2_runner("v0_29", "one-short")
    dummy = [("image", _image(0.0)), ("image", _image(0.0))]
    with pytest.raises(AssertionError):
        runner.profile_encoder_cache(dummy, None)
    (path,) = _dumps(dumps)
    assert load_dump(path).metadata["phase"] == "profile"
    assert "item-count" in _codes(path)


# --------------------------------------------------------------------------- limits and ranks


def test_dump_max(fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm("v0_29", MMCLI_DUMP_MAX="2")
    runner = _v1_runner("v0_29")
    for _ in range(4):
        runner._execute_mm_encoder(_scheduled(r0=[0, 1]))
    assert len(_dumps(dumps)) == 2


def test_dump_ranks_skips_other_ranks(fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm("v0_29", MMCLI_DUMP_RANKS="1")
    parallel_state = ModuleType("vllm.distributed.parallel_state")
    parallel_state.get_tensor_model_parallel_rank = lambda: 0  # type: ignore[attr-defined]
    sys.modules["vllm.distributed.parallel_state"] = parallel_state
    _v1_runner("v0_29")._execute_mm_encoder(_scheduled(r0=[0, 1]))
    assert _dumps(dumps) == []
    parallel_state.get_tensor_model_parallel_rank = lambda: 1  # type: ignore[attr-defined]
    holder.settings.capturers.clear()  # type: ignore[union-attr]
    _v1_runner("v0_29")._execute_mm_encoder(_scheduled(r0=[0, 1]))
    (path,) = _dumps(dumps)
    assert "-r1-" in path.name


# --------------------------------------------------------------------------- probing


def test_modules_imported_before_register_are_patched(fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm("v0_29", register=False)
    module = importlib.import_module("vllm.v1.worker.gpu_model_runner")
    assert not getattr(module.sanity_check_mm_encoder_outputs, "__mmcli_wrapped__", False)
    plugin.register()
    plugin.register()  # idempotent
    assert getattr(module.sanity_check_mm_encoder_outputs, "__mmcli_wrapped__", False)
    _v1_runner("v0_29")._execute_mm_encoder(_scheduled(r0=[0, 1]))
    assert len(_dumps(dumps)) == 1


def test_unknown_runner_shape_degrades_to_no_masks(fake_vllm: Callable[..., Path]) -> None:
    """A release whose preparation step is not recognised still dumps, without masks."""
    dumps = fake_vllm("v0_29")
    module = importlib.import_module("vllm.v1.worker.gpu_model_runner")
    runner = _v1_runner("v0_29")
    original = module.GPUModelRunner._batch_mm_inputs_from_scheduler.__wrapped__
    runner._batch_mm_inputs_from_scheduler = original.__get__(runner)  # bypass the hook
    runner._execute_mm_encoder(_scheduled(r0=[0, 1]))
    (path,) = _dumps(dumps)
    assert load_dump(path).is_embed(0) is None


def test_capture_error_never_replaces_the_engine_error(
    fake_vllm: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_vllm("v0_29", mode="failure")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("mmcli bug")

    monkeypatch.setattr(write, "batch_context", broken)
    with pytest.raises(AssertionError):
        _v1_runner("v0_29", "one-short")._execute_mm_encoder(_scheduled(r0=[0, 1]))


# --------------------------------------------------------------------------- the merge


def _encode(tree: str, fault: str | None) -> tuple[list[torch.Tensor], list[Any]]:
    """Run the encoder step as the runner does; its outputs (as cached) and their ranges."""
    if tree == "v0_34":
        runner, model = _v2_runner(tree, fault)
        outputs = _v2_step(tree, runner, model, {"r0": [0, 1]})
        return outputs, [f.mm_position for f in runner.encoder_cache.mm_features["r0"]]
    runner = _v1_runner(tree, fault)
    runner._execute_mm_encoder(_scheduled(r0=[0, 1]))
    request = runner.requests["r0"]
    if tree == "v0_10":
        return [runner.encoder_cache[h] for h in request.mm_hashes], request.mm_positions
    features = request.mm_features
    return [runner.encoder_cache[f.identifier] for f in features], [f.mm_position for f in features]


def _gather(outputs: list[torch.Tensor], ranges: list[Any]) -> tuple[list[Any], torch.Tensor]:
    """What ``_gather_mm_embeddings`` hands the merge for a prompt scheduled whole: each item's
    rows (views of its cached output) and the prompt's placeholder mask."""
    is_multimodal = torch.zeros(40, dtype=torch.bool)
    rows = []
    for output, pos in zip(outputs, ranges, strict=True):
        embeds = pos.get_num_embeds()
        mask = torch.ones(pos.length, dtype=torch.bool) if pos.is_embed is None else pos.is_embed
        is_multimodal[pos.offset : pos.offset + pos.length] |= mask
        rows.append(output[:embeds])
    return rows, is_multimodal


def _merge(tree: str, rows: list[Any], is_multimodal: torch.Tensor) -> torch.Tensor:
    """The model's merge, as each release calls it."""
    inputs = torch.zeros(len(is_multimodal), HIDDEN)
    if tree == "v0_10":
        utils = importlib.import_module("vllm.model_executor.models.utils")
        ids = torch.where(is_multimodal, 99, 1)
        merged: torch.Tensor = utils.merge_multimodal_embeddings(ids, inputs, rows, 99)
        return merged
    interfaces = importlib.import_module("vllm.model_executor.models.interfaces")
    merged = interfaces.embed_input_ids(inputs, rows, is_multimodal=is_multimodal)
    return merged


@pytest.mark.parametrize("tree", ["v0_10", "v0_15", "v0_29", "v0_34"])
def test_narrow_rows_fail_at_the_merge_and_are_dumped(
    tree: str, fake_vllm: Callable[..., Path]
) -> None:
    """A projector one column short passes the engine's check and fails in the merge."""
    dumps = fake_vllm(tree, mode=None)  # failure is the default
    outputs, ranges = _encode(tree, "narrow")
    assert _dumps(dumps) == []  # the check passed
    with pytest.raises(ValueError, match="Error during (masked scatter|index put)") as info:
        _merge(tree, *_gather(outputs, ranges))
    (path,) = _dumps(dumps)
    assert path.name.endswith("-failure.safetensors")
    meta = load_dump(path).metadata
    assert meta["engine_error"] == f"ValueError: {info.value}"
    assert (meta["failed_at"], meta["embedding_source"]) == ("merge", "encoder")
    assert meta["hidden_size"] == str(HIDDEN)
    _assert_masks(path, [(r.offset, r.length) for r in ranges])
    assert "hidden-size" in _codes(path)


def test_a_short_item_fails_at_the_merge_with_its_mask(fake_vllm: Callable[..., Path]) -> None:
    dumps = fake_vllm("v0_29", mode="failure")
    outputs, ranges = _encode("v0_29", "row-short")
    with pytest.raises(ValueError, match="Attempted to assign 3 \\+ 4 = 7 multimodal tokens"):
        _merge("v0_29", *_gather(outputs, ranges))
    (path,) = _dumps(dumps)
    assert "mask-count" in _codes(path)


def test_merge_inputs_not_from_a_checked_batch_are_dumped_as_they_are(
    fake_vllm: Callable[..., Path],
) -> None:
    """Rows served from the encoder cache of an earlier step: the merge's own inputs."""
    dumps = fake_vllm("v0_29", mode="failure")
    outputs, ranges = _encode("v0_29", "narrow")
    rows, is_multimodal = _gather([o.clone() for o in outputs], ranges)
    with pytest.raises(ValueError):
        _merge("v0_29", rows, is_multimodal)
    (path,) = _dumps(dumps)
    dump = load_dump(path)
    assert dump.metadata["embedding_source"] == "merge" and dump.num_items == 2
    assert "placeholder_positions" in dump.header.tensors
    assert "hidden-size" in _codes(path)


def test_healthy_merge_writes_nothing_and_returns_the_engine_result(
    fake_vllm: Callable[..., Path],
) -> None:
    dumps = fake_vllm("v0_29", mode="failure")
    outputs, ranges = _encode("v0_29", None)
    rows, is_multimodal = _gather(outputs, ranges)
    merged = _merge("v0_29", rows, is_multimodal)
    assert torch.equal(merged[is_multimodal], torch.cat(rows))
    assert _dumps(dumps) == []


def test_model_modules_holding_the_merge_by_name_are_rebound(
    fake_vllm: Callable[..., Path],
) -> None:
    dumps = fake_vllm("v0_29", mode="failure", register=False)
    early = importlib.import_module("vllm.model_executor.models.qwen3_vl")
    plugin.register()  # after the model module imported the name
    assert getattr(early._merge_multimodal_embeddings, "__mmcli_wrapped__", False)
    outputs, ranges = _encode("v0_29", "narrow")
    rows, is_multimodal = _gather(outputs, ranges)
    with pytest.raises(ValueError):
        early.embed_input_ids(torch.zeros(40, HIDDEN), rows, is_multimodal)
    assert len(_dumps(dumps)) == 1


def test_zero_items_dump_is_checked_as_item_count(fake_vllm: Callable[..., Path]) -> None:
    """The encoder returned no item for two images: a dump of zero items with both slots."""
    from typer.testing import CliRunner

    from mmcli.cli.main import app

    dumps = fake_vllm("v0_29", mode="failure")
    with pytest.raises(AssertionError, match="but got len"):
        _v1_runner("v0_29", "zero")._execute_mm_encoder(_scheduled(r0=[0, 1]))
    (path,) = _dumps(dumps)
    dump = load_dump(path)
    assert dump.num_items == 0 and dump.layout.num_masks == 2
    assert _ranges(path) == [[5, ROWS + 2], [15, ROWS + 2]]
    result = CliRunner().invoke(app, ["check-embeddings", str(path), "--device", "cpu"])
    assert result.exit_code == 1, result.output
    assert "item-count" in result.output and "0 item(s) but 2 expected" in result.output


@pytest.mark.parametrize("tree", ["v0_15", "v0_29"])
def test_a_one_request_batch_records_the_prompt(tree: str, fake_vllm: Callable[..., Path]) -> None:
    """The prompt's token ids, as the transformers capture records them (for compare)."""
    from safetensors.torch import load_file

    dumps = fake_vllm(tree)
    _v1_runner(tree)._execute_mm_encoder(_scheduled(r0=[0, 1]))
    (path,) = _dumps(dumps)
    assert load_file(str(path))["input_ids"].tolist() == PROMPT
    assert _codes(path) == set()


def test_checked_batches_kept_for_the_merge_are_bounded(fake_vllm: Callable[..., Path]) -> None:
    """Without a preparation step to start a new one, the references do not pile up."""
    fake_vllm("v0_29", mode="failure")
    check = importlib.import_module("vllm.v1.worker.utils").sanity_check_mm_encoder_outputs
    for _ in range(3 * plugin.MAX_CHECKED):
        check([torch.zeros(2, HIDDEN)], expected_num_items=1)
    assert len(state.checked) == plugin.MAX_CHECKED


# --------------------------------------------------------------------------- the model's facts


def _model_meta(path: Path) -> tuple[str | None, str | None, str | None, str | None]:
    meta = load_dump(path).metadata
    return (
        meta.get("hidden_size"),
        meta.get("hidden_size_source"),
        meta.get("dtype"),
        meta.get("placeholder_token_ids"),
    )


@pytest.mark.parametrize("tree", ["v0_10", "v0_15", "v0_29"])
def test_v1_dumps_record_the_model_config(tree: str, fake_vllm: Callable[..., Path]) -> None:
    """The hidden size from ``model_config.hf_config.text_config.hidden_size``, the runner's
    dtype (vLLM 0.10.2 vllm/v1/worker/gpu_model_runner.py: ``self.dtype =
    self.model_config.dtype``) and the image placeholder id (LLaVA's ``image_token_index``)."""
    dumps = fake_vllm(tree)
    _v1_runner(tree)._execute_mm_encoder(_scheduled(r0=[0, 1]))
    (path,) = _dumps(dumps)
    expected = (str(HIDDEN), "text_config.hidden_size", "float32", str(IMAGE_TOKEN))
    assert _model_meta(path) == expected


@pytest.mark.parametrize(("tree", "where"), [("v0_29", "gpu"), ("v0_34", "gpu"), ("v0_34", "cpu")])
def test_v2_dumps_record_the_model_config(
    tree: str, where: str, fake_vllm: Callable[..., Path]
) -> None:
    """Model Runner V2's encoder runner has no model_config (vLLM 0.34.0
    vllm/v1/worker/gpu/mm/encoder_runner.py: ``EncoderRunner(model, max_num_tokens,
    hidden_size, …)``); the model's ``config`` is the hf_config (vllm/model_executor/models/
    llava.py: ``self.config = config``)."""
    dumps = fake_vllm(tree)
    runner, model = _v2_runner(tree, where=where)
    _v2_step(tree, runner, model, {"r0": [0, 1]})
    (path,) = _dumps(dumps)
    expected = (str(HIDDEN), "text_config.hidden_size", "float32", str(IMAGE_TOKEN))
    assert _model_meta(path) == expected


def test_v2_without_a_model_records_the_runner_hidden_size(fake_vllm: Callable[..., Path]) -> None:
    """vLLM 0.15.0 vllm/v1/worker/gpu/mm/encoder_runner.py: ``EncoderRunner(max_num_tokens,
    hidden_size, dtype, device)`` holds no model: the hidden size it was given, said so."""
    dumps = fake_vllm("v0_15")
    runner, model = _v2_runner("v0_15")
    _v2_step("v0_15", runner, model, {"r0": [0, 1]})
    (path,) = _dumps(dumps)
    assert _model_meta(path) == (str(HIDDEN), "runner", "float32", None)


@pytest.mark.parametrize("tree", ["v0_10", "v0_29", "v0_34"])
def test_merge_failure_records_the_config_hidden_size(
    tree: str, fake_vllm: Callable[..., Path]
) -> None:
    """The merge-failure dump carries the config's hidden size, not the width of a tensor."""
    dumps = fake_vllm(tree, mode=None)
    outputs, ranges = _encode(tree, "narrow")
    with pytest.raises(ValueError):
        _merge(tree, *_gather(outputs, ranges))
    (path,) = _dumps(dumps)
    expected = (str(HIDDEN), "text_config.hidden_size", "float32", str(IMAGE_TOKEN))
    assert _model_meta(path) == expected
    assert "row_width" not in load_dump(path).metadata


def test_merge_failure_without_a_config_records_the_inputs_width(
    fake_vllm: Callable[..., Path],
) -> None:
    dumps = fake_vllm("v0_29", mode=None)
    runner = _v1_runner("v0_29", "narrow")
    runner.model.config = None
    runner._execute_mm_encoder(_scheduled(r0=[0, 1]))
    request = runner.requests["r0"]
    outputs = [runner.encoder_cache[f.identifier] for f in request.mm_features]
    runner.hidden_size = None  # nothing but the merge's own inputs says the width
    state.runner.hidden_size = None
    with pytest.raises(ValueError):
        _merge("v0_29", *_gather(outputs, [f.mm_position for f in request.mm_features]))
    (path,) = _dumps(dumps)
    meta = load_dump(path).metadata
    assert (meta["hidden_size"], meta["hidden_size_source"]) == (str(HIDDEN), "inputs_embeds")


@pytest.mark.parametrize("tree", ["v0_10", "v0_29", "v0_34"])
def test_wide_rows_are_judged_against_the_config(tree: str, fake_vllm: Callable[..., Path]) -> None:
    """Rows twice the hidden size: the dump records the config's 0 deepstack levels, so
    check-embeddings names the projector's width (an error), not a deepstack guess."""
    dumps = fake_vllm(tree, mode="always")
    _encode(tree, "wide")
    (path, *_) = _dumps(dumps)
    meta = load_dump(path).metadata
    assert (meta["deepstack_levels"], meta["hidden_size"]) == ("0", str(HIDDEN))
    report = check_file(path, device=torch.device("cpu"))
    widths = [f for f in report.findings if f.code == "hidden-size"]
    assert widths and "(config key text_config.hidden_size)" in widths[0].message
    assert "deepstack-width" not in {f.code for f in report.findings}
