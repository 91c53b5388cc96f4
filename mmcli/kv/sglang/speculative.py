"""SGLang's EAGLE / NEXTN (MTP) speculative decoding, as it changes a hybrid model's pools.

Mirrored for the releases whose row has ``speculative_state_in_slots`` (0.5.4 – 0.5.6) or
``speculative_states_reserved`` (0.5.7), for the hybrid GDN / Mamba-2 models they serve; the
facts, with file and line, are in docs/kv-share-engines.md:

* ``--speculative-num-steps`` and ``--speculative-eagle-topk`` are given (SGLang's
  ``auto_choose_speculative_params`` picks them by architecture otherwise: not mirrored); with
  top-k 1 the draft tokens are steps + 1 (server_args ``_handle_speculative_decoding``), else
  ``--speculative-num-draft-tokens`` must be given.
* ``--max-running-requests`` defaults to 48.
* (``speculative_state_in_slots``) every state slot also holds one intermediate SSM state and
  conv window per draft token (MambaPool's ``intermediate_ssm_state_cache`` /
  ``intermediate_conv_window_cache``), so
  ``handle_max_mamba_cache`` solves the slots with ``mamba_cache_per_req × (1 + D)``.
* the target's token pool gets a headroom for the draft and verify tokens: ``tokens +
  reqs × steps × topk + reqs × D + 100`` (``draft_runner_cache_size``), before the
  --max-total-tokens cap and the page floor.
* (``speculative_states_reserved``) the intermediate states are reserved apart, ``per_req ×
  max_running_requests × D``, allocated for the request pool + 1, with no token headroom.
* (``speculative_joint_solve``, 0.5.16 on) the slots are solved jointly with them
  (:mod:`mmcli.kv.sglang.configurator_state`), the radix cache stays on, the caches are sized
  by the request pool + 1, no token headroom. Not counted there: a draft model's layers that
  ``--speculative-draft-model-path`` adds to the cell (pool_configurator.py, not given here).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mmcli.errors import InputError
from mmcli.kv.sglang.hybrid import CONV_BYTES, HybridState
from mmcli.kv.sglang.releases import SglangRules, newest_release

#: ``max_running_requests`` when speculative decoding is on and it is not given (0.5.5
#: server_args.py:1534).
DEFAULT_RUNNING_REQUESTS = 48
#: ``--mamba-track-interval``'s default, which extra_buffer asserts is at least the draft tokens
#: (0.5.16 server_args.py:2142, :4844; 0.5.23 arg_groups/fields/exec_.py:533, mamba_hook.py:133).
MAMBA_TRACK_INTERVAL = 256
#: The headroom's fixed "buffer" tokens (0.5.5 model_runner.py:1582 ``draft_runner_cache_size``).
HEADROOM_BUFFER = 100

_GIB = 2**30


@dataclass(frozen=True)
class Speculative:
    """EAGLE / NEXTN speculative decoding's settings, as SGLang resolves them."""

    num_steps: int
    eagle_topk: int
    num_draft_tokens: int

    def headroom(self, requests: int) -> int:
        """Tokens the target's pool gets beyond the profiled ones (``draft_runner_cache_size``)."""
        draft = requests * self.num_steps * self.eagle_topk
        return draft + requests * self.num_draft_tokens + HEADROOM_BUFFER


def speculative(
    num_steps: int | None, eagle_topk: int | None, num_draft_tokens: int | None
) -> Speculative | None:
    """The settings from the options (None: no speculative decoding); refuses what SGLang
    would fill in by architecture, or reject."""
    if num_steps is None and eagle_topk is None and num_draft_tokens is None:
        return None
    if num_steps is None or eagle_topk is None:
        raise InputError(
            "SGLang: speculative decoding needs --speculative-num-steps and "
            "--speculative-eagle-topk (SGLang picks them by architecture when they are not "
            "given, which is not mirrored)",
            hint="e.g. --speculative-num-steps 3 --speculative-eagle-topk 1",
        )
    for name, value in (("steps", num_steps), ("topk", eagle_topk)):
        if value <= 0:
            raise InputError(
                f"SGLang: --speculative-{'num-steps' if name == 'steps' else 'eagle-topk'} "
                f"must be positive, got {value}",
                hint="e.g. --speculative-num-steps 3 --speculative-eagle-topk 1",
            )
    if eagle_topk == 1:
        # SGLang adjusts the draft tokens to steps + 1 whatever was given.
        return Speculative(num_steps, 1, num_steps + 1)
    if num_draft_tokens is None or num_draft_tokens <= 0:
        raise InputError(
            f"SGLang: --speculative-eagle-topk {eagle_topk} needs a positive "
            "--speculative-num-draft-tokens",
            hint="pass --speculative-num-draft-tokens, as the launch does",
        )
    return Speculative(num_steps, eagle_topk, num_draft_tokens)


