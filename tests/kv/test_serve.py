"""A vllm serve line read with a release's own flags (mmcli/kv/data/vllm_serve_flags.json, written
by scripts/extract_vllm_flags.py from each release's vllm/engine/arg_utils.py and serve front end).

Facts used: vLLM 0.34.0 vllm/engine/arg_utils.py registers "--tensor-parallel-size", "-tp",
"--speculative-config", "-sc", and "--enable-prefix-caching" / "--enforce-eager" from bool config
fields (BooleanOptionalAction, so --no-enable-prefix-caching); vLLM 0.16.0
vllm/engine/arg_utils.py AsyncEngineArgs.add_cli_args registers "--disable-log-requests", which
0.17.0 no longer has."""

from __future__ import annotations

import json

import pytest

from mmcli.errors import InputError
from mmcli.kv import PlanRequest, parse_serve_line, plan_run
from mmcli.kv.serve_flags import flag_table, releases

CONFIG = "samples/kv/gemma3n-e2b-like.json"


def test_data_shape_and_cited_flags() -> None:
    assert releases()[0] == "0.10.0" and releases()[-1] == "0.34.0"
    newest = flag_table("0.34.0")
    assert newest["--tensor-parallel-size"].aliases == ("-tp",)
    assert newest["--speculative-config"].kind == "json"
    assert newest["--enable-prefix-caching"].kind == "bool"
    assert newest["--kv-cache-dtype"].dest == "cache_dtype"
    assert "--disable-log-requests" in flag_table("0.16.0")
    assert "--disable-log-requests" not in flag_table("0.17.0")


def test_forms() -> None:
    args = parse_serve_line(
        "vllm serve Qwen/Qwen3-8B -tp 2 --max-model-len=32768 --no-enable-prefix-caching "
        '--enforce-eager --speculative-config \'{"method": "mtp", "num_speculative_tokens": 2}\''
        " --host 0.0.0.0 --kv_cache_dtype fp8"
    )
    assert args.model == "Qwen/Qwen3-8B"
    assert args.applied == {
        "tensor_parallel_size": 2,
        "max_model_len": 32768,
        "enable_prefix_caching": False,
        "enforce_eager": True,
        "speculative_config": {"method": "mtp", "num_speculative_tokens": 2},
        "kv_cache_dtype": "fp8",
    }
    assert args.not_affecting == ("--host",)


@pytest.mark.parametrize(
    ("line", "release", "said"),
    [
        ("m --foo", None, "--foo is not a flag"),
        ("m --disable-log-requests", None, "--disable-log-requests was removed after vLLM 0.16.0"),
        ("m -tp two", None, "-tp takes an integer"),
        ("m --speculative-config {bad", None, "--speculative-config takes JSON"),
        ("m --kv-transfer-config {}", None, "--kv-transfer-config changes the KV memory"),
        ("m --enforce-eager=1", None, "--enforce-eager takes no value"),
    ],
)
def test_refused(line: str, release: str | None, said: str) -> None:
    with pytest.raises(InputError, match=said.replace("{", r"\{")):
        parse_serve_line(line, release)


def test_serve_line_plans_as_options(tmp_path) -> None:
    line = f"vllm serve {CONFIG} --max-model-len 32768 --kv-cache-memory-bytes 21474836480"
    served = plan_run(PlanRequest(serve=line)).to_json()
    assert served.pop("serve")["applied"]["kv_cache_memory_bytes"] == 21474836480
    plain = plan_run(PlanRequest(CONFIG, memory="20GiB", max_model_len=32768)).to_json()
    assert json.dumps(served, sort_keys=True, default=str) == json.dumps(
        plain, sort_keys=True, default=str
    )


def test_conflict_with_option() -> None:
    with pytest.raises(InputError, match="-tp on the serve line and --tensor-parallel-size"):
        PlanRequest(serve=f"vllm serve {CONFIG} -tp 2", tensor_parallel_size=4)


