"""The longest sequence the engine accepts, and its default: vLLM's ``_get_and_verify_max_len``.

From the config's length keys (:class:`mmcli.kv.model.ContextLength`): the derived maximum is
the smallest key, times the RoPE scaling factor of the types that scale it (not LongRoPE,
Llama 3, and from 0.30 not YaRN, whose ``max_position_embeddings`` is already the scaled
length; before 0.30 YaRN starts from its ``original_max_position_embeddings``; never for Gemma
3, already scaled). Without any key the engine takes ``--max-model-len`` as given, else
assumes 2048. A ``--max-model-len`` above the
derived maximum (and above ``model_max_length``) stops the engine unless
``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``. The default is the derived maximum, or for LongRoPE the
config's ``original_max_position_embeddings``.

``--max-model-len`` itself is read as vLLM's ``human_readable_int_or_auto`` reads it
(:func:`parse_max_model_len`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mmcli.errors import InputError
from mmcli.kv.model import ContextLength, ModelConfig
from mmcli.kv.releases import EngineRules, first_release, rules_for
from mmcli.text import quoted

#: What vLLM assumes when a config has none of the length keys.
ASSUMED_MAX_LEN = 2048

#: RoPE types whose factor never scales the length (vLLM's exclusion list before 0.30).
_UNSCALED = frozenset({"su", "longrope", "llama3"})
#: ... and from 0.30, the YaRN variants (their max_position_embeddings is already scaled).
_YARN = frozenset({"yarn", "deepseek_yarn", "deepseek_llama_scaling"})


@dataclass(frozen=True)
class MaxLen:
    """The engine's derived maximum and its default ``max_model_len``."""

    #: vLLM's ``derived_max_model_len`` (a float when a factor scales it).
    derived: float
    #: ``max_model_len`` when none is given.
    default: int
    #: How the maximum was derived, for messages: ``max_position_embeddings=40960 × 4.0``.
    how: str
    #: The config's ``model_max_length``, which a longer request may still fit under.
    model_max_length: int | None
    #: True when the config named no length, so the engine assumed one.
    assumed: bool


def derive_max_len(context: ContextLength, rules: EngineRules) -> MaxLen:
    """The derived maximum and default of a config under ``rules``."""
    derived: float
    if context.positions is None:
        derived, how = ASSUMED_MAX_LEN, f"none of the length keys (vLLM assumes {ASSUMED_MAX_LEN})"
    else:
        derived, how = context.positions, f"{context.key}={context.positions:,}"
    if context.rope and not context.prescaled:
        unscaled = _UNSCALED if rules.yarn_scales_max_len else _UNSCALED | _YARN
        factor = 1.0
        for rope in context.rope:
            if rope.rope_type in unscaled:
                continue
            factor = rope.factor if rope.factor is not None else factor
            if rope.rope_type == "yarn" and rules.yarn_scales_max_len:
                if rope.original_max_position_embeddings is None:
                    raise InputError(
                        "rope_scaling of type yarn has no original_max_position_embeddings, "
                        f"which vLLM {rules.release} reads to derive max_model_len",
                        hint="add original_max_position_embeddings to rope_scaling",
                    )
                derived = rope.original_max_position_embeddings
                how = f"{rope.rope_type} original_max_position_embeddings={derived:,}"
        if factor != 1.0:
            derived *= factor
            how += f" × {rope_type_names(context)} factor {factor:g}"
    default = int(derived)
    if any(r.rope_type == "longrope" for r in context.rope):
        default = context.original_max_position_embeddings or default
    return MaxLen(derived, default, how, context.model_max_length, context.positions is None)


def rope_type_names(context: ContextLength) -> str:
    return "/".join(sorted({r.rope_type for r in context.rope}))


