"""KV specs, map validation and initialize_kv_cache_for_kv_sharing, against hand-made cases
and an independent reference."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mmcli.kv as kv
from mmcli.errors import InputError, KVSharingError
from mmcli.kv import (
    FullAttentionSpec,
    KVCacheGroupSpec,
    Layer,
    SlidingWindowSpec,
    initialize_kv_cache_for_kv_sharing,
    validate_sharing_map,
)
from mmcli.kv.spec import ChunkedLocalAttentionSpec, MLAAttentionSpec, cdiv
from mmcli.kv.state import MambaSpec

FULL = FullAttentionSpec(16, 8, 64, "float16")
SLIDE = SlidingWindowSpec(16, 8, 64, "float16", 4096)


def name(i: int) -> str:
    return f"model.layers.{i}.self_attn.attn"


# --- specs --------------------------------------------------------------------------------


def test_page_size_matches_the_worked_fact() -> None:
    # 2 × block 16 × 8 KV heads × head 64 × 2 bytes (fp16) = 32 KiB per layer and block.
    assert FULL.page_size_bytes == 32 * 1024
    assert SLIDE.page_size_bytes == 32 * 1024
    assert FULL.bytes_per_token == 2048
    assert FullAttentionSpec(16, 8, 64, "fp8").page_size_bytes == 16 * 1024
    assert FullAttentionSpec(16, 8, 128, "float32").page_size_bytes == 131072


def test_blocks_per_request() -> None:
    assert FULL.blocks_per_request(1000, 8192) == 63  # cdiv(1000, 16)
    # min(4095 + 2048, 8192) = 6143 tokens → cdiv 384, + 1 for an unaligned window start
    assert SLIDE.blocks_per_request(8192, 2048) == 385
    assert SLIDE.blocks_per_request(100, 2048) == 8  # cdiv(100, 16) + 1
    assert SLIDE.tokens_held(100) == 100
    assert SLIDE.tokens_held(10_000) == 4096


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_kv_heads": 0}, "num_kv_heads must be a positive integer, got 0"),
        ({"head_size": -64}, "head_size must be a positive integer, got -64"),
        ({"block_size": True}, "block_size must be a positive integer, got True"),
        ({"dtype": "int4"}, "unknown KV dtype 'int4'"),
    ],
)
def test_spec_rejects_bad_values(kwargs: dict[str, object], message: str) -> None:
    values: dict[str, object] = {
        "block_size": 16,
        "num_kv_heads": 8,
        "head_size": 64,
        "dtype": "float16",
        **kwargs,
    }
    with pytest.raises(InputError) as info:
        FullAttentionSpec(**values)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_sliding_spec_needs_a_window() -> None:
    with pytest.raises(InputError, match="sliding_window must be a positive integer, got 0"):
        SlidingWindowSpec(16, 8, 64, "float16")


def test_spec_takes_torch_dtypes_and_aliases() -> None:
    import torch

    assert FullAttentionSpec(16, 8, 64, torch.float16) == FULL  # type: ignore[arg-type]
    assert FullAttentionSpec(16, 8, 64, "bf16").dtype == "bfloat16"
    assert FullAttentionSpec(16, 8, 64, torch.float8_e4m3fn).dtype_bytes == 1  # type: ignore[arg-type]


def test_specs_of_different_kinds_are_not_equal() -> None:
    assert FullAttentionSpec(16, 8, 64, "float16") == FULL
    assert FULL != SLIDE
    assert FullAttentionSpec(16, 8, 64, "bfloat16") != FULL


def test_package_exports() -> None:
    assert kv.KVCacheGroupSpec is KVCacheGroupSpec
    assert kv.initialize_kv_cache_for_kv_sharing is initialize_kv_cache_for_kv_sharing


# --- validate_sharing_map -----------------------------------------------------------------


def codes(layers: list[Layer]) -> list[tuple[str, str | None]]:
    return [(f.code, f.layer) for f in validate_sharing_map(layers)]


def test_valid_map_has_no_findings() -> None:
    layers = [Layer(name(0), FULL), Layer(name(1), SLIDE), Layer(name(2), FULL, name(0))]
    assert validate_sharing_map(layers) == []


def test_every_problem_is_reported_with_its_code() -> None:
    layers = [
        Layer(name(0), FULL),
        Layer(name(1), SLIDE),
        Layer(name(2), FULL, name(0)),
        Layer(name(3), FULL, name(3)),  # self-target
        Layer(name(4), FULL, name(6)),  # target-after
        Layer(name(5), FULL, name(2)),  # chained-target
        Layer(name(6), FULL),
        Layer(name(7), FULL, name(1)),  # attention-kind-mismatch (a warning)
        Layer(name(8), FullAttentionSpec(16, 4, 64, "float16"), name(6)),  # spec-mismatch
        Layer(name(9), FULL, "model.layers.9.self_attn.atn"),  # unknown-target
        Layer(name(6), FULL),  # duplicate-layer
    ]
    assert codes(layers) == [
        ("duplicate-layer", name(6)),
        ("self-target", name(3)),
        ("target-after", name(4)),
        ("chained-target", name(5)),
        ("attention-kind-mismatch", name(7)),
        ("spec-mismatch", name(8)),
        ("unknown-target", name(9)),
    ]
    messages = {f.code: f for f in validate_sharing_map(layers)}
    assert messages["spec-mismatch"].message == (
        f"layer 8 ({name(8)}) and its target layer 6 ({name(6)}) have different KV specs: "
        "num_kv_heads 4 vs 8"
    )
    assert messages["chained-target"].message == (
        f"layer 5 ({name(5)}) shares with layer 2 ({name(2)}), which itself shares with "
        f"{name(0)}; the chain ends at layer 0 ({name(0)})"
    )
    assert messages["unknown-target"].hint == f"did you mean {name(9)}?"
    assert messages["duplicate-layer"].message == (
        f"layer name {name(6)} appears 2 times (indices 6, 10)"
    )
    assert messages["attention-kind-mismatch"].message == (
        f"layer 7 ({name(7)}) (full) shares the cache of layer 1 ({name(1)}) (sliding); the "
        "engine accepts this, as it compares only the attention type (decoder, encoder), but "
        "the target keeps only its last 4096 tokens (older blocks are freed), so layer 7 "
        "cannot see tokens further back and its outputs change past 4096 tokens"
    )
    assert messages["attention-kind-mismatch"].severity == "warning"
    assert all(f.severity == "error" for c, f in messages.items() if c != "attention-kind-mismatch")


def test_cycles_are_chained_targets() -> None:
    layers = [Layer(name(0), FULL, name(1)), Layer(name(1), FULL, name(0))]
    findings = validate_sharing_map(layers)
    assert [f.code for f in findings] == ["target-after", "chained-target", "chained-target"]
    assert "loops (a cycle)" in findings[1].message
    assert "loops (a cycle)" in findings[2].message


def test_window_and_dtype_differences_are_named() -> None:
    layers = [
        Layer(name(0), SLIDE),
        Layer(name(1), SlidingWindowSpec(16, 8, 64, "bfloat16", 512), name(0)),
    ]
    (finding,) = validate_sharing_map(layers)
    assert finding.code == "spec-mismatch"
    assert finding.message.endswith("dtype bfloat16 vs float16, sliding_window 512 vs 4096")


def test_no_kv_layers_cannot_share() -> None:
    layers = [Layer(name(0), None, kind="linear_attention"), Layer(name(1), FULL, name(0))]
    assert codes(layers) == [("attention-mismatch", name(1))]


def test_long_chain_is_linear() -> None:
    n = 20_000
    layers = [Layer(name(0), FULL)] + [Layer(name(i), FULL, name(i - 1)) for i in range(1, n)]
    findings = validate_sharing_map(layers)
    assert len(findings) == n - 2
    assert findings[-1].message.endswith(f"the chain ends at layer 0 ({name(0)})")


# --- initialize_kv_cache_for_kv_sharing ---------------------------------------------------


def test_initialize_aliases_and_appends_in_map_order() -> None:
    groups = [KVCacheGroupSpec(["a", "c"], FULL), KVCacheGroupSpec(["b"], SLIDE)]
    caches: dict[str, object] = {"a": object(), "b": object(), "c": object()}
    initialize_kv_cache_for_kv_sharing({"e": "c", "d": "b", "f": "a"}, groups, caches)
    assert caches["e"] is caches["c"]
    assert caches["d"] is caches["b"]
    assert caches["f"] is caches["a"]
    assert groups[0].layer_names == ["a", "c", "e", "f"]
    assert groups[1].layer_names == ["b", "d"]


@pytest.mark.parametrize(
    ("shared", "problem"),
    [
        ({"d": "d"}, "layer d names itself as its target"),
        ({"d": "zz"}, "layer d targets zz, which is not a known layer"),
        ({"d": "a", "e": "d"}, "layer e targets d, which itself shares with a (chained target)"),
        ({"c": "a"}, "layer c already owns a KV cache or sits in a group"),
        ({"d": "x"}, "layer d targets x, which is in no KV-cache group"),
        ({"d": "y"}, "layer d targets y, which has no cache tensor"),
    ],
)
def test_initialize_refuses_without_mutating(shared: dict[str, str], problem: str) -> None:
    groups = [KVCacheGroupSpec(["a", "c"], FULL), KVCacheGroupSpec(["b", "y"], SLIDE)]
    caches: dict[str, object] = {"a": object(), "b": object(), "c": object(), "x": object()}
    before_groups = copy.deepcopy([g.layer_names for g in groups])
    before_caches = dict(caches)
    with pytest.raises(KVSharingError) as info:
        initialize_kv_cache_for_kv_sharing(shared, groups, caches)
    assert problem in info.value.problems
    assert info.value.exit_code == 2
    assert [g.layer_names for g in groups] == before_groups
    assert caches == before_caches
    assert all(caches[k] is before_caches[k] for k in caches)


def test_initialize_lists_every_problem() -> None:
    groups = [KVCacheGroupSpec(["a"], FULL)]
    caches: dict[str, object] = {"a": object()}
    with pytest.raises(KVSharingError) as info:
        initialize_kv_cache_for_kv_sharing({"b": "b", "c": "nope", "d": "a"}, groups, caches)
    assert info.value.problems == [
        "layer b names itself as its target",
        "layer c targets nope, which is not a known layer",
    ]
    assert str(info.value).startswith("cannot apply the KV-sharing map: 2 problems, first:")
    assert groups[0].layer_names == ["a"]
    assert "d" not in caches


def _reference_apply(
    n_owners: int, shared: dict[str, str]
) -> tuple[dict[str, str], dict[str, list[str]]] | None:
    """Independent model: owners o0..o{k-1}, each alone in group g{j % 2}."""
    owners = {f"o{j}" for j in range(n_owners)}
    for layer, target in shared.items():
        if layer == target or layer in owners or target not in owners:
            return None
    alias = dict(shared)
    members: dict[str, list[str]] = {"g0": [], "g1": []}
    for j in range(n_owners):
        members[f"g{j % 2}"].append(f"o{j}")
    for layer, target in shared.items():
        members[f"g{int(target[1:]) % 2}"].append(layer)
    return alias, members


@settings(max_examples=80, deadline=None)
@given(
    n_owners=st.integers(1, 5),
    entries=st.lists(
        st.tuples(
            st.sampled_from(["s0", "s1", "s2", "o0", "o1"]),
            st.sampled_from(["o0", "o1", "o2", "o3", "o4", "s0", "s1", "zz"]),
        ),
        max_size=5,
    ),
)
def test_initialize_matches_reference(n_owners: int, entries: list[tuple[str, str]]) -> None:
    shared = dict(entries)
    groups = [KVCacheGroupSpec([], FULL), KVCacheGroupSpec([], FULL)]
    caches: dict[str, object] = {}
    for j in range(n_owners):
        groups[j % 2].layer_names.append(f"o{j}")
        caches[f"o{j}"] = object()
    before = (copy.deepcopy([g.layer_names for g in groups]), dict(caches))
    expected = _reference_apply(n_owners, shared)
    if expected is None:
        with pytest.raises(KVSharingError):
            initialize_kv_cache_for_kv_sharing(shared, groups, caches)
        assert ([g.layer_names for g in groups], caches) == before
        return
    initialize_kv_cache_for_kv_sharing(shared, groups, caches)
    alias, members = expected
    for layer, target in alias.items():
        assert caches[layer] is caches[target]
    assert groups[0].layer_names == members["g0"]
    assert groups[1].layer_names == members["g1"]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-1, 9)), min_size=1, max_size=10))
def test_validation_matches_reference(targets: list[int | None]) -> None:
    """validate_sharing_map finds an error exactly when the engine rules say the map is bad."""
    layers = [
        Layer(name(i), FULL, None if t is None else name(t) if t >= 0 else "ghost")
        for i, t in enumerate(targets)
    ]
    n = len(targets)

    def bad(i: int, t: int | None) -> bool:
        if t is None:
            return False
        if t < 0 or t >= n or t >= i:  # unknown, self, or not before
            return True
        return targets[t] is not None  # chained

    expected = any(bad(i, t) for i, t in enumerate(targets))
    assert bool(validate_sharing_map(layers)) == expected


# --- attention kinds: what the engine accepts -------------------------------------------


def test_sliding_sharing_a_full_layer_is_a_warning_that_costs_no_context() -> None:
    layers = [Layer(name(0), FULL), Layer(name(1), SLIDE, name(0))]
    (finding,) = validate_sharing_map(layers)
    assert (finding.code, finding.severity) == ("attention-kind-mismatch", "warning")
    assert finding.message == (
        f"layer 1 ({name(1)}) (sliding) shares the cache of layer 0 ({name(0)}) (full); the "
        "engine accepts this, as it compares only the attention type (decoder, encoder): the "
        "target keeps every token the layer reads, so the layer loses no context and keeps no "
        "pages of its own"
    )
    (strict,) = validate_sharing_map(layers, strict=True)
    assert (strict.code, strict.severity) == ("attention-kind-mismatch", "error")


def test_full_sharing_a_sliding_layer_loses_context() -> None:
    layers = [Layer(name(0), SLIDE), Layer(name(1), FULL, name(0))]
    (finding,) = validate_sharing_map(layers)
    assert finding.severity == "warning"
    assert "outputs change past 4096 tokens" in finding.message
    # The window is the kind's difference, not also a spec mismatch.
    assert [f.code for f in validate_sharing_map(layers, strict=True)] == [
        "attention-kind-mismatch"
    ]


def test_state_layers_cannot_share_or_be_shared() -> None:
    state = MambaSpec("linear", "bfloat16", "bfloat16", num_heads=2, head_dim=8)
    layers = [
        Layer(name(0), state, kind="mamba"),
        Layer(name(1), FULL, name(0)),
        Layer(name(2), FULL),
        Layer(name(3), state, name(2), kind="mamba"),
    ]
    assert codes(layers) == [("attention-mismatch", name(1)), ("attention-mismatch", name(3))]
    assert all(f.severity == "error" for f in validate_sharing_map(layers, strict=False))


def test_chunked_and_mla_specs() -> None:
    chunk = ChunkedLocalAttentionSpec(16, 8, 64, "float16", 8192)
    assert chunk.blocks_per_request(32768, 2048) == cdiv(8192 + 2048, 16)
    mla = MLAAttentionSpec(16, 1, 576, "bfloat16")
    assert mla.page_size_bytes == 16 * 576 * 2
    layers = [Layer(name(0), mla), Layer(name(1), mla, name(0))]
    assert validate_sharing_map(layers) == []