@pytest.mark.parametrize(
    ("line", "setting", "value"),
    [
        # vLLM 0.34.0 vllm/utils/argparse_utils.py human_readable_int: k m g powers of 1000,
        # K M G powers of 1024; human_readable_int_or_auto: "auto" and "-1" are -1.
        ("m --max-model-len 32k", "max_model_len", 32_000),
        ("m --max-model-len=32K", "max_model_len", 32_768),
        ("m --max-model-len 1M", "max_model_len", 2**20),
        ("m --max-model-len auto", "max_model_len", -1),
        ("m --max-model-len -1", "max_model_len", -1),
        # vLLM 0.34.0 vllm/engine/arg_utils.py human_readable_int_args holds
        # max_num_batched_tokens and kv_cache_memory_bytes.
        ("m --max-num-batched-tokens 8k", "max_num_batched_tokens", 8_000),
        ("m --max-num-batched-tokens 8K", "max_num_batched_tokens", 8_192),
        ("m --kv-cache-memory-bytes 20G", "kv_cache_memory_bytes", 20 * 2**30),
        ("m --kv-cache-memory-bytes 1.5g", "kv_cache_memory_bytes", 1_500_000_000),
        # quantization and the multimodal limits are listed as what the plan assumes.
        ("m -q fp8", "quantization", "fp8"),
        ("m --limit-mm-per-prompt '{\"image\": 2}'", "limit_mm_per_prompt", {"image": 2}),
    ],
)
def test_values_as_vllm_reads_them(line: str, setting: str, value: object) -> None:
    assert parse_serve_line(line).applied[setting] == value


def test_max_num_batched_tokens_human_in_the_oldest_release() -> None:
    """vLLM 0.10.0 vllm/engine/arg_utils.py get_kwargs: human_readable_int for
    {"max_model_len", "max_num_batched_tokens"}."""
    args = parse_serve_line("m --max-num-batched-tokens 2K --max-model-len 4k", releases()[0])
    assert args.applied == {"max_num_batched_tokens": 2048, "max_model_len": 4000}


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("m --max-num-batched-tokens 0", "--max-num-batched-tokens must be a positive"),
        (
            "m --max-num-batched-tokens 1.5K",
            "--max-num-batched-tokens '1.5K': vLLM allows no decimals",
        ),
        ("m --kv-cache-memory-bytes 20GiB", "--kv-cache-memory-bytes must be a positive"),
        ("m --max-model-len 32x", "--max-model-len must be a positive integer or auto"),
    ],
)
def test_values_refused(line: str, said: str) -> None:
    with pytest.raises(InputError, match="--serve: " + said):
        parse_serve_line(line)


def test_quantization_with_gpu_needs_weights() -> None:
    with pytest.raises(InputError, match="-q on the serve line change"):
        PlanRequest(serve=f"vllm serve {CONFIG} -q fp8", gpu="H100")
    served = PlanRequest(serve=f"vllm serve {CONFIG} -q fp8", gpu="H100", weights="8GiB")
    assert served.resolved.serve is not None
    assert served.resolved.serve.applied == {"quantization": "fp8"}


@pytest.mark.parametrize("line", ["m -O3", "m -O=3", "m -O 3", "m -O.level=3", "m -O.level 3"])
def test_optimization_forms_where_o_is_the_compilation_config(line: str) -> None:
    """vLLM 0.10.0 vllm/engine/arg_utils.py: add_argument("--compilation-config", "-O", ...);
    vllm/utils/__init__.py FlexibleArgumentParser turns -O3 / -O=3 into -O.level=3 and -O 3
    into -O.level 3: the compilation config's level."""
    args = parse_serve_line(line, "0.10.0")
    assert args.not_affecting == ("-O",) and args.sources == {"compilation_config": "-O"}


@pytest.mark.parametrize("line", ["m -O3", "m -O=3", "m -O 3"])
def test_optimization_forms_where_o_is_the_level(line: str) -> None:
    """vLLM 0.34.0 vllm/utils/argparse_utils.py: -O3 and -O=3 become --optimization-level 3,
    -O followed by 0-3 becomes --optimization-level."""
    args = parse_serve_line(line)
    assert args.sources == {"optimization_level": "--optimization-level"}


def test_dotted_o_refused_where_o_is_the_level() -> None:
    """vLLM 0.34.0 vllm/utils/argparse_utils.py reads -O.level=3 as --optimization-level
    '.level=3' (arg[2:]), not a level."""
    with pytest.raises(InputError, match="-O is --optimization-level in these flags"):
        parse_serve_line("m -O.level=3")


