"""One :class:`PoolRequest` for the engines other than vLLM: SGLang's and TensorRT-LLM's
options extend it instead of repeating its fields, and are built from it."""

from __future__ import annotations

from dataclasses import fields

import pytest

from mmcli.kv.figures import PoolRequest
from mmcli.kv.sglang import SglangOptions
from mmcli.kv.trtllm import TrtllmOptions

SHARED = {f.name for f in fields(PoolRequest)}


@pytest.mark.parametrize("options", [SglangOptions, TrtllmOptions])
def test_the_engines_options_extend_the_pool_request(options: type[PoolRequest]) -> None:
    assert issubclass(options, PoolRequest)
    own = [f.name for f in fields(options) if f.name not in SHARED]
    assert "release" in own and not SHARED & set(own)


def test_from_request_keeps_the_shared_fields_and_takes_the_engines_own() -> None:
    pool = PoolRequest(tp=4, pp=1, memory_bytes=20 * 2**30, kv_dtype="fp8", max_model_len=32768)
    sglang = SglangOptions.from_request(pool, release="0.5.9", page_size=64)
    trtllm = TrtllmOptions.from_request(pool, release="1.1", tokens_per_block=32)
    for options in (sglang, trtllm):
        assert {name: getattr(options, name) for name in SHARED} == {
            name: getattr(pool, name) for name in SHARED
        }
    assert (sglang.release, sglang.page_size) == ("0.5.9", 64)
    assert (trtllm.release, trtllm.tokens_per_block) == ("1.1", 32)
    with pytest.raises(TypeError):
        SglangOptions.from_request(pool, tokens_per_block=32)  # not an SGLang setting