def model_max_len(
    config: ModelConfig, rules: EngineRules, requested: int | None, *, allow_long: bool
) -> int | None:
    """The ``max_model_len`` the engine runs ``config`` with: ``requested`` when it may, else
    the default. Raises the engine's refusal of a ``requested`` above the derived maximum."""
    if config.context is None:
        return requested or config.max_model_len
    if requested is not None and config.context.positions is None:
        return requested  # with no length key the engine takes the given length as it is
    limit = derive_max_len(config.context, rules)
    if requested is None:
        return limit.default
    too_long = requested > limit.derived and (
        limit.model_max_length is None or requested > limit.model_max_length
    )
    if too_long and not allow_long:
        raise InputError(
            f"--max-model-len {requested:,} is longer than {config.name}'s derived maximum "
            f"{int(limit.derived):,} ({limit.how}); vLLM {rules.release} refuses to start",
            hint="lower --max-model-len, or pass --allow-long-max-model-len "
            "(vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1) to plan it anyway",
        )
    return requested


#: vLLM's ``human_readable_int`` (``vllm/utils/argparse_utils.py``; before 0.20
#: ``vllm/engine/arg_utils.py``): a number, one suffix, nothing else.
_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_HINT = (
    "e.g. 32768, 32k (32,000), 32K (32,768) or 1.5k; auto (or -1): the largest length "
    "that fits the KV memory"
)


def parse_max_model_len(text: str | None, release: str | None = None) -> int | str | None:
    """``--max-model-len`` as the release reads it: ``auto`` or ``-1`` (from 0.14), a whole
    number (``int()``), or a number with a suffix: ``k m g t`` powers of 1000 (decimals allowed,
    ``int(float(number) × 1000)``), ``K M G T`` powers of 1024 (whole numbers only); ``t`` and
    ``T`` from 0.13. Anything else, or a length that is not positive, is refused."""
    if text is None:
        return None
    rules = rules_for(release)
    value = text.strip()
    if len(value) > 64:
        raise InputError(
            f"--max-model-len must be a positive integer or auto, got a "
            f"{len(value):,}-character value",
            hint=_HINT,
        )
    if value == "-1" or value.lower() == "auto":
        if not rules.max_len_auto:
            raise InputError(
                f"--max-model-len {quoted(value)}: vLLM {rules.release} has no auto-fit of "
                f"max_model_len (it came in {first_release('max_len_auto')})",
                hint="give a length, e.g. 32768, or plan with --vllm-version "
                f"{first_release('max_len_auto')} or newer",
            )
        return "auto"
    length = _human_int(value, rules)
    if length is None or length <= 0:
        raise InputError(
            f"--max-model-len must be a positive integer or auto, got {quoted(text)}",
            hint=_HINT,
        )
    return length


def human_readable_int(text: str, flag: str, release: str | None = None) -> int:
    """A flag vLLM reads with ``human_readable_int`` (``--max-num-batched-tokens``,
    ``--kv-cache-memory-bytes``): a positive number as :func:`parse_max_model_len` reads one,
    without ``auto``; anything else is refused, naming ``flag``."""
    value = text.strip()
    number = None if len(value) > 64 else _human_int(value, rules_for(release), flag)
    if number is None or number <= 0:
        raise InputError(
            f"{flag} must be a positive integer, got {quoted(text[:64])}",
            hint=f"e.g. {flag} 8192, 8k (8,000) or 8K (8,192)",
        )
    return number


def _human_int(value: str, rules: EngineRules, flag: str = "--max-model-len") -> int | None:
    """``human_readable_int``: the number, or None where vLLM cannot read it."""
    match = _HUMAN.fullmatch(value)
    if match is not None:
        number, suffix = match.groups()
        if suffix in "tT" and not rules.max_len_tera:
            raise InputError(
                f"{flag} {quoted(value)}: vLLM {rules.release} reads no t / T suffix "
                f"(it came in {first_release('max_len_tera')})",
                hint="write the length with k, m or g (K, M, G), or as a number",
            )
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise InputError(
                f"{flag} {quoted(value)}: vLLM allows no decimals with the binary suffix {suffix}",
                hint=f"did you mean {number}{suffix.lower()} (powers of 1000)?",
            )
        return int(number) * _BINARY[suffix]
    try:
        return int(value)
    except ValueError:
        return None