def test_dotted_o_is_the_compilation_config_in_one_release() -> None:
    """vLLM 0.12.0 vllm/utils/argparse_utils.py: -O3 becomes --optimization-level 3, while
    -O.<key> is rewritten to -cc.<key> (deprecated); vLLM 0.13.0 reads any -O<rest> as
    --optimization-level <rest>."""
    args = parse_serve_line("m -O3 -O.backend=eager", "0.12.0")
    assert args.sources == {
        "optimization_level": "--optimization-level",
        "compilation_config": "-cc",
    }
    with pytest.raises(InputError, match="-O is --optimization-level"):
        parse_serve_line("m -O.backend=eager", "0.13.0")


@pytest.mark.parametrize(
    "flag",
    ["-O3", "--max-cudagraph-capture-size 64", "--compilation-config '{\"cudagraph_mode\": 0}'"],
)
def test_graph_flags_with_gpu_are_refused(flag: str) -> None:
    """A flag that changes the CUDA graphs captured is refused beside --gpu (the estimate's
    graph term assumes the release's default capture sizes), accepted beside --memory and
    under --enforce-eager (no graphs)."""
    import shlex

    line = f"vllm serve samples/kv/qwen3-14b-like.json {flag}"
    with pytest.raises(InputError, match="CUDA graphs that the --gpu estimate counts"):
        PlanRequest(serve=shlex.split(line), gpu="H100", weights="28GiB")
    assert plan_run(PlanRequest(serve=shlex.split(line), memory="20GiB")).exit_code == 0
    eager = PlanRequest(serve=shlex.split(line), gpu="H100", weights="28GiB", enforce_eager=True)
    assert plan_run(eager).exit_code in (0, 1)


def test_list_flags_are_kinds_of_their_own() -> None:
    """vLLM 0.34.0 vllm/engine/arg_utils.py ``_compute_kwargs``: a field whose type is a list
    takes ``nargs="+"`` (``collection_to_kwargs``), so config/model.py's ``served_model_name``,
    config/compilation.py's ``cudagraph_capture_sizes: list[int] | None`` and the front end's
    ``api_key: list[str] | None`` take one or more values; the front end's
    ``_customize_cli_kwargs`` (entrypoints/common/cli_args.py) gives ``allowed_origins``
    ``json.loads`` and turns ``middleware`` (``append``) and
    ``disable_access_log_for_endpoints`` back into one value each; ``collect_detailed_traces:
    list[DetailedTraceModules]`` is a list whose items are a Literal, not a Literal."""
    newest = flag_table("0.34.0")
    kinds = {name: newest[name].kind for name in newest}
    for name in ("--served-model-name", "--cudagraph-capture-sizes", "--api-key"):
        assert kinds[name] == "list", name
    assert kinds["--collect-detailed-traces"] == "list"
    assert kinds["--allowed-origins"] == "json"
    assert kinds["--middleware"] == kinds["--disable-access-log-for-endpoints"] == "value"
    assert kinds["--max-model-len"] == "value"
    # vLLM 0.12.0 config/scheduler.py: cuda_graph_sizes: list[int].
    assert flag_table("0.12.0")["--cuda-graph-sizes"].kind == "list"


@pytest.mark.parametrize(
    ("line", "release"),
    [
        ("m --served-model-name a b", None),
        ("m --served-model-name=a", None),
        ("m --api-key k1 k2 k3", None),
        ("m --cuda-graph-sizes 8 16", "0.12"),
        ("m --cudagraph-capture-sizes 1 -2 4", None),
    ],
)
def test_a_list_flag_takes_every_value_up_to_the_next_flag(line: str, release: str | None) -> None:
    """argparse's ``nargs="+"`` takes the arguments up to the next option string (a negative
    number is an argument): the values after the flag are not a second model, and the flag
    after them is read."""
    args = parse_serve_line(f"{line} --max-num-seqs 3", release)
    assert args.model == "m"
    assert args.applied == {"max_num_seqs": 3}
    flag = line.split()[1].split("=")[0]
    assert flag in args.not_affecting


def test_the_model_after_a_list_flag_is_taken_by_it_as_argparse_does() -> None:
    """``vllm serve --served-model-name a m``: argparse gives both arguments to the flag and
    the model tag is left unset."""
    assert parse_serve_line("--served-model-name a m").model is None


def test_a_list_flag_needs_a_value() -> None:
    with pytest.raises(InputError, match="--api-key needs a value"):
        parse_serve_line("m --api-key --max-model-len 4096")
