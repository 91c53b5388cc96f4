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
"""

from __future__ import annotations

from dataclasses import dataclass

from mmcli.errors import InputError
from mmcli.kv.model import ContextLength, ModelConfig
from mmcli.kv.releases import EngineRules

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
