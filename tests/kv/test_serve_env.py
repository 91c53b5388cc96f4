"""The ``NAME=VALUE`` assignments before a ``vllm serve`` line (mmcli.kv.serve_env): vLLM reads
its switches as ``bool(int(os.environ[name]))`` (vLLM 0.34.0 vllm/envs.py, e.g.
``VLLM_USE_FLASHINFER_SAMPLER``, ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``)."""

from __future__ import annotations

import pytest

from mmcli.errors import InputError
from mmcli.kv import PlanRequest, parse_serve_line, plan_run

CONFIG = "samples/kv/qwen1.5-7b.json"


def test_a_variable_the_plan_models_is_applied_under_its_name() -> None:
    args = parse_serve_line(f"VLLM_USE_FLASHINFER_SAMPLER=0 vllm serve {CONFIG} -tp 2")
    assert args.model == CONFIG
    assert args.applied == {"tensor_parallel_size": 2, "VLLM_USE_FLASHINFER_SAMPLER": False}
    assert args.sources["VLLM_USE_FLASHINFER_SAMPLER"] == "VLLM_USE_FLASHINFER_SAMPLER"
    assert args.request_fields() == {"tensor_parallel_size": 2, "flashinfer_sampler": False}


def test_env_and_variables_outside_vllm_are_listed_as_not_affecting_the_plan() -> None:
    line = f"env CUDA_VISIBLE_DEVICES=0,1 HF_TOKEN=x VLLM_LOGGING_LEVEL=DEBUG vllm serve {CONFIG}"
    args = parse_serve_line(line)
    assert args.model == CONFIG and args.applied == {}
    assert args.not_affecting[:3] == ("CUDA_VISIBLE_DEVICES", "HF_TOKEN", "VLLM_LOGGING_LEVEL")


def test_the_other_switches_set_their_fields() -> None:
    args = parse_serve_line(
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 VLLM_PP_LAYER_PARTITION=12,12 "
        f"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0 vllm serve {CONFIG}"
    )
    assert args.request_fields() == {
        "allow_long_max_model_len": True,
        "pp_layer_partition": "12,12",
        "chunked_local_attn_hybrid": False,
    }


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("VLLM_USE_V2_MODEL_RUNNER=1", r"VLLM_USE_V2_MODEL_RUNNER changes the KV memory"),
        ("VLLM_ATTENTION_BACKEND=FLASHINFER", r"VLLM_ATTENTION_BACKEND changes the KV memory"),
        ("VLLM_SOMETHING_NEW=1", r"VLLM_SOMETHING_NEW is not among the variables mmcli reads"),
        ("VLLM_USE_FLASHINFER_SAMPLER=true", r"is not an integer"),
    ],
)
def test_what_cannot_be_planned_is_refused_naming_it(assignment: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_serve_line(f"{assignment} vllm serve {CONFIG}")


def test_the_sampler_variable_reaches_the_estimate() -> None:
    """vLLM 0.14 takes FlashInfer's sampler only with the variable at 1 (0.12.0
    v1/sample/ops/topk_topp_sampler.py): the serve line's assignment sets it."""
    line = f"VLLM_USE_FLASHINFER_SAMPLER=1 vllm serve {CONFIG}"
    run = plan_run(PlanRequest(gpu="H100", weights="15GiB", vllm_version="0.14", serve=line))
    assert run.estimate is not None
    assert run.estimate.components[0].inputs["sampler"] == "flashinfer"
    plain = plan_run(
        PlanRequest(gpu="H100", weights="15GiB", vllm_version="0.14", serve=line.split(" ", 1)[1])
    )
    assert plain.estimate is not None
    assert plain.estimate.components[0].inputs["sampler"] == "sort"
