"""The hybrid state slots of SGLang 0.5.16 on: KVCacheConfigurator._handle_max_mamba_cache
(mem_cache/kv_cache_configurator.py; facts, with file and line, in docs/kv-share-engines.md).

With the radix cache on (the three models served keep it, speculative decoding included), a
share ``r / (1 + r)`` of the budget (``mamba_full_memory_ratio`` r, 0.9) holds the slots:

* without speculative decoding ``int(share // per_req)`` (0.5.16), ``int((share − per_req) //
  per_req)`` once the padding slot is budgeted (0.5.17 on), the slots (+ 1) off the budget;
* with EAGLE / NEXTN (D draft tokens, ``q`` slots per request: ``_calculate_mamba_ratio``) the
  slots are solved jointly with the intermediate states, ``int(share // (per_req × (1 + D /
  q)))`` (0.5.17 on: ``int((share − per_req (1 + D)) // …)``), then ``per_req × (min(requests,
  slots // q) (+ 1)) × D`` is reserved for them as well.
"""

from __future__ import annotations

from mmcli.kv.sglang.hybrid import MAMBA_FULL_MEMORY_RATIO, HybridState
from mmcli.kv.sglang.rules import SglangRules

_GIB = 1 << 30


def configurator_slots(
    state: HybridState, rest_gib: float, rules: SglangRules, *, draft: int, requests: int | None
) -> tuple[int, float, int]:
    """``max_mamba_cache_size``, the GiB left for the token pool and the bytes reserved for the
    intermediate states (``requests``: --max-running-requests, 48 by default with D > 0)."""
    per = state.bytes_per_request
    ratio = MAMBA_FULL_MEMORY_RATIO
    share = rest_gib * ratio / (1 + ratio) * _GIB
    pad = 1 if rules.mamba_pad_slot_budgeted else 0
    q = rules.mamba_slots_per_request
    reserve = 0
    if draft and requests is not None:
        slots = int((share - pad * per * (1 + draft)) // (per * (1 + draft / q)))
        reserve = per * (min(requests, slots // q) + pad) * draft
        rest_gib -= reserve / _GIB
    else:
        slots = int((share - pad * per) // per)
    return slots, rest_gib - (slots + pad) * per / _GIB, reserve


def configurator_note(
    state: HybridState, rules: SglangRules, slots: int, draft: int, reserve: int
) -> str:
    """How the slots were solved, for the state pool's note."""
    per, q = state.bytes_per_request, rules.mamba_slots_per_request
    pad = 1 if rules.mamba_pad_slot_budgeted else 0
    share = f"budget × {MAMBA_FULL_MEMORY_RATIO}/{1 + MAMBA_FULL_MEMORY_RATIO:g}"
    if draft:
        minus = f" − {per * (1 + draft):,} B" if pad else ""
        text = (
            f"max_mamba_cache_size = int(({share}{minus}) // ({per:,} B × (1 + {draft}/{q}))) "
            f"= {slots:,}, solved with the draft tokens' intermediate states, of which "
            f"{reserve / _GIB:.2f} GiB ({per:,} B × (min(requests, slots // {q})"
            f"{' + 1' if pad else ''}) × {draft}) are reserved too"
        )
    else:
        minus = f" − {per:,} B" if pad else ""
        text = f"max_mamba_cache_size = int(({share}{minus}) // {per:,} B) = {slots:,}"
    slot_text = "the slots + 1 (MambaPool's padding slot)" if pad else "the slots"
    return (
        f"{text} (mamba_full_memory_ratio {MAMBA_FULL_MEMORY_RATIO}; radix cache on), "
        f"{slot_text} taken off the budget, requests capped at slots // {q}"
    )
