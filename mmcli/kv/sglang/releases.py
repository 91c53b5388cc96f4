"""The SGLang releases mmcli mirrors, and what differs between them, as data.

Read from each release's wheel (``sglang/srt/server_args.py``, ``model_executor/
model_runner.py``, ``mem_cache/memory_pool.py``, ``configs/model_config.py``); the facts, with
file and line, are in docs/kv-share-engines.md. A release not listed here was not read and is
refused rather than planned with another release's rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mmcli.errors import InputError

#: How a release picks ``mem_fraction_static`` when it is not given.
FractionRule = Literal["tp-table", "tp-table-b200", "reserve-by-gpu", "reserve-formula"]
#: How a release sizes the state pool of a hybrid GDN / Mamba model: "none" (no such model),
#: "fixed" (0.5.3: 512 slots, or --max-running-requests), "ratio" (0.5.4: a share
#: ``mamba_full_memory_ratio`` of the budget while the radix cache is on; fixed while it is off).
HybridRule = Literal["none", "fixed", "ratio"]


@dataclass(frozen=True)
class SglangRules:
    """What one SGLang release does that matters to its KV pool."""

    release: str
    fraction_rule: FractionRule
    #: Multimodal models' default fraction: None (no adjustment), "x0.90", or "vit-scaled".
    vlm_rule: str | None
    #: Architectures whose models would get the hybrid sliding-window pool (they define
    #: ``get_attention_sliding_window_size``) but for which server_args turns it off.
    swa_disabled_for: tuple[str, ...]
    #: Whether the release has a hybrid sliding-window pool at all.
    has_swa_pool: bool
    hybrid_rule: HybridRule = "none"
    #: Hybrid GDN / Mamba models the release serves: (architecture, model_type of the config
    #: class SGLang registers for it).
    hybrid_models: tuple[tuple[str, str], ...] = ()


_GEMMA_OFF = (
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
    "Gemma3ForConditionalGeneration",
    "Gemma3nForCausalLM",
    "Gemma3nForConditionalGeneration",
)

#: 0.5.3: ``is_hybrid_gdn`` (model_runner.py:1301); 0.5.4 adds Nemotron-H (``mamba2_config``,
#: model_runner.py:1490, configs/nemotron_h.py). No 0.4.x release has any of these models.
_HYBRID_053 = (("Qwen3NextForCausalLM", "qwen3_next"), ("FalconH1ForCausalLM", "falcon_h1"))
_HYBRID_054 = (*_HYBRID_053, ("NemotronHForCausalLM", "nemotron_h"))

#: Releases read, oldest first.
RELEASES: tuple[SglangRules, ...] = (
    SglangRules("0.4.6.post5", "tp-table", None, (), has_swa_pool=False),
    SglangRules("0.4.7", "tp-table-b200", None, (), has_swa_pool=False),
    SglangRules("0.4.9.post2", "reserve-by-gpu", "x0.90", (), has_swa_pool=False),
    SglangRules(
        "0.5.3",
        "reserve-formula",
        "vit-scaled",
        (*_GEMMA_OFF, "GptOssForCausalLM"),
        True,
        "fixed",
        _HYBRID_053,
    ),
    SglangRules(
        "0.5.4",
        "reserve-formula",
        "vit-scaled",
        (*_GEMMA_OFF, "Olmo2ForCausalLM", "GptOssForCausalLM"),
        True,
        "ratio",
        _HYBRID_054,
    ),
)
DEFAULT_RELEASE = RELEASES[-1].release
_BY_NAME = {r.release: r for r in RELEASES}
#: Short spellings of a read release (``0.4.6`` is the 0.4.6.post5 wheel that was read).
_ALIASES = {"0.4.6": "0.4.6.post5", "0.4.9": "0.4.9.post2"}


def sglang_rules(release: str | None) -> SglangRules:
    """The rules of ``release`` (None: the newest mirrored); refuses a release not read."""
    if release is None:
        return _BY_NAME[DEFAULT_RELEASE]
    name = release.strip().lstrip("v")
    found = _BY_NAME.get(_ALIASES.get(name, name))
    if found is None:
        read = ", ".join(r.release for r in RELEASES)
        raise InputError(
            f"--sglang-version {release}: SGLang {release} is not mirrored (its source was not "
            "read, and releases differ in how they size the pool)",
            hint=f"use one of the releases read: {read}",
        )
    return found
