"""The notes a hybrid GDN / Mamba-2 plan shows: how the state slots were solved, what they
take off the budget, and what speculative decoding adds (facts in docs/kv-share-engines.md)."""

from __future__ import annotations

from mmcli.kv.sglang.configurator_state import configurator_note
from mmcli.kv.sglang.hybrid import MAMBA_FULL_MEMORY_RATIO, HybridState
from mmcli.kv.sglang.releases import SglangRules
from mmcli.kv.sglang.speculative import DEFAULT_RUNNING_REQUESTS, Speculative

_GIB = 2**30


def state_notes(
    state: HybridState,
    rules: SglangRules,
    slots: int,
    cell_bytes: int,
    draft: int,
    reserved_requests: int | None,
    joint_reserve: int = 0,
) -> list[str]:
    """The state pool's two notes. ``draft``: the speculative D (0: off); ``reserved_requests``:
    the requests the release reserves the D intermediate states for (None: they share the
    slots, each solved with × (1 + D))."""
    per = state.bytes_per_request
    reserve = per * (reserved_requests or 0) * draft
    shared = draft if reserved_requests is None else 0
    taken = (slots * per * (1 + shared) + reserve) / _GIB
    spec = f" // {1 + shared}" if shared else ""
    budget = "budget" if not reserve else f"(budget − {reserve / _GIB:.2f} GiB)"
    ratio = rules.mamba_slots_per_request
    if rules.speculative_joint_solve and state.radix_cache:
        how = configurator_note(state, rules, slots, draft, joint_reserve)
        pad = 1 if rules.mamba_pad_slot_budgeted else 0
        taken = ((slots + pad) * per + joint_reserve) / _GIB
    elif state.radix_cache:
        how = (
            f"max_mamba_cache_size = int({budget} × {MAMBA_FULL_MEMORY_RATIO}/"
            f"{1 + MAMBA_FULL_MEMORY_RATIO:g} // {per:,} B{spec}) = {slots:,} "
            "(mamba_full_memory_ratio "
            f"{MAMBA_FULL_MEMORY_RATIO}; radix cache on), requests capped at slots // {ratio}"
        )
    else:
        why = (
            f"SGLang {rules.release} turns the radix cache off for hybrid models"
            if rules.hybrid_rule == "fixed"
            else f"SGLang {rules.release} turns the radix cache off for {state.architecture}"
        )
        how = (
            f"max_mamba_cache_size = {slots:,} (--max-running-requests, or "
            f"{DEFAULT_RUNNING_REQUESTS if draft else 512}; {why}), "
            "requests capped at the slots"
        )
    if reserve:
        how += (
            f"; {reserve / _GIB:.2f} GiB reserved first for the draft tokens' intermediate "
            f"states ({per:,} B × {reserved_requests} requests × {draft})"
        )
    conv = "×".join(map(str, state.conv_shape))
    ssm = "×".join(map(str, state.ssm_shape))
    return [
        f"hybrid state pool: {state.state_layers} state layers × (conv {conv} bf16 + ssm {ssm} "
        f"fp32) = {per:,} B per request; {how}; {taken:.2f} GiB taken off the budget",
        f"token pool over the {state.attention_layers} attention layers only "
        f"({cell_bytes:,} B per token); max concurrency counts tokens, "
        "max running requests the state slots too",
    ]


def speculative_note(spec: Speculative, rules: SglangRules) -> str:
    """What EAGLE / NEXTN speculative decoding changes in the pools of ``rules.release``."""
    d, text = spec.num_draft_tokens, f"speculative decoding ({spec.num_steps} steps, top-k "
    text += f"{spec.eagle_topk}, {d} draft tokens): "
    if rules.speculative_joint_solve:
        return text + (
            f"the {d} intermediate states per request are solved with the slots and allocated "
            "for the request pool + 1; the radix cache stays on; the token pool gets no draft "
            "headroom; a --speculative-draft-model-path drafter's layers (added to the cell) "
            "and the draft model's own pool are not counted"
        )
    if rules.speculative_states_reserved:
        return text + (
            f"the {d} intermediate states per request are reserved apart, by "
            "--max-running-requests, and allocated for the request pool + 1; the token pool "
            "gets no draft headroom; the draft model's own pool is not counted"
        )
    return text + (
        f"each state slot also holds {d} intermediate states (slots solved with × {1 + d}); "
        f"the token pool gets requests × ({spec.num_steps} × {spec.eagle_topk} + {d}) + 100 "
        "tokens for the draft and verify tokens; the draft model's own pool is not counted"
    )
