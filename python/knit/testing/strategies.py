"""Hypothesis strategies for tile shapes and tiles that respect the on-chip limits.

An SBUF / PSUM tile has the partition dim first, at most nl.tile_size.pmax (128). A PSUM tile a
matmul accumulates into must fit one bank: 2 KiB per partition (nl.tile_size.psum_bank_fmax_bytes),
i.e. 512 fp32 elements. Needs the hypothesis package (pip install hypothesis).
"""
import numpy as np
from hypothesis import strategies as st

from .. import language as nl
from .._dtypes import to_dtype
from .inputs import as_dtype

PSUM_BANK_BYTES = nl.tile_size.psum_bank_fmax_bytes  # the C++ core's limit (knit._core.tile_size())


def _free_limit(dtype, buffer, max_free):
    if buffer == "psum":
        return min(max_free, PSUM_BANK_BYTES // to_dtype(dtype).itemsize)
    if buffer != "sbuf":
        raise ValueError(f"buffer must be 'sbuf' or 'psum', not {buffer!r}")
    return max_free


def tile_shapes(dtype="float32", buffer="sbuf", max_partitions=nl.tile_size.pmax, max_free=2048, free_dims=1):
    """(partitions, free...) shapes of one on-chip tile of `dtype`: 1 to min(max_partitions, 128)
    partitions and `free_dims` free dims whose product stays within max_free elements and, for
    buffer="psum", within one 2 KiB bank per partition (512 fp32, 1024 bf16)."""
    max_partitions = min(max_partitions, nl.tile_size.pmax)
    limit = _free_limit(dtype, buffer, max_free)
    if max_partitions < 1 or limit < 1 or free_dims < 1:
        raise ValueError(f"no {buffer} tile of {to_dtype(dtype)} has at most {max_partitions} partitions, "
                         f"{free_dims} free dims and {limit} elements per partition")

    @st.composite
    def shapes(draw):
        partitions = draw(st.integers(1, max_partitions))
        free, left = [], limit
        for _ in range(free_dims):
            size = draw(st.integers(1, left))
            free.append(size)
            left //= size
        return (partitions, *free)

    return shapes()


def matmul_shapes(dtype="bfloat16", max_k=nl.tile_size.pmax, max_m=nl.tile_size.pmax,
                  max_n=nl.tile_size.psum_bank_fmax):
    """(K, M, N) of one nc_matmul: K (contraction, the partition dim of both operands) and M (the
    stationary operand's free size) at most 128; N (the moving free size) within one fp32 PSUM
    bank (512). `dtype` is the operands' dtype, carried for symmetry with tiles()."""
    to_dtype(dtype)  # an unknown dtype fails here, not in the test
    max_n = min(max_n, PSUM_BANK_BYTES // 4)
    return st.tuples(st.integers(1, min(max_k, nl.tile_size.pmax)),
                     st.integers(1, min(max_m, nl.tile_size.pmax)), st.integers(1, max_n))


def tiles(dtype="float32", shapes=None, min_value=-4.0, max_value=4.0):
    """Arrays of `dtype` whose shape is drawn from `shapes` (default: tile_shapes(dtype)) and
    whose values are finite floats in [min_value, max_value], rounded to `dtype`."""
    shapes = shapes if shapes is not None else tile_shapes(dtype, max_free=512)

    @st.composite
    def arrays(draw):
        shape = draw(shapes)
        seed = draw(st.integers(0, 2 ** 32 - 1))
        values = np.random.default_rng(seed).uniform(min_value, max_value, shape)
        return as_dtype(values, dtype)

    return arrays()
