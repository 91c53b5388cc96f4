"""Speculative decoding on the GDN hybrids (Qwen3-Next, Qwen3.5 / 3.6) before vLLM 0.32, the
releases that turn prefix caching off for state models, and the FULL-graph start-up refusal.

The facts, each read from the released wheels' source (``vllm==X`` on the package registry):

* ``MambaSpec.max_memory_usage_bytes`` (vllm/v1/kv_cache_interface.py), what the start-up
  check and the printed concurrency count for one request's state:
  0.10.2-0.11: ``page_size_bytes`` (one page, "We allocate 1 block for each request now");
  0.12-0.14: ``cdiv(max_model_len, block_size) × page``, where the state's block is
  max_model_len without prefix caching (``mamba_block_size``, models/config.py): one page;
  0.15-0.31: ``page × (1 + num_speculative_blocks)`` without prefix caching, ``× (2 + K)`` in
  "align" mode, ``(cdiv(max_model_len, block) [+ K from 0.22]) × page`` in "all" mode.
* ``MambaManager.allocate_new_blocks`` (v1/core/single_type_kv_cache_manager.py, 0.10.2):
  every release allocates a request ``num_speculative_blocks`` more state blocks.
* ``num_speculative_blocks = speculative_config.num_speculative_tokens`` (0.10.2
  v1/worker/gpu_model_runner.py; 0.12+ model_executor/layers/mamba/abstract.py).
* The GDN conv state is ``(conv_dim / tp, conv_kernel − 1 + num_spec)``
  (``gated_delta_net_state_shape``, layers/mamba/mamba_utils.py, 0.10.2 onwards), and
  qwen3_next.py (0.10.2) and qwen3_5.py (0.17) pass ``num_spec = num_speculative_tokens``.
* 0.10.2 gpu_model_runner.py and 0.12-0.16 layers/mamba/abstract.py raise "Mamba with
  speculative decoding is not supported yet." for every state model but ``qwen3_next``;
  0.17's abstract.py no longer does.
* Prefix caching on a state model: 0.10.2-0.11 ``HybridAttentionMambaModelConfig`` turns it off
  ("Hybrid or mamba-based model detected: disabling prefix caching"); 0.12-0.14 turns it off
  unless the model supports Mamba prefix caching (Qwen3-Next does not:
  ``SupportsMambaPrefixCaching`` is on Bamba, FalconH1, GraniteMoeHybrid, Jamba, Mamba,
  Mamba2, NemotronH, Zamba2 only); 0.10.0-0.10.1's runner raises "Prefix caching is not
  supported for Mamba yet."; from 0.15 Qwen3-Next takes "align" mode.
* config/compilation.py (0.20.0 onwards): with FULL decode CUDA graphs and Mamba layers,
  "max_num_seqs (N) exceeds available Mamba cache blocks (B)" is raised when N > B.
* registry.py: ``Qwen3NextForCausalLM`` from 0.10.2, ``Qwen3_5ForConditionalGeneration``
  and ``Qwen3_5MoeForConditionalGeneration`` from 0.17, ``Qwen3_5ForCausalLM`` from 0.27.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.errors import InputError
from mmcli.kv.hf.config import parse_hf_config
from mmcli.kv.options import PlanOptions
from mmcli.kv.plan import plan_kv_cache
from mmcli.kv.result import KVPlan
from mmcli.kv.speculative import parse_speculative_config

ROOT = Path(__file__).resolve().parents[2]
QWEN3_NEXT_PATH = ROOT / "tests/kv/configs/Qwen--Qwen3-Next-80B-A3B-Thinking.json"
QWEN3_NEXT = json.loads(QWEN3_NEXT_PATH.read_text("utf-8"))
#: Qwen3.5's text model, as Qwen3-Next's geometry under Qwen3.5's names (one MTP layer).
QWEN3_5 = {
    **QWEN3_NEXT,
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5_text",
    "mtp_num_hidden_layers": 1,
}
#: A Nemotron-H hybrid (Mamba-2 states), the e2e differential's geometry.
NEMOTRON_H = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "num_hidden_layers": 4,
    "hybrid_override_pattern": "M*M-",
    "hidden_size": 192,
    "num_attention_heads": 6,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "intermediate_size": 384,
    "mamba_num_heads": 6,
    "mamba_head_dim": 32,
    "ssm_state_size": 16,
    "n_groups": 1,
    "conv_kernel": 4,
    "expand": 1,
    "chunk_size": 256,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}
GiB = 2**30


def plan(doc: dict[str, Any], **options: Any) -> KVPlan:
    model = parse_hf_config(doc, default_name="m", where="m")
    defaults: dict[str, Any] = {
        "memory_bytes": 40 * GiB,
        "max_model_len": 32768,
        "tensor_parallel_size": 4,
        "enable_prefix_caching": False,
    }
    return plan_kv_cache(model, PlanOptions(**{**defaults, **options}))


def gdn_state(tokens: int, tp: int = 4) -> int:
    """Qwen3-Next's GDN state on one rank: conv (2·16·128 + 32·128)/tp × (4 − 1 + K) and
    recurrent (32/tp, 128, 128), both bf16 (mamba_utils.py ``gated_delta_net_state_shape``)."""
    conv = (2 * 16 * 128 + 32 * 128) // tp * (4 - 1 + tokens) * 2
    return conv + 32 // tp * 128 * 128 * 2


def state_groups(got: KVPlan) -> list[Any]:
    return [g for g in got.owner_groups if g.spec.attention == "mamba"]


def counted_pages(got: KVPlan) -> int:
    (pages,) = {g.spec.pages_per_request for g in state_groups(got)}
    return int(pages)


def state_bytes(got: KVPlan) -> int:
    (spec,) = {g.spec for g in state_groups(got)}
    return int(spec.state_bytes)


@pytest.mark.parametrize("release", ["0.10.2", "0.11", "0.12", "0.14"])
def test_before_015_the_check_counts_one_state_page(release: str) -> None:
    got = plan(QWEN3_NEXT, num_speculative_tokens=2, vllm_version=release)
    assert state_bytes(got) == gdn_state(2)  # the conv state is wider all the same
    assert counted_pages(got) == 1
    (note,) = [f for f in got.findings if f.code == "speculative-states"]
    assert "leave out of the start-up check" in note.message


@pytest.mark.parametrize("release", ["0.15", "0.17", "0.20", "0.22", "0.31"])
@pytest.mark.parametrize(("caching", "base"), [(False, 1), (True, 2)])
def test_from_015_each_request_counts_k_more_pages(release: str, caching: bool, base: int) -> None:
    got = plan(
        QWEN3_NEXT, num_speculative_tokens=3, vllm_version=release, enable_prefix_caching=caching
    )
    assert state_bytes(got) == gdn_state(3)
    assert counted_pages(got) == base + 3


def test_the_speculative_pages_lower_the_concurrency_from_015() -> None:
    before = plan(QWEN3_NEXT, num_speculative_tokens=2, vllm_version="0.14")
    after = plan(QWEN3_NEXT, num_speculative_tokens=2, vllm_version="0.15")
    side_before, side_after = before.without_sharing, after.without_sharing
    assert side_before is not None and side_after is not None
    assert side_before.num_blocks == side_after.num_blocks  # the pool is the same
    assert side_after.state_bytes == 3 * side_before.state_bytes  # (1 + 2) pages against 1
    assert side_after.max_concurrency is not None and side_before.max_concurrency is not None
    assert side_after.max_concurrency < side_before.max_concurrency


@pytest.mark.parametrize("release", ["0.17", "0.20", "0.31"])
def test_qwen35_mtp_plans_one_mtp_layer_and_k_from_the_config(release: str) -> None:
    got = plan(QWEN3_5, mtp=True, vllm_version=release)
    mtp = [x for x in got.layers if x.kind == "mtp"]
    assert len(mtp) == 1 and mtp[0].spec is not None and mtp[0].spec.attention == "full"
    assert state_bytes(got) == gdn_state(1)  # K defaults to mtp_num_hidden_layers
    assert counted_pages(got) == 1 + 1


def test_qwen35_mtp_layer_is_one_whatever_k() -> None:
    got = plan(QWEN3_5, mtp=True, num_speculative_tokens=3, vllm_version="0.20")
    assert len([x for x in got.layers if x.kind == "mtp"]) == 1
    assert state_bytes(got) == gdn_state(3) and counted_pages(got) == 4


@pytest.mark.parametrize(
    ("doc", "release", "first"),
    [(QWEN3_NEXT, "0.10.1", "0.10.2"), (QWEN3_5, "0.16", "0.17")],
)
def test_a_release_before_the_model_is_refused(
    doc: dict[str, Any], release: str, first: str
) -> None:
    with pytest.raises(InputError, match=f"the first release that does is {first}"):
        plan(doc, vllm_version=release)


def test_other_state_models_before_017_are_the_engines_refusal() -> None:
    with pytest.raises(InputError, match="Mamba with speculative decoding is not supported yet"):
        plan(NEMOTRON_H, tensor_parallel_size=1, num_speculative_tokens=2, vllm_version="0.16")


def test_other_state_models_from_017_to_031_are_not_mirrored() -> None:
    with pytest.raises(InputError, match="for other models from vLLM 0.32 only"):
        plan(NEMOTRON_H, tensor_parallel_size=1, num_speculative_tokens=2, vllm_version="0.20")
    got = plan(NEMOTRON_H, tensor_parallel_size=1, num_speculative_tokens=2, vllm_version="0.32")
    assert counted_pages(got) == 1 + 2


@pytest.mark.parametrize("release", ["0.10.2", "0.11", "0.12", "0.14"])
def test_prefix_caching_is_turned_off_for_qwen3_next_before_015(release: str) -> None:
    got = plan(QWEN3_NEXT, vllm_version=release, enable_prefix_caching=True)
    assert counted_pages(got) == 1
    assert any(f.code == "prefix-caching-off" for f in got.findings)
    assert counted_pages(plan(QWEN3_NEXT, vllm_version="0.15", enable_prefix_caching=True)) == 2


def test_prefix_caching_on_a_state_model_is_refused_by_010() -> None:
    with pytest.raises(InputError, match="Prefix caching is not supported for Mamba yet"):
        plan(NEMOTRON_H, tensor_parallel_size=1, vllm_version="0.10.0", enable_prefix_caching=True)


def test_a_model_with_mamba_prefix_caching_keeps_the_all_mode_refusal_in_012() -> None:
    with pytest.raises(InputError, match="'all' mode; from 0.22 plus the speculative blocks"):
        plan(NEMOTRON_H, tensor_parallel_size=1, vllm_version="0.12", enable_prefix_caching=True)


def _small_pool(**options: Any) -> KVPlan:
    # 1 GiB on one rank: Qwen3-Next's pool holds far fewer blocks than 1,024 sequences.
    return plan(QWEN3_NEXT, memory_bytes=GiB, max_model_len=4096, max_num_seqs=1024, **options)


def test_full_graphs_refuse_more_sequences_than_blocks_from_020() -> None:
    got = _small_pool(vllm_version="0.20")
    side = got.without_sharing
    assert side is not None and side.num_blocks is not None and side.num_blocks < 1024
    (error,) = [f for f in got.findings if f.code == "state-blocks-below-max-num-seqs"]
    assert error.severity == "error"
    assert f"exceeds available Mamba cache blocks ({side.num_blocks})" in error.message
    assert not got.has_map_errors and got.has_errors


def test_eager_runs_and_older_releases_only_warn() -> None:
    for got in (
        _small_pool(vllm_version="0.20", enforce_eager=True),
        _small_pool(vllm_version="0.19"),
    ):
        codes = {f.code for f in got.findings}
        assert "state-blocks-below-max-num-seqs" not in codes
        assert "state-pool-too-small" in codes


def test_the_warning_counts_the_blocks_allocated_before_015() -> None:
    # 0.14 counts one page in the check but allocates 1 + K: the pool holds blocks // (1 + K).
    got = _small_pool(vllm_version="0.14", num_speculative_tokens=2)
    (warning,) = [f for f in got.findings if f.code == "state-pool-too-small"]
    assert "a request keeps 3 of them" in warning.message


runner = CliRunner()


def run(*args: str) -> Any:
    return runner.invoke(app, ["kv-share", "plan", str(QWEN3_NEXT_PATH), *args])


def as_json(*args: str) -> dict[str, Any]:
    result = run(
        "--memory", "40GiB", "-tp", "4", "--max-model-len", "32768", "--format", "json", *args
    )
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_speculative_config_mtp_equals_the_flags() -> None:
    flags = as_json("--vllm-version", "0.20", "--mtp", "--num-speculative-tokens", "2")
    config = as_json(
        "--vllm-version", "0.20", "--speculative-config",
        '{"method": "qwen3_next_mtp", "num_speculative_tokens": 2}',
    )  # fmt: skip
    assert config == flags


def test_speculative_config_ngram_adds_no_layer() -> None:
    ngram = as_json(
        "--speculative-config",
        '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}',
    )
    plain = as_json("--num-speculative-tokens", "3")
    assert ngram == plain


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{", "cannot read '{' as a JSON object"),
        ("[1]", "expected a JSON object"),
        ('{"method": "ngram"}', "method 'ngram' needs num_speculative_tokens"),
        ('{"num_speculative_tokens": 2}', "name the method"),
        ('{"method": "mtp", "num_speculative_tokens": 0}', "from 1 to 1024"),
        ('{"method": "mtp", "num_speculative_tokens": true}', "from 1 to 1024"),
        ('{"method": "draft_model", "num_speculative_tokens": 2}', "a drafter model of its own"),
        ('{"method": "lookahead", "num_speculative_tokens": 2}', "unknown method 'lookahead'"),
        ('{"method": "mtp", "num_speculativ_tokens": 2}', "'num_speculativ_tokens' is not a field"),
    ],
)
def test_a_bad_speculative_config_is_refused(text: str, error: str) -> None:
    with pytest.raises(InputError, match=error):
        parse_speculative_config(text)


def test_speculative_config_cli_errors() -> None:
    both = run("--memory", "40GiB", "--mtp", "--speculative-config", '{"method": "mtp"}')
    assert both.exit_code == 2 and "both describe the speculative decoding" in both.stderr
    eagle = run(
        "--memory",
        "40GiB",
        "--speculative-config",
        '{"method": "eagle", "num_speculative_tokens": 2}',
    )
    assert eagle.exit_code == 2 and "pass --num-draft-layers" in eagle.stderr


def test_the_full_graph_refusal_exits_1_on_the_command_line() -> None:
    args = ("--memory", "1GiB", "--max-model-len", "4096", "--max-num-seqs", "1024")
    refused = run(*args, "--vllm-version", "0.20")
    assert refused.exit_code == 1, refused.stderr
    assert "state-blocks-below-max-num-seqs" in refused.stdout
    eager = run(*args, "--vllm-version", "0.20", "--enforce-eager")
    assert eager.exit_code == 0, eager.stderr
