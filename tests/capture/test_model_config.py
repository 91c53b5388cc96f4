"""What the capture reads from a model's config: the deepstack levels its encoder rows carry."""

from __future__ import annotations

from types import SimpleNamespace

from transformers import LlavaConfig, Qwen3VLConfig

from mmcli.capture.model_config import model_facts


def test_qwen3_vl_deepstack_levels_are_the_length_of_its_indexes() -> None:
    """transformers 5.25.0 models/qwen3_vl/configuration_qwen3_vl.py:
    ``deepstack_visual_indexes`` defaults to ``(8, 16, 24)``; vLLM 0.20.0
    vllm/model_executor/models/qwen3_vl.py: ``deepstack_num_level =
    len(config.vision_config.deepstack_visual_indexes)``."""
    facts = model_facts(Qwen3VLConfig())
    assert facts.deepstack_levels == len(Qwen3VLConfig().vision_config.deepstack_visual_indexes)
    assert facts.deepstack_levels == 3


def test_a_vision_tower_without_the_key_has_none() -> None:
    """vLLM 0.20.0 qwen3_vl.py: ``use_deepstack = hasattr(config.vision_config,
    "deepstack_visual_indexes")``, 0 levels without it; LLaVA's vision config has no such key."""
    assert model_facts(LlavaConfig()).deepstack_levels == 0
    raw = SimpleNamespace(vision_config={"hidden_size": 8})  # a sub-config left as a dict
    assert model_facts(raw).deepstack_levels == 0


def test_no_vision_config_is_unknown() -> None:
    assert model_facts(SimpleNamespace(hidden_size=8)).deepstack_levels is None
    assert model_facts(None).deepstack_levels is None
