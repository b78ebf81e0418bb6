"""Default tolerances per output dtype and ULP distances in the output dtype (docs/testing.md).

Rounding model (docs/architecture.md, ir/numerics.h): engines compute in fp32 and every write to
a narrower float rounds to nearest even. One such rounding moves a value by at most half an ULP,
i.e. by at most u = 2^-p of its magnitude, where p is the format's significant bits (implicit bit
included): fp32 24, fp16 11, bf16 8, fp8 e4m3 4, fp8 e5m2 3.

Defaults, chosen from how many roundings a typical kernel applies. An element passes when
|actual - expected| <= atol + rtol * |expected|, with

    atol = rtol * max|expected| + (smallest subnormal of the dtype)

  * narrow floats (bf16, fp16, fp8): rtol = 2u (= the format's machine epsilon). A kernel rounds
    the result once when it writes the output tile and commonly once more through an
    intermediate tile kept in the same dtype (the fp32 work in between is far below u of these
    formats).
  * fp32: rtol = 2^-16 = 256u. Results come from fp32 engines, whose error is dominated by
    reductions: n fp32 additions leave up to n*u (about sqrt(n)*u typically), so 256u covers
    row reductions of a few hundred elements worst case and tens of thousands typically.
  * atol scales with the result: an element that cancels to nearly zero (a dot product of
    mixed signs) still carries the rounding error of the large partial values it came from,
    which are of the size of the tensor's largest elements, so it is allowed rtol of the
    largest expected magnitude. A fixed floor (torch's 1e-5) fails a 256-deep fp32 matmul of
    unit-normal data (errors 1.6e-5 near zero) while letting softmax outputs of 1e-3 be 1% off.
  * the subnormal term: below the smallest normal a format's values are evenly spaced by its
    smallest subnormal, so a rounding there is an absolute error of up to half of it, two of
    them up to all of it. It matters for fp8 only (e4m3 2^-9, e5m2 2^-16).
  * integers and bool: exact.
Keep this table in step with KNIT_TESTING_TOLERANCES in dsl/include/knit/testing.h (a test
compares them).
"""
from typing import Any, NamedTuple

import numpy as np

from .._dtypes import to_dtype


class Tolerance(NamedTuple):
    """An element passes when |actual - expected| <= atol + rtol * |expected|."""

    rtol: float
    atol: float


# dtype name -> (significant bits p, rtol). rtol is a power of two so that it reads as "so many
# roundings" (2 * 2^-p for the narrow formats). The subnormal floor comes from ml_dtypes.finfo.
_TABLE = {
    "float32": (24, 2.0 ** -16),
    "tfloat32": (24, 2.0 ** -16),  # stored and returned as float32 words
    "float16": (11, 2.0 ** -10),
    "bfloat16": (8, 2.0 ** -7),
    "float8_e4m3": (4, 2.0 ** -3),
    "float8_e4m3fn": (4, 2.0 ** -3),
    "float8_e5m2": (3, 2.0 ** -2),
}


def tolerance(dtype: Any, scale: float = 0.0) -> Tolerance:
    """The default Tolerance(rtol, atol) for results of `dtype` whose largest expected magnitude
    is `scale`: atol = rtol * scale + the dtype's smallest subnormal. Exact for integers and bool."""
    name = str(to_dtype(dtype))
    if name in _TABLE:
        _, rtol = _TABLE[name]
        return Tolerance(rtol, rtol * float(scale) + float(finfo(name).smallest_subnormal))
    if np.dtype(to_dtype(name).numpy).kind in "biu":
        return Tolerance(0.0, 0.0)
    raise TypeError(f"knit.testing has no default tolerance for {name}; pass rtol= and atol=")


# ---- ULP distance ------------------------------------------------------------------------------

_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def _ordered(values, dtype):
    """Each value's bit pattern in `dtype` mapped to an integer that is monotonic in the value
    (sign-magnitude to two's complement), so the difference of two is their ULP distance."""
    size = np.dtype(dtype).itemsize
    bits = np.ascontiguousarray(values.astype(dtype)).view(_UINT_OF_SIZE[size]).astype(np.int64)
    sign = np.int64(1) << (8 * size - 1)
    return np.where(bits & sign, -(bits & (sign - 1)), bits)


def ulp_distance(actual: Any, expected: Any, dtype: Any) -> np.ndarray:
    """ULPs of `dtype` between `actual` and `expected` (both rounded to `dtype` first), elementwise;
    -1 where either is NaN. +0 and -0 are 0 apart; the largest finite value and inf are 1 apart."""
    dtype = np.dtype(to_dtype(dtype).numpy)
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    nan = np.isnan(actual) | np.isnan(expected)
    # float64 -> narrow formats through float32: ml_dtypes converts that way anyway, and the double
    # rounding it can cause changes a distance by at most one ULP in a rare tie.
    with np.errstate(over="ignore"):  # beyond float32's range is inf in every narrower format too
        a = _ordered(np.where(nan, 0, actual).astype(np.float32), dtype)
        e = _ordered(np.where(nan, 0, expected).astype(np.float32), dtype)
    return np.where(nan, -1, np.abs(a - e))


def round_to(values, dtype):
    """float64 `values` rounded to `dtype` (through float32, as the engines produce them) and back."""
    dtype = np.dtype(to_dtype(dtype).numpy)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values, dtype=np.float64).astype(np.float32).astype(dtype).astype(np.float64)


def finfo(dtype):
    """ml_dtypes.finfo for any float dtype Knit stores (NumPy's own and ml_dtypes' narrow ones).
    NumPy's own types take NumPy's finfo (what ml_dtypes.finfo gives for them), so a process that
    never uses a narrow type never loads ml_dtypes (knit._dtypes says why that matters)."""
    np_dtype = np.dtype(to_dtype(dtype).numpy)
    if np_dtype.type.__module__ == "numpy":
        return np.finfo(np_dtype)
    import ml_dtypes

    return ml_dtypes.finfo(np_dtype)
