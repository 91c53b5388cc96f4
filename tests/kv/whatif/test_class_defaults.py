"""Keys a published config leaves out take transformers' config-class defaults in the ``--gpu``
estimate's activation peak, as vLLM (which reads configs through transformers) takes them."""

from __future__ import annotations

import sys

import pytest
from hf_configs import LLAMA3_8B

from mmcli.kv import PlanRequest, plan_run
from mmcli.kv.whatif import components as c

#: google/gemma-3-27b-it's published config.json (tests/kv/realworld/configs/PROVENANCE.md):
#: its text_config has no vocab_size.
GEMMA3 = "tests/kv/realworld/configs/google--gemma-3-27b-it_config.json"


def _run(**extra: object) -> object:
    return plan_run(
        PlanRequest(
            GEMMA3,
            gpu="H100",
            weights="54GiB",
            vllm_version="0.20",
            max_num_batched_tokens=8192,
            max_num_seqs=1024,
            **extra,  # type: ignore[arg-type]
        )
    )


def test_gemma3_vocab_from_the_text_config_class() -> None:
    """transformers' Gemma3TextConfig (models/gemma3/configuration_gemma3.py, transformers
    4.50 and 5.x) defaults vocab_size to 262,208. Text config: hidden 5,376, intermediate
    21,504, 32 heads, 16 KV heads, head_dim 128, bfloat16. Sampler over 1,024 rows, vLLM's own
    Triton top-k / top-p on an H100 (132 SMs; FlashInfer's only with VLLM_USE_FLASHINFER_SAMPLER=1
    in 0.20, :mod:`mmcli.kv.whatif.sampler`): 1,024 × 262,208 × (2 + 12) + 132 × 262,208 × 4
    + 8,192 × 5,376 × 2 = 3,759,013,888 + 138,445,824 + 88,080,384 = 3,985,540,096, above the
    forward's 8,192 × (2·5,376 + (32 + 2·16)·128 + 3·21,504) × 2 =
    1,367,343,104 (formulas: profile_run, vLLM 0.20.0 vllm/v1/worker/gpu_model_runner.py)."""
    pytest.importorskip("transformers")
    run = _run()
    est = run.estimate  # type: ignore[attr-defined]
    assert est is not None
    peak = est.components[0]
    assert peak.name == "activation peak"
    assert peak.inputs["vocab_size"] == 262_208
    assert peak.inputs["class_defaults"] == {"vocab_size": "Gemma3TextConfig"}
    assert peak.inputs["sampler_bytes"] == 3_985_540_096
    assert peak.inputs["forward_bytes"] == 1_367_343_104
    assert peak.bytes == 3_985_540_096
    assert any("vocab_size" in note and "Gemma3TextConfig" in note for note in est.notes)


def test_without_transformers_the_missing_key_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without transformers nothing fills vocab_size: the flat reserve stays and a note names
    the key instead of a silently different figure."""
    monkeypatch.setitem(sys.modules, "transformers", None)  # import raises ImportError
    run = _run()
    est = run.estimate  # type: ignore[attr-defined]
    assert est is not None and est.components == ()
    assert any("needs vocab_size" in note and "not installed" in note for note in est.notes)


def test_a_complete_config_does_not_consult_transformers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A config with every key the formula needs is read as given (Meta-Llama-3-8B's
    config.json: vocab 128,256), with no class defaults recorded."""
    monkeypatch.setitem(sys.modules, "transformers", None)
    geo = c.geometry(LLAMA3_8B)
    assert geo is not None and geo.vocab == 128_256 and geo.class_defaults == {}
    assert "class_defaults" not in geo.to_json()


def test_an_unknown_model_type_names_the_key() -> None:
    """A model_type transformers does not know fills nothing: the key is reported missing."""
    doc = {"model_type": "no-such-model", "hidden_size": 64, "num_attention_heads": 4}
    assert c.geometry(doc) is None
    assert c.missing_keys(doc) == ("vocab_size", "intermediate_size")
