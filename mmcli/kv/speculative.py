"""vLLM's ``--speculative-config`` JSON read for what it does to the KV cache: which drafter
layers join the pool and how many speculative tokens a request carries.

The facts, from ``vllm/config/speculative.py`` (``SpeculativeConfig``, vLLM 0.17-0.34):

* every ``*_mtp`` method (``mtp``, ``qwen3_next_mtp``, ``qwen3_5_mtp``, ``deepseek_mtp``, …;
  ``MTPModelTypes``) runs the target model's own MTP layers, which keep their caches in the
  same pool; without ``num_speculative_tokens`` it takes the MTP layer count;
* ``ngram``, ``ngram_gpu`` and ``suffix`` draft from the prompt: no drafter layers, and
  ``num_speculative_tokens`` must be given;
* ``eagle``, ``eagle3`` and ``dflash`` run a small drafter whose attention layers join the pool
  (its own config says how many: ``--num-draft-layers``);
* ``draft_model``, ``medusa`` and ``mlp_speculator`` run another model, whose caches mmcli
  does not plan.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from mmcli.errors import InputError
from mmcli.kv.inputs.values import shown

#: The methods that draft from the prompt (no drafter layers).
PROMPT_METHODS: Final = frozenset({"ngram", "ngram_gpu", "suffix"})
#: The methods whose drafter is a small head of its own (``--num-draft-layers``).
HEAD_METHODS: Final = frozenset({"eagle", "eagle3", "dflash"})
#: The methods that run a model of their own, not planned.
MODEL_METHODS: Final = frozenset({"draft_model", "medusa", "mlp_speculator"})

#: ``SpeculativeConfig``'s fields in vLLM 0.17-0.34 that leave the target's KV cache as it is
#: (a drafter's own parallelism, loading, sampling and lookup settings).
OTHER_FIELDS: Final = frozenset(
    {
        "attention_backend", "code_revision", "custom_method", "disable_eagle_block_drop",
        "disable_lookahead_block_hashes", "disable_padded_drafter_batch",
        "draft_decode_context_parallel_size", "draft_lm_head_quantization",
        "draft_load_config", "draft_tensor_parallel_size", "enable_adaptive_verification",
        "enforce_eager", "index_share_for_mtp_iteration", "max_model_len", "moe_backend",
        "num_speculative_tokens_per_batch_size", "parallel_drafting", "prompt_lookup_max",
        "prompt_lookup_min", "quantization", "rejection_sample_method", "revision",
        "speculative_token_tree", "suffix_decoding_corpus_tokens",
        "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor",
        "suffix_decoding_max_tree_depth", "suffix_decoding_min_token_prob",
        "synthetic_acceptance_length", "synthetic_acceptance_rates", "tensor_parallel_size",
        "use_heterogeneous_vocab", "use_local_argmax_reduction",
    }
)  # fmt: skip

_WHERE = "--speculative-config"
_EXAMPLE = 'e.g. --speculative-config \'{"method": "mtp", "num_speculative_tokens": 2}\''


@dataclass(frozen=True)
class Speculative:
    """What a ``--speculative-config`` asks of the KV cache."""

    #: The method as given (``qwen3_5_mtp``, ``ngram``, …).
    method: str
    #: ``num_speculative_tokens`` (None: the MTP layer count, for an MTP method).
    tokens: int | None
    #: The target's MTP layers are built and planned.
    mtp: bool
    #: A drafter head's attention layers join the pool (their count: ``--num-draft-layers``).
    head: bool


def parse_speculative_config(text: str) -> Speculative:
    """``--speculative-config``'s JSON, refused where it names what mmcli does not plan."""
    try:
        doc: Any = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise InputError(
            f"{_WHERE}: cannot read {text!r} as a JSON object", hint=_EXAMPLE
        ) from None
    if not isinstance(doc, dict):
        raise InputError(f"{_WHERE}: expected a JSON object, got {text!r}", hint=_EXAMPLE)
    unknown = sorted(set(doc) - OTHER_FIELDS - {"method", "num_speculative_tokens", "model"})
    if unknown:
        raise InputError(
            f"{_WHERE}: {unknown[0]!r} is not a field of vLLM's SpeculativeConfig",
            hint="check the spelling; the fields are those of vllm/config/speculative.py",
        )
    method = doc.get("method")
    if not isinstance(method, str) or not method.strip():
        raise InputError(
            f"{_WHERE}: name the method (got {shown(method)}); mmcli does not guess it from "
            "the drafter's model name as vLLM does",
            hint=_EXAMPLE,
        )
    method = method.strip()
    tokens = doc.get("num_speculative_tokens")
    if tokens is not None and (type(tokens) is not int or not 1 <= tokens <= 1024):
        raise InputError(
            f"{_WHERE}: num_speculative_tokens must be a whole number from 1 to 1024, "
            f"got {shown(tokens)}",
            hint=_EXAMPLE,
        )
    mtp = method.endswith("mtp")
    if method in MODEL_METHODS:
        raise InputError(
            f"{_WHERE}: method {method!r} runs a drafter model of its own, whose caches "
            "mmcli does not plan",
            hint="plan an EAGLE head with --num-draft-layers, or an MTP or ngram method",
        )
    if not mtp and method not in PROMPT_METHODS | HEAD_METHODS:
        raise InputError(
            f"{_WHERE}: unknown method {method!r}",
            hint="methods: mtp (and every *_mtp), ngram, ngram_gpu, suffix, eagle, eagle3, dflash",
        )
    if tokens is None and not mtp:
        raise InputError(
            f"{_WHERE}: method {method!r} needs num_speculative_tokens (vLLM: "
            "'num_speculative_tokens was not provided')",
            hint=_EXAMPLE,
        )
    return Speculative(method, tokens, mtp=mtp, head=method in HEAD_METHODS)


def speculative_options(
    config_text: str | None, mtp: bool, tokens: int | None, draft_layers: int
) -> tuple[bool, int | None, int]:
    """(mtp, num_speculative_tokens, num_draft_layers) from ``--speculative-config`` or from
    ``--mtp`` / ``--num-speculative-tokens``, which say the same thing: one or the other."""
    if config_text is None:
        return mtp, tokens, draft_layers
    if mtp or tokens is not None:
        given = "--mtp" if mtp else "--num-speculative-tokens"
        raise InputError(
            f"{given} and {_WHERE} both describe the speculative decoding; give one",
            hint="put num_speculative_tokens in the JSON, or drop --speculative-config",
        )
    spec = parse_speculative_config(config_text)
    if spec.head and not draft_layers:
        raise InputError(
            f"{_WHERE}: method {spec.method!r} adds its drafter's attention layers to the pool, "
            "and their count is in the drafter's own config",
            hint="pass --num-draft-layers (an EAGLE head: 1)",
        )
    if draft_layers and not spec.head:
        raise InputError(
            f"--num-draft-layers with {_WHERE} method {spec.method!r}, which has no drafter head",
            hint="drop --num-draft-layers (an MTP method plans the model's own MTP layers)",
        )
    return spec.mtp, spec.tokens, draft_layers
