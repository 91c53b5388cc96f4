"""Plan options: parsed and checked once, when a PlanOptions is built."""

from __future__ import annotations

import pytest

from mmcli.errors import InputError
from mmcli.kv.options import PlanOptions, parse_size

MiB = 2**20
GiB = 2**30


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("20GiB", 20 * GiB),
        ("80GB", 80 * 10**9),
        ("512MiB", 512 * MiB),
        ("1.5GiB", 3 * GiB // 2),
        ("1048576", MiB),
        ("64 kib", 65536),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "20G", "-5GiB", "", "1e9"])
def test_parse_size_refuses(text: str) -> None:
    with pytest.raises(InputError, match="as a memory size"):
        parse_size(text)


def test_parse_size_refuses_zero() -> None:
    with pytest.raises(InputError, match="is zero bytes"):
        parse_size("0GiB")


def test_options_are_stored_canonical() -> None:
    options = PlanOptions(kv_dtype=" BF16 ", memory="1.5GiB")
    assert options.kv_dtype == "bfloat16"
    assert options.memory_bytes == 3 * GiB // 2
    assert PlanOptions(kv_dtype="Auto").kv_dtype == "auto"
    assert PlanOptions(memory_bytes=MiB).memory_bytes == MiB


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"kv_dtype": "fp7"}, "--kv-dtype: unknown dtype 'fp7'"),
        ({"memory": "lots"}, "cannot read 'lots' as a memory size"),
        ({"max_num_batched_tokens": 0}, "--max-num-batched-tokens must be a positive integer"),
        ({"max_model_len": -5}, "--max-model-len must be a positive integer, got -5"),
        ({"block_size": 0}, "--block-size must be a positive integer, got 0"),
        ({"tensor_parallel_size": 0}, "--tensor-parallel-size must be a positive integer"),
        # The first bad option is the one reported, in the command line's order.
        ({"kv_dtype": "fp7", "memory": "lots", "block_size": 0}, "--kv-dtype"),
        ({"memory": "lots", "block_size": 0}, "as a memory size"),
    ],
)
def test_bad_options_are_refused_when_built(values: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        PlanOptions(**values)  # type: ignore[arg-type]


def test_memory_given_twice_is_a_programming_error() -> None:
    with pytest.raises(TypeError):
        PlanOptions(memory="1GiB", memory_bytes=GiB)
