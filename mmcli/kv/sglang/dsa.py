"""DeepSeek sparse attention (V3.2's NSA / DSA) in SGLang's token pool.

SGLang keeps an NSA model's latent in ``NSATokenToKVPool``, an MLA pool with an indexer
buffer beside it: per layer, one row of the latent per slot (``kv_lora_rank +
qk_rope_head_dim`` elements of the KV dtype; with an fp8 cache, a row of ``kv_lora_rank``
fp8 bytes, ``kv_lora_rank / 128`` fp32 scales and the rope part in bf16), and one indexer
page of ``page · (index_head_dim + index_head_dim / 128 · 4)`` bytes per 64 tokens. Its
budget (``profile_max_num_token``) counts the latent at the KV dtype's size and the
indexer per token, so with an fp8 cache it budgets fewer bytes per token than it allocates:
the plan shows both, pool tokens from the budget and the bytes from the allocation. The
releases and the facts, with file and line, are in docs/kv-share-engines.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mmcli.dtypes import KV_DTYPE_BYTES
from mmcli.errors import InputError
from mmcli.kv.model import ModelConfig, architecture
from mmcli.kv.sglang.releases import SglangRules, newest_release
from mmcli.kv.sglang.swa import SM100_GPUS
from mmcli.kv.spec import MLAAttentionSpec

if TYPE_CHECKING:
    from mmcli.kv.sglang.pool import SglangOptions

#: ``is_deepseek_nsa``: the first architecture is one of these and the config has
#: ``index_topk`` (configs/model_config.py:52 in 0.5.4).
NSA_ARCHITECTURES = (
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLMNextN",
)
#: ``NSATokenToKVPool.quant_block_size``: elements per fp32 scale (indexer and fp8 latent).
QUANT_BLOCK = 128
#: Bytes of one fp32 scale, and of one bf16 rope element in the fp8 latent row.
_SCALE_BYTES = 4
_ROPE_BYTES = 2
_FP8 = ("fp8", "fp8_e4m3")
#: The one indexer head size ``NSATokenToKVPool`` takes (it asserts 128, memory_pool.py:1429
#: in 0.5.4).
INDEX_HEAD_DIM = 128
#: Config keys that share or pool the indexer (0.5.23 configs/model_config.py
#: ``dsa_layer_skips_topk`` :488 reads indexer_types / cli_factor / index_topk_freq /
#: index_topk_pattern, ``get_dsa_index_kpool`` :530 index_kpool); V3.2 has none of them.
_SHARED_INDEX_KEYS = (
    "indexer_types",
    "cli_factor",
    "index_topk_freq",
    "index_topk_pattern",
    "index_kpool",
)


def _text(doc: dict[str, Any]) -> dict[str, Any]:
    inner = doc.get("text_config")
    return inner if isinstance(inner, dict) else doc


def is_nsa(doc: dict[str, Any]) -> bool:
    """Whether the config has DeepSeek sparse attention (an indexer: ``index_topk``)."""
    return _text(doc).get("index_topk") is not None


@dataclass(frozen=True)
class NsaCell:
    """What one token takes in an NSA pool of one rank, as budgeted and as allocated."""

    layers: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    index_head_dim: int
    #: Bytes of one latent element (1: fp8_e4m3, 2: bfloat16).
    dtype_bytes: int
    page: int
    #: Whether the budget counts the allocated row (``dsa_budget_row_allocated``, 0.5.17 on).
    budget_is_row: bool = False

    @property
    def fp8(self) -> bool:
        return self.dtype_bytes == 1

    @property
    def torch_dtype(self) -> str:
        """The pool's dtype as the KV line names it from 0.5.13 (``KVCache.dtype``)."""
        return "torch.float8_e4m3fn" if self.fp8 else "torch.bfloat16"

    @property
    def index_bytes(self) -> int:
        """Indexer bytes per token and layer: fp8 keys and one fp32 scale per 128."""
        return self.index_head_dim + self.index_head_dim // QUANT_BLOCK * _SCALE_BYTES

    @property
    def row_bytes(self) -> int:
        """The latent row allocated per slot and layer (``kv_cache_dim`` × element size)."""
        latent = self.kv_lora_rank + self.qk_rope_head_dim
        if not self.fp8:
            return latent * self.dtype_bytes
        scales = self.kv_lora_rank // QUANT_BLOCK * _SCALE_BYTES
        return self.kv_lora_rank + scales + self.qk_rope_head_dim * _ROPE_BYTES

    @property
    def budget_bytes_per_token(self) -> int:
        """``profile_max_num_token``'s ``cell_size``: latent at the dtype's size, plus the
        indexer (from 0.5.17 the allocated row)."""
        return (self.budget_row_bytes + self.index_bytes) * self.layers

    @property
    def budget_row_bytes(self) -> int:
        """The latent bytes per layer the budget counts."""
        if self.budget_is_row:
            return self.row_bytes
        return (self.kv_lora_rank + self.qk_rope_head_dim) * self.dtype_bytes

    @property
    def allocated_bytes_per_token(self) -> int:
        """Bytes the pool allocates per token (row and indexer, every layer)."""
        return (self.row_bytes + self.index_bytes) * self.layers

    def pool_bytes(self, tokens: int) -> int:
        """Bytes of the pool's buffers for ``tokens``: ``tokens + page`` latent rows and
        ``(tokens + page + 1) // page`` indexer pages, in every layer (``get_kv_size_bytes``)."""
        rows = (tokens + self.page) * self.row_bytes
        pages = (tokens + self.page + 1) // self.page * self.page * self.index_bytes
        return (rows + pages) * self.layers


