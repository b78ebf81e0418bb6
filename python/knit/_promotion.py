"""The result dtype of a two-input nl.* call, in both API generations (knit.language and the legacy
facade), when no dtype= is given (the NKI docs' type promotion table):

* (float, int) -> the float; bool joins any type (bool + x -> x).
* two floats -> the one that holds every value of both, else the first of bfloat16, float16,
  float32 that does: fp16 + bf16 -> fp32, fp8_e4m3 + fp8_e5m2 -> bf16, fp8_e4m3 + fp16 -> fp16,
  and fp8_e4m3 + fp8_e4m3fn -> bf16 (one has inf, the other 448). tfloat32, a matmul input
  format, with any other float -> fp32: the fp32 result the engines compute, not rounded to
  tf32's 10 mantissa bits.
* two ints -> NumPy's rule (int8 + uint8 -> int16, int8 + uint16 -> int32), fp32 where that would
  need 64 bits (int32 + uint32 -> fp32: the hardware has no int64).
* the packed MX types (*_x4) take no part in arithmetic: an error.

A Python scalar is weak but still counts (bool -> uint8, int -> int32, float -> fp32); a NumPy
scalar keeps its type when Knit has it."""
import numbers
from typing import NamedTuple

import numpy as np

from ._dtypes import ALL, DTypeLike, dtype, to_dtype
from ._source import user_location
from .errors import user_error

_F32 = ALL["float32"]


class _Float(NamedTuple):
    """What values a float format has: the exponent of its largest finite value, the exponent of
    its smallest positive value (subnormal), its mantissa bits, and whether it has infinities."""

    max_exp: int
    min_exp: int
    mantissa: int
    inf: bool


_FLOATS = {
    "float32": _Float(127, -149, 23, True),
    "tfloat32": _Float(127, -136, 10, True),
    "bfloat16": _Float(127, -133, 7, True),
    "float16": _Float(15, -24, 10, True),
    "float8_e5m2": _Float(15, -16, 2, True),
    "float8_e4m3": _Float(7, -9, 3, True),  # IEEE-like: max 240, has inf
    "float8_e4m3fn": _Float(8, -9, 3, False),  # OCP: max 448, no inf
    "float8_e8m0fnu": _Float(127, -127, 0, False),  # MX scales: powers of two only
}
_PACKED = ("float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4")


def _holds(big: str, small: str) -> bool:
    b, s = _FLOATS[big], _FLOATS[small]
    return (b.max_exp >= s.max_exp and b.min_exp <= s.min_exp and b.mantissa >= s.mantissa
            and (b.inf or not s.inf))


def _promote_floats(a: str, b: str) -> str:
    if "tfloat32" in (a, b):
        return "float32"
    return next(c for c in (a, b, "bfloat16", "float16", "float32") if _holds(c, a) and _holds(c, b))


def promote(a: DTypeLike, b: DTypeLike) -> dtype:
    """The result dtype of an element-wise call on dtypes `a` and `b` (see the module docstring)."""
    da: dtype = to_dtype(a)
    db: dtype = to_dtype(b)
    na, nb = str(da), str(db)
    if na in _PACKED or nb in _PACKED:
        raise user_error("dtype", f"{na} and {nb}: the packed MX types ({', '.join(_PACKED)}) take no part in "
                         "element-wise arithmetic; unpack them with nisa.nc_matmul_mx, or bitcast the view to "
                         "uint32 to move their words", user_location())
    if na == nb:
        return da
    fa, fb = na in _FLOATS, nb in _FLOATS
    if fa and fb:
        return ALL[_promote_floats(na, nb)]
    if fa != fb:
        return da if fa else db
    r = np.promote_types(da.numpy, db.numpy)  # ints and bool
    return _F32 if r.itemsize > 4 else to_dtype(r)


def scalar_dtype(v: object) -> dtype:
    """A scalar operand's dtype: a NumPy scalar keeps its type when Knit has it; a Python (or
    other) scalar counts as bool -> uint8, int -> int32, float -> fp32."""
    if isinstance(v, np.generic):
        try:
            return to_dtype(v.dtype)
        except TypeError:
            pass
    if isinstance(v, (bool, np.bool_)):
        return ALL["uint8"]
    if isinstance(v, numbers.Integral):
        return ALL["int32"]
    return _F32
