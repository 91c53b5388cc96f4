"""explain's memory section: the profiler's figures of a published log beside mmcli's
estimate of each component, on the log's own GPU total, weights and utilization.

Logs: tests/kv/gpu_logs/ (sources in PROVENANCE.md). Config: the Llama 3.1 8B subset there.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mmcli.cli.main import app
from mmcli.kv.explain.vllm_log import parse_vllm_log, read_vllm_log
from mmcli.kv.inputs.layer_config import load_document
from mmcli.kv.memory_profile import compare_memory
from mmcli.kv.releases import CHANGES, rules_for
from mmcli.kv.whatif import components as c
from mmcli.kv.whatif.gpus import resolve_gpu

LOGS = Path(__file__).parent.parent / "gpu_logs"
CONFIG = LOGS / "configs" / "meta-llama--Llama-3.1-8B-Instruct.subset.json"
runner = CliRunner()


def rows(comparison):
    return {r.component: r for r in comparison.rows}


def test_the_logged_column_is_the_log_and_the_inputs_are_the_logs():
    """https://github.com/vllm-project/vllm/pull/14447: total 23.58 GiB, utilization 0.99,
    weights 21.21 GiB, non-torch 0.20, activation peak 0.37, KV 1.57 GiB."""
    log = read_vllm_log(LOGS / "v0-14447-24g.log")
    _, doc = load_document(CONFIG)
    got = compare_memory(log, doc, rules_for(None), None)
    assert got is not None and not got.missing
    by = rows(got)
    assert by["activation peak"].logged_gib == 0.37
    assert by["non-torch memory"].logged_gib == 0.2
    assert by["KV cache"].logged_gib == 1.57
    assert got.inputs["gpu_total_gib"] == (23.58, "log")
    assert got.inputs["gpu_memory_utilization"] == (0.99, "log")
    assert got.inputs["weights_gib"] == (21.21, "log")
    # The KV estimate is what the components leave of total x utilization.
    # (The newest rules: from 0.27 the runner's buffers are a row of their own.)
    parts = ("activation peak", "non-torch memory", "runner buffers", "CUDA graphs")
    held = 21.21 + sum(by[k].estimate_gib for k in parts)
    assert by["KV cache"].estimate_gib == round(23.58 * 0.99 - held, 2)
    assert by["KV cache"].difference_gib == round(
        by["KV cache"].estimate_gib - by["KV cache"].logged_gib, 2
    )


def test_v0_absolute_peak_gives_the_activation_less_the_weights():
    """https://github.com/vllm-project/vllm/issues/10517: peak_torch_memory=17.06GiB with
    weights 14.9888 GB: the activation is the peak less the weights."""
    log = read_vllm_log(LOGS / "v0-10517-20k.log")
    _, doc = load_document(CONFIG)
    got = compare_memory(log, doc, rules_for(None), None)
    assert got is not None
    row = rows(got)["activation peak"]
    assert row.logged_gib == round(17.06 - 14.9888, 4)
    assert row.logged_from == "peak_torch_memory − weights"


def test_a_release_without_the_graph_estimate_estimates_no_graphs():
    """Release rows cudagraph_estimate_subtracted: off in the oldest row, on in a later one."""
    log = read_vllm_log(LOGS / "v0-14447-24g.log")
    _, doc = load_document(CONFIG)
    oldest = rules_for(CHANGES[0][0] + ".0")
    assert not oldest.cudagraph_estimate_subtracted
    got = compare_memory(log, doc, oldest, None)
    assert got is not None
    assert rows(got)["CUDA graphs"].estimate_gib == 0
    assert any("does not subtract" in n for n in got.notes)


def test_without_the_total_the_estimate_says_what_is_missing_and_gpu_fills_it():
    line = "(EngineCore_DP0 pid=1) INFO 01-01 00:00:00 [gpu_model_runner.py:1] "
    text = "\n".join(
        [
            line + "Model loading took 14.99 GiB memory and 5.1 seconds",
            line + "Available KV cache memory: 3.81 GiB",
        ]
    )
    _, doc = load_document(CONFIG)
    log = parse_vllm_log(text)
    got = compare_memory(log, doc, rules_for(None), None)
    assert got is not None
    assert any("GPU's total memory" in m for m in got.missing)
    assert rows(got)["KV cache"].estimate_gib is None
    with_gpu = compare_memory(log, doc, rules_for(None), "RTX3090")
    assert with_gpu is not None and not with_gpu.missing
    total = resolve_gpu("RTX3090").total_bytes / 2**30
    assert with_gpu.inputs["gpu_total_gib"] == (round(total, 2), "--gpu")
    assert rows(with_gpu)["non-torch memory"].estimate_gib == round(c.non_torch(1).bytes / 2**30, 2)


def test_a_log_without_profiler_lines_has_no_memory_section():
    text = (
        "(EngineCore_DP0 pid=1) INFO 01-01 00:00:00 [gpu_worker.py:1] "
        "Available KV cache memory: 3.81 GiB"
    )
    _, doc = load_document(CONFIG)
    assert compare_memory(parse_vllm_log(text), doc, rules_for(None), None) is None


def test_cli_prints_the_section_within_80_columns_and_json_has_both():
    args = ["kv-share", "explain", str(LOGS / "v0-14447-24g.log"), "--model", str(CONFIG)]
    table = runner.invoke(app, args, env={"COLUMNS": "80"}, terminal_width=80)
    assert "memory (GiB): log vs mmcli's estimate" in table.output
    start = table.output.index("memory (GiB)")
    section = table.output[start:].splitlines()[1:8]
    assert all(len(line) <= 80 for line in section)
    doc = json.loads(runner.invoke(app, [*args, "--format", "json"]).output)
    memory = doc["memory_profile"]
    assert memory["log"]["weights_gib"] == 21.21
    assert {r["component"] for r in memory["rows"]} >= {"activation peak", "KV cache"}
    assert "estimate" in memory["estimate"]


def test_a_v0_log_shows_its_profiled_kv_memory_as_the_logged_figure():
    """issue 10517: no 'Available KV cache memory' line; kv_cache_size=3.81GiB is the figure."""
    from mmcli.kv.explain.report import explain_log
    from mmcli.kv.inputs.layer_config import load_config

    log = read_vllm_log(LOGS / "v0-10517-20k.log")
    got = explain_log(load_config(CONFIG), log)
    assert got.comparisons[0].logged == "3.81 GiB"
    assert got.memory_gib == 3.81


#: vLLM 0.31.0's summary (v1/worker/gpu_worker.py; the model runner V2's "Model loading took"
#: from v1/worker/gpu/model_runner.py), as a published start-up of Llama-3.1-8B-Instruct under
#: `vllm serve` on an A100 80GB printed it (no other flag).
A100_0_31 = "\n".join(
    "(EngineCore pid=326) INFO 10-06 17:00:11 [x.py:1] " + text
    for text in (
        "Model loading took 15.0 GiB memory and 5.420225 seconds",
        "Available KV cache memory: 56.21 GiB",
        "Free memory on device (78.84/79.25 GiB) on startup. Desired GPU memory utilization "
        "is (0.92, 72.91 GiB). Actual usage is 15.26 GiB for consumed memory (weights + "
        "non-torch), 1.44 GiB for peak activation, and 0.23 GiB for CUDAGraph memory.",
    )
)


def test_the_summary_of_0_27_and_later_sets_the_peak_with_graphs_beside_mmclis():
    """From vLLM 0.27 the summary's peak activation holds the CUDA-graph estimate taken off the
    KV memory (gpu_worker.py ``peak_activation_memory``; the V2 runner prints no "Estimated
    CUDA graph memory"), so it is set beside mmcli's activation + graphs; the consumed memory
    less the weights is the non-torch memory; the total and utilization are the log's. The
    card is named (--gpu A100-80GB) for serve's batch defaults: an A100 takes 2048 tokens."""
    _, doc = load_document(CONFIG)
    got = compare_memory(parse_vllm_log(A100_0_31), doc, rules_for("0.31.0"), "A100-80GB")
    assert got is not None and not got.missing
    assert got.inputs["gpu_total_gib"] == (79.25, "log")
    assert got.inputs["gpu_memory_utilization"] == (0.92, "log")
    by = rows(got)
    both = by["activation peak + CUDA-graph estimate"]
    assert both.logged_gib == 1.44
    graphs = by["CUDA graphs"]
    assert (graphs.logged_gib, graphs.logged_from) == (0.23, "CUDAGraph memory (captured)")
    # Model Runner V2 (Llama's default in 0.31) samples its zeroed dummy rows greedily.
    activation = c.activation_peak(c.geometry(doc), 2048, 256, 1, ("greedy",)).bytes / 2**30
    assert both.estimate_gib == round(round(activation, 2) + graphs.estimate_gib, 2)
    # From 0.27 the consumed memory holds the runner's buffers: V2's penalty state over the
    # A100's 256 sequences, 256 × (128,256 + 4,008) × 4 bytes = 0.13 GiB (penalties.py).
    consumed = by["non-torch memory + runner buffers"]
    assert (consumed.logged_gib, consumed.logged_from) == (0.26, "consumed memory − weights")
    buffers = round(256 * (128_256 + 4_008) * 4 / 2**30, 2)
    assert consumed.estimate_gib == round(round(c.non_torch(1).bytes / 2**30, 2) + buffers, 2)
    assert abs(consumed.difference_gib) <= 0.03
    # The KV estimate on the log's own total, utilization and weights: within 0.1 GiB (0.2 %;
    # the V2 profile's greedy sampler leaves the forward's 0.22 GiB as the activation peak).
    kv = by["KV cache"]
    assert kv.logged_gib == 56.21 and abs(kv.difference_gib) <= 0.1
    assert any("in the log's peak activation" in note for note in got.notes)


def test_with_the_estimate_printed_the_peak_is_the_summary_less_it():
    _, doc = load_document(CONFIG)
    line = "(EngineCore pid=326) INFO 10-06 17:00:11 [x.py:1] "
    text = A100_0_31 + "\n" + line + "Estimated CUDA graph memory: 1.1 GiB total"
    got = compare_memory(parse_vllm_log(text), doc, rules_for("0.31.0"), "A100-80GB")
    assert got is not None
    row = rows(got)["activation peak"]
    assert (row.logged_gib, row.logged_from) == (0.34, "peak activation − CUDA-graph estimate")
    assert rows(got)["CUDA graphs"].logged_gib == 1.1


def test_before_0_27_the_summary_peak_is_the_activation():
    """tests/kv/gpu_logs/v1-mm-rtx4080-qwen2vl2b.log (vLLM 0.10.2) prints the summary at INFO:
    4.15 GiB for weight, 2.65 GiB for peak activation, 0.02 GiB for non-torch memory, 4.06 GiB
    for CUDAGraph memory, on a 15.99 GiB device."""
    log = read_vllm_log(LOGS / "v1-mm-rtx4080-qwen2vl2b.log")
    _, doc = load_document(CONFIG)
    got = compare_memory(log, doc, rules_for("0.10.2"), None)
    assert got is not None
    by = rows(got)
    assert (by["activation peak"].logged_gib, by["activation peak"].logged_from) == (
        2.65,
        "peak activation",
    )
    assert by["non-torch memory"].logged_gib == 0.02
    assert got.inputs["gpu_total_gib"] == (15.99, "log")


def test_the_logs_sampler_line_sets_the_sampler():
    """A Colab L4 under vLLM 0.11.0 printed "FlashInfer is not available. Falling back to the
    PyTorch-native implementation of top-p & top-k sampling" (tests/kv/gpu_logs/
    v1-l4-llama8b.log): the estimate beside the log takes vLLM's own sorting sampler over its
    128 sequences, 38 bytes a logit (mmcli.kv.whatif.sampler); without the line, the release's
    default (0.11: FlashInfer only where installed, so also the sort)."""
    gpu_logs = Path(__file__).resolve().parents[1] / "gpu_logs"
    _, doc = load_document(gpu_logs / "configs" / "meta-llama--Llama-3.1-8B-Instruct.subset.json")
    text = (gpu_logs / "v1-l4-llama8b.log").read_text()
    got = compare_memory(parse_vllm_log(text), doc, rules_for("0.11.0"), "L4")
    assert got is not None
    assert got.inputs["sampler"] == ("sort", "log")
    sampler = 128 * 128_256 * 38 + 2048 * 4096 * 2
    assert rows(got)["activation peak"].estimate_gib == round(sampler / 2**30, 2)
    without = "\n".join(line for line in text.splitlines() if "top-p & top-k" not in line)
    got = compare_memory(parse_vllm_log(without), doc, rules_for("0.11.0"), "L4")
    assert got is not None and got.inputs["sampler"] == ("sort", "the release's default")


def test_without_the_gpu_the_sampler_is_still_the_releases():
    """A log that gives max_num_seqs but no GPU total (the Colab L4 log under 0.11.0 prints
    "Free memory on device" only at DEBUG) still plans its activation row with the sampler the
    log names, or the release's default path: 0.11.0's sort (FlashInfer an optional extra),
    not FlashInfer's 12 bytes a logit. Under 0.14.0's rules (FlashInfer only with
    VLLM_USE_FLASHINFER_SAMPLER=1, vLLM 0.14.0 vllm/v1/sample/ops/topk_topp_sampler.py) the
    same lines without the sampler line take the sort as well."""
    gpu_logs = Path(__file__).resolve().parents[1] / "gpu_logs"
    _, doc = load_document(gpu_logs / "configs" / "meta-llama--Llama-3.1-8B-Instruct.subset.json")
    text = (gpu_logs / "v1-l4-llama8b.log").read_text()
    got = compare_memory(parse_vllm_log(text), doc, rules_for("0.11.0"), None)
    assert got is not None and "gpu_total_gib" not in got.inputs
    assert got.inputs["sampler"] == ("sort", "log")
    sort = 128 * 128_256 * 38 + 2048 * 4096 * 2
    assert rows(got)["activation peak"].estimate_gib == round(sort / 2**30, 2)
    without = "\n".join(line for line in text.splitlines() if "top-p & top-k" not in line)
    for release in ("0.11.0", "0.14.0"):
        got = compare_memory(parse_vllm_log(without), doc, rules_for(release), None)
        assert got is not None
        assert got.inputs["sampler"] == ("sort", "the release's default (the GPU not known)")
        assert rows(got)["activation peak"].estimate_gib == round(sort / 2**30, 2)
