"""DeepSeek-V4 on SGLang: refused, naming the pools SGLang builds for it and what is not mirrored.

SGLang serves ``DeepseekV4ForCausalLM`` (``models/deepseek_v4.py``) from the release that puts
it on ``is_hybrid_swa_model``'s list (``release_names.SWA_ADDED``). Its KV cache is not the
hybrid sliding-window pool of :mod:`mmcli.kv.sglang.swa` but ``DeepSeekV4TokenToKVPool``
(``mem_cache/deepseek_v4_memory_pool.py``), sized by ``DSV4PoolConfigurator``
(``model_executor/pool_configurator.py``), which splits the budget across six pools, the
fields of its ``MemoryPoolConfig``: ``full`` / ``swa`` token pools, the compressed KV pools of
the ``compress_ratio`` 4 layers (with their indexer) and 128 layers (``c4`` / ``c128``), and
the compress-state pools ``c4_state`` / ``c128_state``. The sliding pool's
``--swa-full-tokens-ratio`` defaults to 0.1 for the model (DeepSeek-V4's override hook),
not 0.8.

What is not mirrored: the pools' page layouts (page bytes of the fp8 latent and its
scales, padded pages of the compressed pools), the compress-state dtype
(``SGLANG_DSV4_COMPRESS_STATE_DTYPE``) and its ring per page, the indexer's bytes per
token, and, in later releases, the SWA request-cap sizing and the unified ring mode. A
DeepSeek-V4 config is therefore refused on SGLang, with these names, rather than planned
as a plain hybrid sliding-window pool.
"""

from __future__ import annotations

from mmcli.errors import InputError
from mmcli.kv.sglang.release_names import DSV4_SWA_CAP_FROM, SWA_ADDED
from mmcli.kv.sglang.releases import RELEASES, sglang_rules

ARCHITECTURE = "DeepseekV4ForCausalLM"
#: ``compress_ratio`` of the layers with the C4 pool and the indexer, and of the C128 pool.
C4, C128 = 4, 128

#: The pools ``DSV4PoolConfigurator`` sizes (``MemoryPoolConfig`` fields, ``…_max_total_num_tokens``
#: and ``…_state_pool_size``).
POOLS = "full / swa / c4 / c128 token pools and c4_state / c128_state"

NOT_MIRRORED = (
    "its page layouts (fp8 latent, scales, padded compressed pages), the compress-state dtype "
    "(SGLANG_DSV4_COMPRESS_STATE_DTYPE) and ring, and the indexer's bytes per token are not "
    "mirrored"
)


def first_release() -> str:
    """The first SGLang release read that serves DeepSeek-V4 (from the list additions)."""
    return next(r for r, archs in SWA_ADDED.items() if ARCHITECTURE in archs)


def _layers(ratios: list[int] | None) -> str:
    if ratios is None:
        return "compress_ratios (not a list of one integer per layer here)"
    c4 = sum(r == C4 for r in ratios)
    c128 = sum(r == C128 for r in ratios)
    return (
        f"{len(ratios)} layers: {c4} with compress_ratio {C4} (C4 pool and indexer), "
        f"{c128} with compress_ratio {C128} (C128 pool)"
    )


def sglang_refusal(ratios: list[int] | None, release: str | None, where: str) -> InputError:
    """The refusal of a DeepSeek-V4 config on SGLang ``release``; ``ratios``: each layer's
    compress ratio as the model reads it (``max(1, r)``), None when unreadable."""
    rules = sglang_rules(release)
    first = first_release()
    if ARCHITECTURE not in rules.hybrid_swa_archs:
        return InputError(
            f"{where}: DeepSeek-V4: SGLang {rules.release} does not serve it "
            f"({ARCHITECTURE} is in its models from {first})",
            hint="SGLang's DeepSeek-V4 pools are not mirrored in any release either",
        )
    names = [r.release for r in RELEASES]
    cap = names.index(rules.release) >= names.index(DSV4_SWA_CAP_FROM)
    ratio = (
        "--swa-full-tokens-ratio 0.1 or, when it is not given, a swa pool sized from the "
        "request cap (_resolve_swa_cap_tokens)"
        if cap
        else "--swa-full-tokens-ratio 0.1 by default"
    )
    return InputError(
        f"{where}: DeepSeek-V4 on SGLang {rules.release}: DSV4PoolConfigurator sizes "
        f"DeepSeekV4TokenToKVPool's {POOLS} pools for {_layers(ratios)}, with {ratio}; "
        f"{NOT_MIRRORED}",
        hint="mmcli plans SGLang's DeepSeek V3.2 sparse attention and the hybrid "
        "sliding-window pool of other models; DeepSeek-V4 is refused on every engine",
    )
