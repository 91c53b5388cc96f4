"""SGLang's token pool for one model: tokens, pages, requests, and the lines it prints.

Mirrored (``ModelRunner.init_memory_pool`` and the scheduler's start-up, in every release
read): ``max_total_num_tokens = rest // cell_size``; ``max_num_reqs = min(max(tokens /
context_len × 512, 2048), 4096)`` (before page flooring; from 0.5.10 after it, and capping
``--max-running-requests`` too); tokens floored to a multiple of ``page_size``;
``max_running_requests = min(tokens // 2, max_num_reqs)``; the pool's buffers
hold ``tokens + page_size`` slots (``KV Cache is allocated. #tokens: N, K size: … GB``, GB
being GiB there). No tokens left: the engine stops with "Not enough memory".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.figures import EngineFigures, Figure, PoolRequest, max_concurrency
from mmcli.kv.model import ModelConfig
from mmcli.kv.sglang.budget import (
    MM_RESERVE_WHY,
    MM_RUNTIME_RESERVE_BYTES,
    Fraction,
    PrefillGraphs,
    default_fraction,
    estimated_rest,
    reserves_text,
)
from mmcli.kv.sglang.configurator_state import configurator_slots
from mmcli.kv.sglang.dsa import NsaCell, is_nsa, nsa_for_budget, nsa_notes
from mmcli.kv.sglang.geometry import (
    Cell,
    hybrid_cell,
    kv_line_head,
    pool_log_lines,
    sglang_cell,
    sliding_note,
)
from mmcli.kv.sglang.hybrid import (
    MAMBA_FULL_MEMORY_RATIO,
    HybridState,
    state_line,
    state_slots,
)
from mmcli.kv.sglang.hybrid_notes import speculative_note, state_notes
from mmcli.kv.sglang.multimodal import is_multimodal, multimodal_mirrored
from mmcli.kv.sglang.qwen3_5 import check_default_vision, check_target_nextn
from mmcli.kv.sglang.releases import SglangRules, sglang_rules
from mmcli.kv.sglang.speculative import (
    DEFAULT_RUNNING_REQUESTS,
    check_track_interval,
    checked_speculative,
    intermediate_sizes,
    speculative_state,
)
from mmcli.kv.sglang.swa import SwaLayout, swa_layout
from mmcli.kv.state import MambaSpec

_GIB = 2**30


@dataclass(frozen=True)
class SglangOptions(PoolRequest):
    """What an SGLang launch sets that changes the pool (per rank), beyond the shared
    :class:`~mmcli.kv.figures.PoolRequest` (whose ``memory_bytes`` is here what
    ``profile_max_num_token`` calls ``rest_memory``)."""

    release: str | None = None
    mem_fraction_static: float | None = None
    page_size: int = 1
    page_size_given: bool = False
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    enable_dp_attention: bool = False
    speculative: bool = False
    #: EAGLE / NEXTN speculative decoding (``--speculative-num-steps`` etc.; None: off).
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None


def _check(options: SglangOptions, nsa: bool) -> None:
    if options.enable_dp_attention and not nsa:
        raise InputError(
            "SGLang: DP attention is not mirrored (the attention tp size, the pool per DP rank "
            "and its extra reserve differ)",
            hint="plan without --enable-dp-attention",
        )
    if options.speculative:
        raise InputError(
            "SGLang: speculative decoding is not mirrored (the draft runner shares and "
            "enlarges the pool)",
            hint="plan without speculative decoding",
        )
    if options.pp != 1:
        raise InputError(
            "SGLang: pipeline parallelism is not mirrored (layers per stage)",
            hint="plan with --pipeline-parallel-size 1",
        )
    if options.page_size <= 0 or options.tp <= 0:
        raise InputError(
            f"page size and tp must be positive, got {options.page_size} and {options.tp}",
            hint="SGLang's --page-size defaults to 1",
        )
    fraction = options.mem_fraction_static
    if fraction is not None and not 0 < fraction < 1:
        raise InputError(
            f"--mem-fraction-static must be between 0 and 1, got {fraction}",
            hint="SGLang's default is near 0.8-0.9; e.g. --mem-fraction-static 0.88",
        )


def _budget(
    options: SglangOptions, rules: SglangRules, doc: dict[str, Any], graphs: PrefillGraphs
) -> tuple[int, Figure, str, Fraction | None]:
    """The pool budget, as an exact or estimated figure, its source, and the fraction used."""
    if options.memory_bytes is not None:
        source = "--memory: the pool budget (profile_max_num_token's rest_memory)"
        return options.memory_bytes, Figure(options.memory_bytes), source, None
    if options.gpu_bytes is None or options.weights_bytes is None:
        raise InputError(
            "SGLang: no KV budget: pass --memory (the pool budget), or --gpu and --weights",
            hint="e.g. --memory 16.46GiB, or --gpu H100 --weights 16GB",
        )
    if rules.fraction_rule == "unread" and options.mem_fraction_static is None:
        raise InputError(
            f"SGLang {rules.release}: its default mem_fraction_static is not mirrored (it "
            "reserves memory for the CUDA graphs it captures by default, piecewise ones "
            "included)",
            hint="pass --mem-fraction-static (the server_args line of the log names it), or "
            "--memory",
        )
    if options.mem_fraction_static is None:
        check_default_vision(doc, rules)
    multimodal = graphs.multimodal
    fraction = Fraction(options.mem_fraction_static or 0.0, "--mem-fraction-static")
    if options.mem_fraction_static is None:
        fraction = default_fraction(
            rules,
            options.gpu_bytes,
            tp=options.tp,
            multimodal=multimodal,
            doc=doc,
            chunked_prefill_size=options.chunked_prefill_size,
            cuda_graph_max_bs=options.cuda_graph_max_bs,
            graphs=graphs,
            max_running_requests=options.max_running_requests,
        )
    rest = estimated_rest(options.gpu_bytes, options.weights_bytes // options.tp, fraction.value)
    if rules.multimodal_kv_reserve and multimodal:
        rest -= MM_RUNTIME_RESERVE_BYTES
    reason = (
        "estimate: SGLang measures free memory before and after loading the weights; mmcli "
        f"takes the {options.gpu_name or 'GPU'}'s total and subtracts the weights (CUDA "
        "context and communication buffers not counted)"
    )
    if multimodal and options.mem_fraction_static is None and not multimodal_mirrored(rules):
        reason += "; the vision-model adjustment of the default fraction is applied as if "
        reason += "SGLang treats this architecture as multimodal"
    if rules.multimodal_kv_reserve and multimodal:
        reason += f"; {MM_RESERVE_WHY}"
    source = f"estimate from --gpu {options.gpu_name} and --weights"
    return rest, Figure(rest, reason), source, fraction


def _context_len(
    config: ModelConfig, options: SglangOptions, doc: dict[str, Any]
) -> tuple[int | None, str | None]:
    """SGLang's ``context_len``, and why it is an estimate (None: exact)."""
    if options.max_model_len is not None:
        return options.max_model_len, None
    if config.max_model_len is None:
        return None, "the config gives no context length; pass --max-model-len"
    text = doc.get("text_config") if isinstance(doc.get("text_config"), dict) else doc
    if isinstance(text, dict) and text.get("rope_scaling"):
        # SGLang's get_context_length scales by rope_scaling's factor for most models.
        why = "estimate: SGLang derives the context length from rope_scaling in its own way; "
        return config.max_model_len, why + "pass --max-model-len"
    return config.max_model_len, None


