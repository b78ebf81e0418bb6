"""The result dtype of a two-input nl.* call (and of a G1 result-returning call) when no dtype=
is given: one rule for both API generations (nki-api.md §4.5, NKI's "type promotion" table)."""
import numbers

import numpy as np

from ._dtypes import ALL, dtype, to_dtype

_F32 = ALL["float32"]
_FLOAT_BITS = {"float8_e4m3": (4, 3), "float8_e4m3fn": (4, 3), "float8_e5m2": (5, 2), "bfloat16": (8, 7),
               "float16": (5, 10), "tfloat32": (8, 10), "float32": (8, 23)}


def _holds(big, small):
    (be, bm), (se, sm) = _FLOAT_BITS[big], _FLOAT_BITS[small]
    return be >= se and bm >= sm


def promote(a, b) -> dtype:
    """(float, int) -> the float; two floats -> the one holding both, else the first of bf16,
    fp16, fp32 that does (fp16+bf16 -> fp32, e4m3+e5m2 -> bf16); two ints -> NumPy's rule, with
    fp32 where that needs 64 bits (int32+uint32 -> fp32)."""
    a, b = to_dtype(a), to_dtype(b)
    na, nb = str(a), str(b)
    if na == nb:
        return a
    fa, fb = na in _FLOAT_BITS, nb in _FLOAT_BITS
    if fa != fb:
        return a if fa else b
    if fa:
        if "tfloat32" in (na, nb):
            return _F32
        for c in (na, nb, "bfloat16", "float16", "float32"):
            if _holds(c, na) and _holds(c, nb):
                return ALL[c]
    r = np.promote_types(a.numpy, b.numpy)
    return _F32 if r.itemsize > 4 else to_dtype(r)


def scalar_dtype(v) -> dtype:
    """A weak Python scalar counts as bool -> uint8, int -> int32, float -> fp32; a NumPy scalar
    keeps its type when Knit has it."""
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
