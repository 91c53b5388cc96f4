"""SGLang's hybrid sliding-window pool: the full-attention and the SWA pool of one model.

From 0.5.8 SGLang gives the architectures of ``is_hybrid_swa_model`` (configs/model_config.py)
two pools: the full layers' and the sliding (or chunked) layers'. The profiled tokens
(``rest // cell``, capped by --max-total-tokens and floored to the page) are split so that
``swa_tokens = full_tokens × swa_full_tokens_ratio`` (0.8 by default) and both pools together
take what the profiled tokens would have taken; each is floored to the page, and the full pool's
tokens are the run's ``max_total_num_tokens``. Release rules (``SglangRules.swa_split``):
"layers" (0.5.8): ``full = int(tokens × num_hidden_layers / (r × n_swa + n_full))``;
"bytes" (0.5.9): ``full = int(tokens × (F·n_full + S·n_swa) / (F·n_full + r·S·n_swa))`` with F,
S the per-layer bytes of a token. Models on the list whose pools are not mirrored are refused
(geometry.py, ``swa_pool_unmirrored_for``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmcli.errors import InputError
from mmcli.kv.model import ModelConfig, architecture
from mmcli.kv.sglang.gemma4 import gemma4_shapes
from mmcli.kv.sglang.releases import SglangRules
from mmcli.kv.sglang.swa_lists import GEMMA4
from mmcli.kv.spec import KVCacheSpec

_GIB = 2**30
#: ``--swa-full-tokens-ratio`` default (0.5.8 server_args.py:325, 0.5.9 :339).
SWA_FULL_TOKENS_RATIO = 0.8
#: GPUs SGLang sees as SM100, where GPT-OSS's default attention backend is trtllm_mha, which
#: turns the hybrid pool off (0.5.8 server_args.py:1257 – :1282, 0.5.9 :1333 – :1358).
SM100_GPUS = ("B200", "GB200", "B300", "GB300")
#: Per-layer SWA geometry keys SGLang reads (model_config.py ``swa_head_dim``, ``swa_v_head_dim``,
#: ``get_swa_num_kv_heads``): a config that sets them is not mirrored.
_SWA_GEOMETRY_KEYS = ("swa_head_dim", "swa_v_head_dim", "swa_num_key_value_heads")


@dataclass(frozen=True)
class SwaLayout:
    """The two pools' layers and what one token takes in each layer of one rank."""

    architecture: str
    full_layers: int
    swa_layers: int
    #: Bytes one token takes in one layer: kv_heads/tp · (head_dim + v_head_dim) · dtype bytes.
    layer_token_bytes: int
    #: K (or V) bytes of one token in one layer.
    half_bytes: int
    ratio: float = SWA_FULL_TOKENS_RATIO
    #: SGLang's ``sliding_window_size`` (None: not read), the SWA pool's admission floor with
    #: the page from 0.5.16 (``SglangRules.swa_admission_floor``).
    window: int | None = None
    #: K (or V) bytes of one token in one full layer where they differ from the sliding
    #: layers' (Gemma 4, sglang/gemma4.py); None: ``half_bytes``.
    full_half_bytes: int | None = None

    @property
    def full_half(self) -> int:
        return self.half_bytes if self.full_half_bytes is None else self.full_half_bytes

    @property
    def solved(self) -> float:
        """HybridSWAPoolConfigurator's cell: ``F·n_full + r·S·n_swa`` bytes of a full token."""
        per = self.layer_token_bytes
        return 2 * self.full_half * self.full_layers + self.ratio * per * self.swa_layers

    def split(
        self, rules: SglangRules, tokens: int, page: int, rest: int, cap: int | None
    ) -> tuple[int, int]:
        """(full tokens, SWA tokens) of ``tokens`` profiled tokens (capped by ``cap`` and
        page-floored) or, from 0.5.11, of the budget ``rest``; each page-floored."""
        per = self.layer_token_bytes
        solved = self.solved
        if rules.swa_split == "layers":
            total = tokens * (self.full_layers + self.swa_layers)
            full = int(total / (self.ratio * self.swa_layers + self.full_layers))
        elif rules.swa_split == "budget":
            # HybridSWAPoolConfigurator: int(available_bytes // cell), then the user's cap.
            full = int(max(0, rest) // solved)
            full = full if cap is None else min(full, cap)
        else:
            memory = tokens * (per * self.full_layers + per * self.swa_layers)
            full = int(memory / solved)
        if rules.swa_split in ("capacity", "budget"):
            full = full // page * page
        swa = int(full * self.ratio) // page * page
        if rules.swa_admission_floor and self.window is not None and self.window + page >= swa:
            raise InputError(
                f"SGLang {rules.release}: the SWA pool ({swa} tokens) cannot hold even one "
                f"request (its floor is sliding_window_size {self.window} + page {page}); "
                "SGLang stops at start-up",
                hint="give more memory (--memory / --gpu) or a larger --max-total-tokens",
            )
        return full // page * page, swa

    def log_lines(self, full: int, swa: int, page: int, head: str) -> list[str]:
        """What SGLang prints for the two pools (mixin ``set_num_tokens_hybrid_swa``, then the
        SWA pool's and the full pool's ``KV Cache is allocated`` lines and SWAKVPool's)."""
        swa_size = (swa + page) * self.half_bytes * self.swa_layers
        full_size = (full + page) * self.full_half * self.full_layers
        usage = 2 * (swa_size + full_size) / _GIB
        return [
            f"Use sliding window memory pool. full_layer_tokens={full}, swa_layer_tokens={swa}",
            f"{head}#tokens: {swa}, K size: {swa_size / _GIB:.2f} GB, "
            f"V size: {swa_size / _GIB:.2f} GB",
            f"{head}#tokens: {full}, K size: {full_size / _GIB:.2f} GB, "
            f"V size: {full_size / _GIB:.2f} GB",
            f"SWAKVPool mem usage: {usage:.2f} GB, swa size: {swa}, full size: {full}",
        ]

    def note(self, full: int, swa: int) -> str:
        per = f"{self.layer_token_bytes:,} B"
        if self.full_half_bytes is not None:
            per = f"{2 * self.full_half:,} B full, {per} sliding"
        return (
            f"hybrid SWA pool ({self.architecture} is on SGLang's is_hybrid_swa_model list): "
            f"{self.full_layers} full layers hold {full:,} tokens, {self.swa_layers} sliding "
            f"layers {swa:,} (swa_full_tokens_ratio {self.ratio}, each pool floored to the page; "
            f"{per} per token per layer); max concurrency counts the full pool's tokens"
        )


def swa_layout(
    config: ModelConfig,
    doc: dict[str, Any],
    rules: SglangRules,
    *,
    tp: int,
    dtype_bytes: int,
    gpu_name: str,
) -> tuple[SwaLayout | None, str | None]:
    """The hybrid pool's layout when ``rules`` gives this model one, and a note when the pool
    depends on the GPU (None, None: every layer keeps every token)."""
    arch = architecture(doc)
    nested = doc.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else doc
    if arch not in rules.hybrid_swa_archs:
        if rules.swa_config_opt_in and text.get("is_hybrid_swa"):
            raise InputError(
                f"SGLang {rules.release}: the config's is_hybrid_swa puts {arch} on "
                "is_hybrid_swa_model's list; its pools are not mirrored",
                hint="plan it for vLLM (--engine vllm)",
            )
        return None, None
    if arch == GEMMA4:
        g = gemma4_shapes(text, rules, tp=tp, dtype_bytes=dtype_bytes)
        half, full = g.swa_half, g.full_half
        shapes = (g.full_layers, g.swa_layers, 2 * half, half)
        return SwaLayout(arch, *shapes, window=g.window, full_half_bytes=full), None
    if any(key in text for key in _SWA_GEOMETRY_KEYS):
        raise InputError(
            f"SGLang {rules.release}: a separate sliding-layer geometry (swa_head_dim / "
            "swa_num_key_value_heads) is not mirrored",
            hint="plan it for vLLM (--engine vllm)",
        )
    specs = [layer.spec for layer in config.layers if isinstance(layer.spec, KVCacheSpec)]
    swa = sum(1 for s in specs if s.attention in ("sliding", "chunked"))
    if arch.startswith("Llama4"):
        # model_config.py get_hybrid_layer_ids: layer i is chunked unless (i + 1) % 4 == 0.
        expected = sum(1 for i in range(len(specs)) if (i + 1) % 4 != 0)
        if swa != expected:
            raise InputError(
                f"SGLang {rules.release}: Llama 4's pools take every 4th layer as full; this "
                f"config has {swa} chunked layers of {len(specs)}, which is not mirrored",
                hint="plan it for vLLM (--engine vllm)",
            )
    spec = specs[0]
    heads = max(1, spec.num_kv_heads // tp)
    half = heads * spec.head_size * dtype_bytes
    layout = SwaLayout(arch, len(specs) - swa, swa, 2 * half, half, window=_window(arch, text))
    if not arch.startswith("GptOss") or not rules.gpt_oss_sm100_swa_off:
        return layout, None
    return _gpt_oss_backend(layout, gpu_name)


def _window(arch: str, text: dict[str, Any]) -> int | None:
    """SGLang's ``sliding_window_size`` (load_model_utils.py ``resolve_sliding_window_size``):
    GPT-OSS's model gives ``sliding_window - 1`` (models/gpt_oss.py), Llama 4's the config's
    sliding_window_size / sliding_window / window_size, else its attention_chunk_size."""
    if arch.startswith("GptOss"):
        value = text.get("sliding_window")
        return value - 1 if isinstance(value, int) else None
    for key in ("sliding_window_size", "sliding_window", "window_size", "attention_chunk_size"):
        if isinstance(text.get(key), int):
            return int(text[key])
    return None


def _gpt_oss_backend(layout: SwaLayout, gpu_name: str) -> tuple[SwaLayout | None, str]:
    """GPT-OSS's pool depends on the attention backend SGLang picks for the GPU (up to 0.5.9:
    trtllm_mha, SM100's default, turns it off)."""
    name = gpu_name.upper()
    if any(name.startswith(g) for g in SM100_GPUS):
        return None, (
            f"on {gpu_name} (SM100) SGLang picks the trtllm_mha attention backend for GPT-OSS, "
            "which turns the hybrid SWA pool off (server_args): every layer keeps every token"
        )
    if gpu_name:
        return layout, f"GPT-OSS on {gpu_name}: fa3 / triton attention, hybrid SWA pool on"
    return layout, (
        "GPT-OSS: the hybrid SWA pool assumes a GPU before SM100 (fa3 / triton attention); on "
        "B200 / B300 SGLang's default trtllm_mha backend turns it off and every layer keeps "
        "every token (pass --gpu to plan that)"
    )
