"""nl.rand, nl.random_seed and nl.dropout (nki-0.6-additions.md §2.1-§2.3), lowered to the
random-number instructions of knit.isa (generator and lowering: docs/architecture.md "Random
numbers"). Errors report at the kernel's own line (user_location skips this package)."""
from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from . import _trace, _types as _t, isa
from ._buffers import Buffer, check_buffer, sbuf
from ._dtypes import ALL, to_dtype
from ._keywords import checked as _checked_by
from ._operators import OPS as _OPS
from ._source import user_location
from ._tensor import NkiTensor, new_tile
from .errors import user_error

if _TYPE_CHECKING:  # typing's names are not part of the module's API
    from collections.abc import Sequence

_checked = _checked_by("nl")

# Fraction bits of the float dtypes nl.rand fills: the largest value below 1 is 1 - 2^-(bits + 1).
_FRACTION_BITS = {"float32": 23, "tfloat32": 10, "float16": 10, "bfloat16": 7, "float8_e4m3": 3, "float8_e5m2": 2}


def _largest_below_one(dtype):
    return 1.0 - 2.0 ** -(_FRACTION_BITS[str(dtype)] + 1)


@_checked
def rand(shape: Sequence[int], dtype: _t.DTypeLike, buffer: Buffer = sbuf, name: str = "") -> NkiTensor:
    """A new tensor of uniform samples in [0, 1): on trn3 nisa.rand2 with max the dtype's largest
    value below 1; before trn3 nisa.rng into uint16 bits scaled by 2^-16 (16 bits of resolution)
    and kept below 1 in the dtype. Both draw from the Vector Engine generator nl.random_seed seeds."""
    loc = user_location()
    dt = to_dtype(dtype)
    if str(dt) not in _FRACTION_BITS:
        raise user_error("dtype", f"nl.rand fills a float dtype ({', '.join(_FRACTION_BITS)}), not {dt}; "
                         "for random integer bits use nisa.rng", loc)
    shape = tuple(int(s) for s in shape)
    on_chip = check_buffer(buffer, loc).on_chip
    out = new_tile(shape, dt, name, buffer if on_chip else sbuf)
    below_one = _largest_below_one(dt)
    if _trace.current().target == "trn3":
        isa.rand2(out, 0.0, below_one)
    else:
        bits = new_tile(shape, ALL["uint16"], "rand_bits")
        isa.rng(bits, engine=isa.engine.vector)
        isa.tensor_scalar(out, bits, _OPS["multiply"], 2.0 ** -16, op1=_OPS["minimum"], operand1=below_one)
    if on_chip:
        return out
    result = new_tile(shape, dt, name, buffer)
    isa.dma_copy(result, out)
    return result


@_checked
def random_seed(seed: NkiTensor) -> None:
    """Seeds the generator nl.rand and nl.dropout draw from (nisa.set_rng_seed): `seed` is a [1, 1]
    int32 or uint32 tile in SBUF or PSUM; a Python int is rejected, as in NKI."""
    loc = user_location()
    if not isinstance(seed, NkiTensor):
        raise user_error("operand", f"nl.random_seed needs a [1, 1] int32/uint32 tile in SBUF or PSUM, not a "
                         f"Python {type(seed).__name__}; e.g. nl.random_seed(nl.full((1, 1), 7, dtype=nl.uint32))", loc)
    isa.set_rng_seed(seed)


@_checked
def dropout(x: NkiTensor, rate: NkiTensor | float, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """x with each element zeroed with probability `rate` (a scalar or an (x.shape[0], 1) tile),
    kept elements unscaled (nisa.dropout), then cast to `dtype` (default x.dtype)."""
    loc = user_location()
    if not isinstance(x, NkiTensor):
        raise user_error("operand", f"nl.dropout needs a tensor, got {type(x).__name__}", loc)
    out = new_tile(x.shape, x.dtype, "dropout")
    isa.dropout(out, x, rate)
    if dtype is None or to_dtype(dtype) == x.dtype:
        return out
    cast = new_tile(x.shape, to_dtype(dtype), "dropout")
    isa.tensor_copy(cast, out)
    return cast