def checked_speculative(
    given: tuple[int | None, int | None, int | None],
    rules: SglangRules,
    state: HybridState | None,
) -> Speculative | None:
    """The speculative settings (``--speculative-num-steps``, ``--speculative-eagle-topk``,
    ``--speculative-num-draft-tokens``), refused where they are not mirrored."""
    spec = speculative(*given)
    if spec is None:
        return None
    if state is not None and state.radix_cache and rules.speculative_radix_error:
        raise InputError(
            f"SGLang {rules.release} stops at start-up with speculative decoding for "
            f"{state.architecture}: 'Speculative decoding for {state.architecture} is not "
            "compatible with radix cache when using --mamba-scheduler-strategy no_buffer' "
            "(server_args.py _handle_mamba_radix_cache); its --disable-radix-cache and "
            "extra_buffer runs are not mirrored",
            hint="plan without --speculative-num-steps, or with --sglang-version "
            f"{newest_release(_mirrored)}",
        )
    if state is None or not _mirrored(rules):
        newest = newest_release(_mirrored)
        raise InputError(
            f"SGLang {rules.release}: speculative decoding is mirrored only for the hybrid GDN "
            f"/ Mamba-2 models of the releases whose state pool is mirrored (newest {newest}; "
            "its draft states in the state pool); the draft runner's own pool is not",
            hint=f"plan without --speculative-num-steps, or a hybrid model with --sglang-version "
            f"{newest}",
        )
    if rules.mamba_extra_buffer and spec.num_draft_tokens > MAMBA_TRACK_INTERVAL:
        raise InputError(
            f"SGLang {rules.release}: {spec.num_draft_tokens} draft tokens exceed "
            f"--mamba-track-interval {MAMBA_TRACK_INTERVAL}, which the extra_buffer radix "
            "strategy asserts against at start-up (a larger interval is not mirrored)",
            hint=f"plan with at most {MAMBA_TRACK_INTERVAL} draft tokens",
        )
    if rules.speculative_mamba2_radix_off and state.architecture == "NemotronHForCausalLM":
        raise InputError(
            f"SGLang {rules.release}: speculative decoding turns the radix cache off for "
            "NemotronHForCausalLM (server_args.py), and its state slots then are not mirrored",
            hint="plan Nemotron-H without --speculative-num-steps, or with an earlier "
            "--sglang-version",
        )
    return spec


def check_track_interval(rules: SglangRules, state: HybridState | None, page: int) -> None:
    """Refuse a page size the extra_buffer strategy's start-up assert rejects."""
    if state is None or not state.radix_cache or not rules.mamba_extra_buffer:
        return
    if MAMBA_TRACK_INTERVAL % page:
        raise InputError(
            f"SGLang {rules.release}: --page-size {page} does not divide --mamba-track-interval "
            f"{MAMBA_TRACK_INTERVAL}, which the extra_buffer radix strategy of "
            f"{state.architecture} asserts at start-up (another interval is not mirrored)",
            hint=f"plan with a page size that divides {MAMBA_TRACK_INTERVAL} (1, 16, 64, …)",
        )


def _mirrored(rules: SglangRules) -> bool:
    planned = (
        rules.speculative_state_in_slots
        or rules.speculative_states_reserved
        or rules.speculative_joint_solve
    )
    return planned and not rules.speculative_radix_error


def intermediate_sizes(
    state: HybridState, rows: int, spec: Speculative, rules: SglangRules | None = None
) -> str:
    """The rest of MambaPool's line with speculative decoding (0.5.5 memory_pool.py:257), its
    caches of ``rows`` + 1 rows (the slots; 0.5.7 the request pool, memory_pool.py:205); the
    conv windows deduplicated where ``rules.conv_window_dedup`` and top-k is 1."""
    ssm, conv = state.intermediate_bytes(rows, spec.num_draft_tokens)
    if rules is not None and rules.conv_window_dedup and spec.eagle_topk == 1:
        dim, window = state.conv_shape
        conv = state.state_layers * (rows + 1) * dim * (spec.num_draft_tokens + window - 1)
        conv *= CONV_BYTES
    return (
        f" intermediate_ssm_state_cache size: {ssm / _GIB:.2f}GB "
        f"intermediate_conv_window_cache size: {conv / _GIB:.2f}GB"
    )


def speculative_state(
    state: HybridState | None, rules: SglangRules, spec: Speculative | None
) -> HybridState | None:
    """The state as a speculative run sees it: the rows whose server_args turn the radix cache
    off under speculative decoding (``speculative_radix_off``) size fixed slots."""
    if state is None or spec is None or not rules.speculative_radix_off:
        return state
    return replace(state, radix_cache=False)
