"""Tolerance profiles: how close CAND must be to REF, by profile and by the lower precision.

Each profile's figures come from a published test suite (see ``docs/compare.md``):

* ``same-kernel``: ``torch.testing.assert_close``'s defaults per dtype (``_DTYPE_PRECISIONS`` in
  ``torch/testing/_comparison.py``, torch 2.13): elementwise ``|c - r| <= atol + rtol * |r|``.
* ``kernel``: transformers' eager-vs-SDPA attention tolerances
  (``_test_eager_matches_sdpa_inference`` in ``tests/test_modeling_common.py``, the ``atols`` and
  ``rtols`` tables, v5): elementwise as above.
* ``port`` (two engines): cosine similarities, the measure vLLM's own model tests use
  (``check_embeddings_close`` in ``tests/models/utils.py`` requires ``>= 1 - 1e-3``): item
  cosine >= 0.999, and every row >= 0.99 (bf16, fp16) or >= 0.999 (fp32, fp64); and the
  relative RMSE at most √(2(1 − 0.999)) ≈ 0.0447, what that cosine allows at equal norms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from mmcli.errors import InputError

Profile = Literal["same-kernel", "kernel", "port"]
PROFILES: Final[tuple[Profile, ...]] = ("same-kernel", "kernel", "port")

#: dtype → (rtol, atol): torch.testing.assert_close's defaults.
SAME_KERNEL: Final[dict[str, tuple[float, float]]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}
#: dtype → (rtol, atol): transformers' attention-implementation tests (fp64 is not in them:
#: fp32's figures, the tightest they use).
KERNEL: Final[dict[str, tuple[float, float]]] = {
    "float16": (5e-3, 5e-3),
    "bfloat16": (1e-2, 1e-2),
    "float32": (1e-4, 1e-6),
    "float64": (1e-4, 1e-6),
}
#: dtype → the least row cosine under ``port``; the item cosine must be >= PORT_ITEM_COSINE.
PORT_ROW_COSINE: Final[dict[str, float]] = {
    "float16": 0.99,
    "bfloat16": 0.99,
    "float32": 0.999,
    "float64": 0.999,
}
#: vLLM's check_embeddings_close: cosine >= 1 - 1e-3.
PORT_ITEM_COSINE: Final = 1 - 1e-3

#: Floating dtypes by precision (mantissa bits), lowest first: the side a tolerance comes from.
_PRECISION: Final[dict[str, int]] = {
    "float8_e5m2": 2,
    "float8_e4m3fn": 3,
    "bfloat16": 7,
    "float16": 10,
    "float32": 23,
    "float64": 52,
}


@dataclass(frozen=True)
class Tolerance:
    """What an item pair must meet: elementwise bounds and/or cosine floors (None: not judged).

    ``dtype`` is the lower-precision side's, the one the figures were taken for."""

    profile: Profile
    dtype: str
    rtol: float | None = None
    atol: float | None = None
    min_row_cosine: float | None = None
    min_item_cosine: float | None = None
    #: ``port``: ``‖c − r‖ / ‖r‖`` at most √(2(1 − min item cosine)), the distance the cosine
    #: floor allows between vectors of equal norm, so that a rescale (which keeps every cosine
    #: at 1) cannot pass.
    max_rel_rmse: float | None = None

    @property
    def elementwise(self) -> bool:
        """Whether each element is judged (``|c - r| <= atol + rtol * |r|``)."""
        return self.rtol is not None and self.atol is not None

    def to_json(self) -> dict[str, Any]:
        """The figures applied, by name."""
        return {
            "profile": self.profile,
            "dtype": self.dtype,
            "rtol": self.rtol,
            "atol": self.atol,
            "min_row_cosine": self.min_row_cosine,
            "min_item_cosine": self.min_item_cosine,
            "max_rel_rmse": self.max_rel_rmse,
        }


def lower_precision(a: str, b: str) -> str:
    """The dtype of lower precision of two floating dtype names (``a`` on a tie)."""
    return a if _PRECISION.get(a, 0) <= _PRECISION.get(b, 0) else b


def is_float(dtype: str) -> bool:
    """Whether ``dtype`` is a floating dtype compare can judge."""
    return dtype in _PRECISION


@dataclass(frozen=True)
class Overrides:
    """``--rtol``, ``--atol``, ``--min-cosine``: replace the profile's figures where given."""

    rtol: float | None = None
    atol: float | None = None
    min_cosine: float | None = None

    def check(self) -> None:
        """Refuse values no comparison can mean."""
        for name, value in (("--rtol", self.rtol), ("--atol", self.atol)):
            if value is not None and not value >= 0:
                raise InputError(
                    f"{name} {value} is negative or not a number",
                    hint=f"give {name} as a number >= 0",
                )
        if self.min_cosine is not None and not -1 <= self.min_cosine <= 1:
            raise InputError(
                f"--min-cosine {self.min_cosine} is outside [-1, 1]",
                hint="a cosine similarity lies in [-1, 1]; e.g. --min-cosine 0.99",
            )


def tolerance(profile: Profile, ref_dtype: str, cand_dtype: str, over: Overrides) -> Tolerance:
    """The tolerance for one item pair: ``profile``'s figures for the lower-precision dtype of
    the two, with the overrides applied. A dtype the profile has no figures for (float8) is
    refused unless the overrides give every figure the profile judges by."""
    dtype = lower_precision(ref_dtype, cand_dtype)
    if profile == "port":
        row = PORT_ROW_COSINE.get(dtype)
        tol = Tolerance(profile, dtype, min_row_cosine=row, min_item_cosine=PORT_ITEM_COSINE)
        if over.min_cosine is not None:
            tol = replace(tol, min_row_cosine=over.min_cosine, min_item_cosine=over.min_cosine)
        floor = tol.min_item_cosine if tol.min_item_cosine is not None else 1.0
        tol = replace(tol, max_rel_rmse=math.sqrt(2 * max(0.0, 1 - floor)))
        if over.rtol is not None or over.atol is not None:
            tol = replace(tol, rtol=over.rtol or 0.0, atol=over.atol or 0.0)
        missing = tol.min_row_cosine is None
    else:
        table = SAME_KERNEL if profile == "same-kernel" else KERNEL
        rtol, atol = table.get(dtype, (None, None))
        tol = Tolerance(
            profile,
            dtype,
            rtol=over.rtol if over.rtol is not None else rtol,
            atol=over.atol if over.atol is not None else atol,
        )
        if over.min_cosine is not None:
            tol = replace(tol, min_row_cosine=over.min_cosine, min_item_cosine=over.min_cosine)
        missing = not tol.elementwise
    if missing:
        need = "--min-cosine" if profile == "port" else "--rtol and --atol"
        raise InputError(
            f"profile {profile} has no tolerance for {dtype} (the lower precision of "
            f"{ref_dtype} and {cand_dtype})",
            hint=f"give {need} for this pair",
        )
    return tol
