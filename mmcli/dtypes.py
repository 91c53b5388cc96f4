"""The dtype vocabulary: every spelling mmcli accepts, its canonical name, safetensors code, size.

One table (:data:`DTYPES`) serves the dump format, the diagnosis, the bench and the KV planner;
adding a dtype means adding one row. Torch is imported only when a torch dtype is asked for,
so the header reader and ``mmcli --help`` stay torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from mmcli.errors import InputError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True, slots=True)
class DType:
    """One element type: ``name`` is torch's spelling, ``code`` the safetensors one."""

    name: str
    code: str
    bits: int
    kind: str  # "float", "int", "uint", "bool" or "complex"
    aliases: tuple[str, ...] = ()
    in_dumps: bool = True  # a dump may hold it (a torch dtype with a CPU copy kernel)

    @property
    def itemsize(self) -> int:
        """Bytes per element (sub-byte formats round up to 1)."""
        return max(1, self.bits // 8)

    def torch_dtype(self) -> torch.dtype | None:
        """The torch dtype of this name, or None where this torch has none (e.g. float4)."""
        import torch

        value = getattr(torch, self.name, None)
        return value if isinstance(value, torch.dtype) else None


#: Every element type a safetensors file may declare, with the spellings mmcli accepts.
DTYPES: Final[tuple[DType, ...]] = (
    DType("bool", "BOOL", 8, "bool"),
    DType("uint8", "U8", 8, "uint"),
    DType("int8", "I8", 8, "int"),
    DType("float8_e5m2", "F8_E5M2", 8, "float", ("fp8_e5m2",)),
    DType("float8_e4m3fn", "F8_E4M3", 8, "float", ("fp8_e4m3",)),
    DType("float8_e8m0fnu", "F8_E8M0", 8, "float", in_dumps=False),
    DType("int16", "I16", 16, "int"),
    DType("uint16", "U16", 16, "uint"),
    DType("float16", "F16", 16, "float", ("fp16", "half")),
    DType("bfloat16", "BF16", 16, "float", ("bf16",)),
    DType("int32", "I32", 32, "int"),
    DType("uint32", "U32", 32, "uint"),
    DType("float32", "F32", 32, "float", ("fp32", "float")),
    DType("int64", "I64", 64, "int"),
    DType("uint64", "U64", 64, "uint"),
    DType("float64", "F64", 64, "float", ("fp64", "double")),
    DType("complex64", "C64", 64, "complex"),
    DType("float4_e2m1", "F4", 4, "float", in_dumps=False),
    DType("float6_e2m3", "F6_E2M3", 6, "float", in_dumps=False),
    DType("float6_e3m2", "F6_E3M2", 6, "float", in_dumps=False),
)

#: Safetensors code → dtype.
BY_CODE: Final[dict[str, DType]] = {d.code: d for d in DTYPES}
_BY_SPELLING: Final[dict[str, DType]] = {s: d for d in DTYPES for s in (d.name, *d.aliases)}

#: Floating dtypes an encoder output may have (the "model dtype" of a dump).
MODEL_DTYPES: Final[tuple[str, ...]] = ("bfloat16", "float16", "float32", "float64")
#: Dtypes the bench times.
BENCH_DTYPES: Final[tuple[str, ...]] = ("bfloat16", "float16", "float32")
#: KV-cache dtypes the planner knows, by canonical name, with bytes per element.
KV_DTYPE_BYTES: Final[dict[str, int]] = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1}
_KV_FP8: Final[frozenset[str]] = frozenset({"fp8", "float8_e4m3fn", "float8_e5m2"})


def find(spelling: str) -> DType | None:
    """``bf16``, ``BFloat16``, ``torch.bfloat16`` → the bfloat16 row; None if unknown."""
    return _BY_SPELLING.get(spelling.strip().lower().removeprefix("torch."))


def dump_torch_dtype(code: str) -> torch.dtype | None:
    """The torch dtype a dump tensor of safetensors ``code`` loads as; None if it cannot."""
    found = BY_CODE.get(code)
    return found.torch_dtype() if found is not None and found.in_dumps else None


def dump_code(dtype: torch.dtype) -> str | None:
    """The safetensors code a dump writes a tensor of ``dtype`` with; None if it cannot."""
    found = find(name_of(dtype))
    return found.code if found is not None and found.in_dumps else None


def name_of(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` → ``bfloat16``."""
    return str(dtype).removeprefix("torch.")


def model_dtype(value: str) -> str:
    """A model (encoder-output) dtype spelling → its canonical name; InputError otherwise."""
    found = find(value)
    if found is None or found.name not in MODEL_DTYPES:
        raise InputError(
            f"unknown model dtype {value!r}",
            hint="use bf16, fp16 or fp32 (or bfloat16, float16, float32)",
        )
    return found.name


def torch_model_dtype(value: str | torch.dtype) -> torch.dtype:
    """``bf16``, ``bfloat16``, ``torch.bfloat16``, … → the floating torch dtype."""
    import torch

    if isinstance(value, torch.dtype):
        return value
    dtype: torch.dtype = getattr(torch, model_dtype(value))
    return dtype


def bench_dtype(text: str) -> torch.dtype:
    """``bf16|fp16|fp32`` (or the torch names) → a floating torch dtype for the bench."""
    import torch

    found = find(text)
    if found is None or found.name not in BENCH_DTYPES:
        raise InputError(f"unknown dtype {text!r}", hint="use bf16, fp16 or fp32")
    dtype: torch.dtype = getattr(torch, found.name)
    return dtype


def kv_dtype(spelling: str, *, where: str = "dtype") -> str:
    """The canonical KV dtype of a spelling (``bf16`` → ``bfloat16``, ``fp8_e5m2`` → ``fp8``)."""
    canonical = kv_dtype_or_none(spelling)
    if canonical is None:
        raise InputError(
            f"{where}: unknown dtype {spelling!r}",
            hint="use one of: float32 (fp32), float16 (fp16), bfloat16 (bf16), fp8",
        )
    return canonical


def kv_dtype_or_none(spelling: str) -> str | None:
    """:func:`kv_dtype` without the error: None for a spelling that is no KV dtype."""
    key = spelling.strip().lower()
    if key in _KV_FP8:
        return "fp8"
    found = find(key)
    if found is None:
        return None
    if found.name in _KV_FP8:
        return "fp8"
    return found.name if found.name in KV_DTYPE_BYTES else None


def kv_torch_dtype(canonical: str) -> torch.dtype:
    """The torch dtype a KV cache of this canonical dtype is allocated with (fp8: e4m3)."""
    import torch

    dtype: torch.dtype = getattr(torch, "float8_e4m3fn" if canonical == "fp8" else canonical)
    # (also "uint8": the raw bytes of a page that holds no single element type)
    return dtype