def _refuse(what: str, hint: str) -> InputError:
    return InputError(f"SGLang: {what}", hint=hint)


def nsa_cell(
    config: ModelConfig, doc: dict[str, Any], rules: SglangRules, *, kv_dtype: str
) -> NsaCell:
    """The NSA cell of ``config`` in ``rules``' release; refuses what is not mirrored."""
    if not rules.dsa_mirrored:
        raise _refuse(
            f"DeepSeek sparse attention in SGLang {rules.release}: its NSA pool (the fp8 latent "
            "row its attention backend picks, and the indexer) is not mirrored",
            f"pass --sglang-version {newest_release(lambda r: r.dsa_mirrored)}, or plan it for "
            "vLLM (--engine vllm)",
        )
    arch = architecture(doc)
    text = _text(doc)
    specs = [layer.spec for layer in config.layers]
    if arch not in NSA_ARCHITECTURES or not all(isinstance(s, MLAAttentionSpec) for s in specs):
        raise _refuse(
            f"{arch} has an indexer (index_topk) but is not one of SGLang's DeepSeek NSA "
            "architectures with MLA in every layer, which is not mirrored",
            "plan it for vLLM (--engine vllm)",
        )
    index_head_dim = text.get("index_head_dim")
    rank, rope = text.get("kv_lora_rank"), text.get("qk_rope_head_dim")
    if index_head_dim != INDEX_HEAD_DIM or not isinstance(rank, int) or not isinstance(rope, int):
        raise _refuse(
            f"index_head_dim {index_head_dim}: SGLang's NSA pool takes 128 only "
            "(NSATokenToKVPool asserts it)",
            "plan it for vLLM (--engine vllm)",
        )
    layers = text.get("num_hidden_layers")
    if not isinstance(layers, int) or isinstance(layers, bool) or layers <= 0:
        raise _refuse("the config gives no num_hidden_layers", "check the config")
    if rank % QUANT_BLOCK:
        raise _refuse(
            f"kv_lora_rank {rank} is not a multiple of {QUANT_BLOCK} (the fp8 latent's scale "
            "block)",
            "plan it for vLLM (--engine vllm)",
        )
    shared = [k for k in _SHARED_INDEX_KEYS if text.get(k) not in (None, 1)]
    if shared:
        raise _refuse(
            f"{', '.join(shared)}: an NSA indexer shared between layers or pooled (fewer "
            "indexer rows, a larger page) is not mirrored",
            "plan it for vLLM (--engine vllm)",
        )
    return NsaCell(
        layers,
        rank,
        rope,
        index_head_dim,
        _dtype_bytes(text, kv_dtype),
        rules.dsa_page_size,
        rules.dsa_budget_row_allocated,
    )


def _dtype_bytes(text: dict[str, Any], kv_dtype: str) -> int:
    """fp8_e4m3 (1) or bfloat16 (2): the two cache dtypes SGLang's NSA pool takes."""
    if kv_dtype in _FP8:
        return 1
    # auto: the model's dtype in 0.5.4, bfloat16 on Hopper from 0.5.5 (server_args.py:1083);
    # a bfloat16 model is planned alike.
    model = text.get("torch_dtype", text.get("dtype"))
    if kv_dtype == "bfloat16" or (kv_dtype == "auto" and model == "bfloat16"):
        return KV_DTYPE_BYTES["bfloat16"]
    raise _refuse(
        f"KV cache dtype {kv_dtype} with DeepSeek sparse attention: SGLang's NSA pool takes "
        "bfloat16 or fp8_e4m3 only",
        "pass --kv-dtype bfloat16 or --kv-dtype fp8",
    )