def plan_sglang(config: ModelConfig, doc: dict[str, Any], options: SglangOptions) -> EngineFigures:
    """What SGLang ``options.release`` allocates for ``config`` (its HF ``doc``) per rank."""
    rules = sglang_rules(options.release)
    _check(options, is_nsa(doc))
    state: HybridState | None = None
    nsa: NsaCell | None = None
    if is_nsa(doc):
        nsa = nsa_for_budget(config, doc, rules, options)
        dim = nsa.kv_lora_rank + nsa.qk_rope_head_dim
        cell = Cell(nsa.layers, 1, dim, nsa.dtype_bytes, True, dtype_name=nsa.torch_dtype)
    elif any(isinstance(layer.spec, MambaSpec) for layer in config.layers):
        cell, state = hybrid_cell(config, doc, rules, tp=options.tp, kv_dtype=options.kv_dtype)
    else:
        cell = sglang_cell(config, doc, rules, tp=options.tp, kv_dtype=options.kv_dtype)
    swa: SwaLayout | None = None
    swa_note: str | None = None
    if cell.sliding_as_full and state is None:
        swa, swa_note = swa_layout(
            config,
            doc,
            rules,
            tp=options.tp,
            dtype_bytes=cell.dtype_bytes,
            gpu_name=options.gpu_name,
        )
    spec = checked_speculative(
        (
            options.speculative_num_steps,
            options.speculative_eagle_topk,
            options.speculative_num_draft_tokens,
        ),
        rules,
        state,
    )
    check_target_nextn(doc, rules, spec)
    state = speculative_state(state, rules, spec)
    user_requests = options.max_running_requests
    if spec is not None and user_requests is None:
        user_requests = DEFAULT_RUNNING_REQUESTS
    graphs = PrefillGraphs(
        mla=cell.mla,
        multimodal=is_multimodal(doc, rules, from_gpu=options.memory_bytes is None),
        max_total_tokens=options.max_total_tokens,
        model_path=config.name,
        context_length=options.max_model_len,
    )
    rest, budget, source, fraction = _budget(options, rules, doc, graphs)
    estimate = budget.estimate
    page = options.page_size if nsa is None else nsa.page
    if state is not None and state.radix_cache and rules.mamba_radix_page_one:
        page = 1  # the radix cache's no_buffer strategy sets page_size 1 (server_args.py)
    check_track_interval(rules, state, page)
    per_token = cell.bytes_per_token if nsa is None else nsa.budget_bytes_per_token
    if swa is not None and swa.full_half_bytes is not None:  # Gemma 4: no uniform cell
        per_token = int(swa.solved)
    slots = joint = 0
    draft = 0 if spec is None else spec.num_draft_tokens
    if state is None:
        raw = max(0, rest // per_token)
    else:
        if rules.speculative_joint_solve and state.radix_cache:
            slots, left, joint = configurator_slots(
                state, rest / _GIB, rules, draft=draft, requests=user_requests
            )
        else:
            slots, left = state_slots(
                state,
                rest / _GIB,
                max_running_requests=user_requests,
                ratio=MAMBA_FULL_MEMORY_RATIO,
                draft_tokens=draft,
                reserved_requests=user_requests if rules.speculative_states_reserved else None,
            )
        raw = max(0, int(left * _GIB // cell.bytes_per_token))
    context, context_estimate = _context_len(config, options, doc)
    tokens = raw if options.max_total_tokens is None else min(raw, options.max_total_tokens)
    tokens = tokens // page * page
    swa_tokens = 0
    if swa is not None:
        tokens, swa_tokens = swa.split(rules, tokens, page, rest, options.max_total_tokens)
    reqs = _request_pool(rules, user_requests, raw, tokens, context)
    if state is not None and reqs is not None:
        per = rules.mamba_slots_per_request if state.radix_cache else 1
        reqs = min(reqs, slots // per)
    apart = rules.speculative_states_reserved or rules.speculative_joint_solve
    if spec is not None and reqs is not None and not apart:
        # The target's pool also holds the draft and verify tokens (draft_runner_cache_size).
        raw += spec.headroom(reqs)
        tokens = raw if options.max_total_tokens is None else min(raw, options.max_total_tokens)
        tokens = tokens // page * page
    notes: list[str] = []
    note = None if swa else sliding_note(doc, rules, cell.sliding_as_full)
    notes.extend(n for n in (note, swa_note) if n)
    if swa is not None:
        notes.append(swa.note(tokens, swa_tokens))
    if nsa is not None:
        given = options.page_size if options.page_size_given else None
        notes.extend(nsa_notes(nsa, rules, tokens, given, auto=options.kv_dtype == "auto"))
    elif cell.mla and not options.page_size_given:
        notes.append(
            "page size 1 assumed: attention backends that force one (flashmla 64, cutlass_mla "
            "128, trtllm_mla 32/64 on Blackwell) floor the pool to it; pass --page-size"
        )
    figures = {
        "bytes_per_token": Figure(per_token),
        "block_tokens": Figure(page),
        "budget_bytes": budget,
        "pool_tokens": Figure(tokens, estimate),
        "blocks": Figure(tokens // page, estimate),
    }
    if swa is not None:
        figures["swa_pool_tokens"] = Figure(swa_tokens, estimate)
    if nsa is not None:
        figures["allocated_bytes_per_token"] = Figure(nsa.allocated_bytes_per_token)
    if state is not None:
        slot_estimate = estimate if state.radix_cache else None
        figures["state_bytes_per_request"] = Figure(state.bytes_per_request)
        figures["state_slots"] = Figure(slots, slot_estimate)
        reserved = user_requests if rules.speculative_states_reserved else None
        cell_bytes = cell.bytes_per_token
        notes.extend(state_notes(state, rules, slots, cell_bytes, draft, reserved, joint))
        if spec is not None:
            notes.append(speculative_note(spec, rules))
    refusal = None
    running = None
    if rules.weights_overflow_error and rest <= 0:
        refusal = "SGLang stops at start-up: 'Loaded weights leave no GPU memory for the KV "
        refusal += "cache under --mem-fraction-static=…'"
    elif state is not None and slots <= 0 and rules.mamba_slots_error:
        refusal = "SGLang stops at start-up: 'Not enough GPU memory for hybrid "
        refusal += "(mamba/linear-attention) state cache. Computed max_mamba_cache_size=0'"
    elif tokens <= 0:
        refusal = "SGLang stops at start-up: 'Not enough memory. Please try to increase "
        refusal += "--mem-fraction-static.'"
    else:
        if reqs is not None:
            # tp_worker: min(tokens // 2, or --max-running-requests, the request pool's size).
            user = user_requests
            running = min(tokens // 2 if user is None else user, reqs)
            if running <= 0:
                refusal = "SGLang stops at start-up: 'max_running_request is zero' (no state "
                refusal += "slot for a request)"
        if context is not None:
            conc = max_concurrency(tokens, context, page)
            figures["max_concurrency"] = Figure(conc, estimate or context_estimate)
    figures["max_running_requests"] = Figure(running, estimate or context_estimate)
    reserves = reserves_text(fraction)
    kept = "1−mem_frac" if fraction is None else f"{1 - fraction.value:.1%} of GPU"
    result = EngineFigures(
        "sglang",
        rules.release,
        figures,
        source,
        reserves,
        notes=notes,
        refusal=refusal,
        kept_back=kept,
    )
    if tokens > 0:
        head = kv_line_head(rules, cell)
        result.log_lines = pool_log_lines(cell, tokens, page, running, context, head)
        if swa is not None:
            result.log_lines[:1] = swa.log_lines(tokens, swa_tokens, page, head)
        elif nsa is not None:
            # get_kv_size_bytes adds the indexer pages to the latent rows (memory_pool.py).
            size = nsa.pool_bytes(tokens) / _GIB
            result.log_lines[0] = f"{head}#tokens: {tokens}, KV size: {size:.2f} GB"
        if state is not None:
            # The state pool is built (and logged) before the token pool.
            pool_slots = slots if rules.hybrid_rule == "ratio" else reqs
            line = state_line(state, rules, pool_slots)
            rows = reqs if apart else pool_slots
            if spec is not None and rows is not None:
                line += intermediate_sizes(state, rows, spec, rules)
            result.log_lines.insert(0, line)
    return result


def _request_pool(
    rules: SglangRules, user: int | None, raw: int, tokens: int, context: int | None
) -> int | None:
    """The request pool's size (None: it needs the context length)."""
    if rules.user_requests_capped_by_capacity and user is not None:
        # 0.5.14 _resolve_max_num_reqs: a user's figure is capped at capacity // 2 alone.
        return tokens // 2
    if rules.requests_from_capacity:
        # 0.5.10 _resolve_max_num_reqs: from the floored, capped capacity; caps the user's too.
        if context is None:
            return None
        return min(max(int(tokens / context * 512), 2048), 4096)
    if user is not None:
        return user
    if context is None:
        return None
    return min(max(int(raw / context * 512), 2048), 4096)
