"""A KV-cache quantization the checkpoint declares in its ``quantization_config``.

Two forms, read as vLLM reads them: ModelOpt (``quant_method`` ``modelopt…``) names it in
``kv_cache_quant_algo`` (``"FP8"``) or a ``kv_cache_scheme`` object (8-bit float, static);
llm-compressor checkpoints (``compressed-tensors``) carry a ``kv_cache_scheme``. Which
releases turn either into the cache dtype is a release rule (:mod:`mmcli.kv.engine.ranks`).
"""

from __future__ import annotations

from typing import Any

from mmcli.errors import InputError
from mmcli.kv.inputs.values import shown
from mmcli.kv.model import CheckpointKV


def checkpoint_kv(doc: dict[str, Any], text: dict[str, Any], where: str) -> CheckpointKV | None:
    """The checkpoint's declared KV-cache quantization, or None."""
    quant = doc.get("quantization_config", text.get("quantization_config"))
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method") or "")
    nested = quant.get("quantization")
    inner: dict[str, Any] = nested if isinstance(nested, dict) else quant
    if method.startswith("modelopt"):
        algo = (
            inner.get("kv_cache_scheme")
            or quant.get("kv_cache_scheme")
            or inner.get("kv_cache_quant_algo")
            or quant.get("kv_cache_quant_algo")
        )
        if not algo:
            return None
        if isinstance(algo, dict):
            fp8 = algo.get("dynamic") is False and algo.get("num_bits") == 8
            if fp8 and algo.get("type") == "float":
                return CheckpointKV("modelopt", "fp8", f"{method} kv_cache_scheme {shown(algo)}")
            return CheckpointKV("modelopt", None, f"{method} kv_cache_scheme {shown(algo)}")
        name = str(algo).lower()
        if name == "nvfp4":
            raise InputError(
                f"{where}: quantization_config declares an NVFP4 KV cache "
                "(kv_cache_quant_algo), which mmcli does not model",
                hint="plan it with an explicit --kv-cache-dtype to see an fp8 or bf16 figure",
            )
        dtype = "fp8" if name == "fp8" else None
        return CheckpointKV("modelopt", dtype, f"{method} kv_cache_quant_algo {shown(algo)}")
    scheme = quant.get("kv_cache_scheme")
    if scheme:
        return CheckpointKV("scheme", "fp8", f"{method or 'quantization_config'} kv_cache_scheme")
    return None