def nsa_notes(
    cell: NsaCell, rules: SglangRules, tokens: int, page_given: int | None, *, auto: bool
) -> list[str]:
    """What SGLang forces for an NSA model, and where its budget and allocation differ."""
    attention = (
        "turns DP attention on (dp_size = tp; off at tp 1)"
        if rules.dsa_dp_attention
        else "keeps attention tensor-parallel at --dp 1"
    )
    latent = f"{cell.kv_lora_rank + cell.qk_rope_head_dim} × {cell.dtype_bytes}"
    if cell.budget_is_row:
        latent = f"the allocated row {cell.budget_row_bytes} B"
    notes = [
        f"DeepSeek NSA: SGLang {rules.release} sets page size {cell.page} and {attention} "
        "(server_args, CUDA; ROCm's page 1 is not planned); the MLA latent is whole on every "
        "rank, so the pool per rank is the same",
        f"budget cell ({latent} + indexer {cell.index_bytes}) × {cell.layers} layers = "
        f"{cell.budget_bytes_per_token:,} B per token",
    ]
    if auto:
        notes.append(
            "--kv-dtype auto is taken as a Hopper GPU's bfloat16 (SGLang picks fp8_e4m3 on "
            "Blackwell: pass --kv-dtype fp8 there)"
        )
    if cell.fp8 and rules.dsa_fp8_trtllm_on_blackwell:
        whose = "budgeted and allocated" if cell.budget_is_row else "the budget's"
        notes.append(
            f"the fp8 row is that of a Hopper GPU's flashmla_kv backend: on Blackwell SGLang "
            f"{rules.release} picks the trtllm NSA backends, whose row is {whose} "
            f"{cell.kv_lora_rank + cell.qk_rope_head_dim} B (allocation = budget there)"
        )
    if page_given is not None and page_given != cell.page:
        notes.append(f"--page-size {page_given} is replaced by {cell.page} (server_args)")
    if cell.allocated_bytes_per_token != cell.budget_bytes_per_token and tokens > 0:
        budgeted = tokens * cell.budget_bytes_per_token
        allocated = cell.pool_bytes(tokens)
        notes.append(
            f"SGLang {rules.release} budgets {cell.budget_bytes_per_token:,} B per token (an "
            f"fp8 latent of {cell.kv_lora_rank + cell.qk_rope_head_dim} B) but allocates "
            f"{cell.allocated_bytes_per_token:,} B (its fp8 row is {cell.row_bytes} B: "
            f"{cell.kv_lora_rank} fp8, {cell.kv_lora_rank // QUANT_BLOCK} fp32 scales, "
            f"{cell.qk_rope_head_dim} bf16 rope): the pool takes {allocated / 2**30:.2f} GiB "
            f"for the {tokens:,} tokens its budget sized, {allocated / budgeted - 1:.1%} more "
            "than their budget; shown is what it allocates"
        )
    return notes


def nsa_for_budget(
    config: ModelConfig,
    doc: dict[str, Any],
    rules: SglangRules,
    options: SglangOptions,
) -> NsaCell:
    """The NSA cell; a budget from --gpu is refused where DP attention is on (SGLang sets
    dp_size = tp in some releases, or --enable-dp-attention is given): each rank then loads
    the whole attention weights, and a given --enable-dp-attention adds a reserve."""
    nsa = nsa_cell(config, doc, rules, kv_dtype=options.kv_dtype)
    forced = rules.dsa_dp_attention and options.tp > 1
    if options.memory_bytes is None and (forced or options.enable_dp_attention):
        why = "server_args sets dp_size = tp" if forced else "--enable-dp-attention is given"
        raise InputError(
            f"SGLang {rules.release}: a DeepSeek NSA model's budget from --gpu with DP "
            f"attention ({why}) is not mirrored (each rank loads the whole attention weights; "
            "a DP attention given adds its own reserve to the default fraction)",
            hint="pass --memory (profile_max_num_token's rest_memory)",
        )
    sm100 = any((options.gpu_name or "").startswith(g) for g in SM100_GPUS)
    if options.memory_bytes is None and sm100 and options.kv_dtype == "auto":
        raise InputError(
            f"SGLang {rules.release}: --kv-dtype auto on {options.gpu_name} (SM100): SGLang "
            "picks fp8_e4m3 for a DeepSeek NSA model there, which auto does not mirror",
            hint="pass --kv-dtype fp8",
        )
    return nsa
