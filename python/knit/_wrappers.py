"""nl.* convenience wrappers (nki-api.md §2.4-§2.6, G2/G3 signatures). Each one allocates its
result with nl.ndarray (SBUF; PSUM for matmul) and lowers to knit.isa instructions; every Knit
call made from here reports errors at the kernel's own line (user_location skips this package).

Element-wise calls (``FUNCTIONS``) become the functions of knit.language's operator objects:
``nl.add(x, y)``, ``nl.exp(x)`` and ``op=nl.add`` are the same object. ``nl.sum`` / ``nl.max`` / ``nl.min`` are
reductions; ``nl.maximum`` / ``nl.minimum`` are the element-wise operators.

``nl.rand``, ``nl.random_seed`` and ``nl.dropout`` live in knit/_random.py. Not provided:
``prelu`` / ``bypass`` / ``average`` as calls (operator-only objects, nki-api.md §2.12).
"""
from __future__ import annotations

import builtins
import math
from typing import TYPE_CHECKING as _TYPE_CHECKING

import numpy as np

from . import _types as _t, isa
from ._buffers import psum, sbuf
from ._dtypes import ALL, to_dtype
from ._keywords import checked as _checked_by
from ._operators import BINARY as _BINARY, OPERATOR_ONLY as _OPERATOR_ONLY, OPS as _OPS
from ._promotion import promote as _promote
from ._source import user_location
from ._tensor import (
    NkiTensor,
    binary as _binary,
    dtype_of as _dtype_of,
    is_column as _is_column,
    new_tile,
    scalar_unary,
)
from .errors import user_error

if _TYPE_CHECKING:  # typing's names are not part of the module's API
    from collections.abc import Sequence

__all__ = [
    "load", "store", "load_transpose2d", "matmul", "transpose", "broadcast_to", "expand_dims",
    "gather_flattened", "where", "softmax", "rms_norm",
    "sum", "max", "min", "mean", "prod", "all", "var",
    "negative", "logical_not", "cos", "tan", "ceil", "floor", "trunc",
]

_checked = _checked_by("nl")  # unknown keyword arguments are errors (knit/_keywords.py)
_F32 = ALL["float32"]

# ---- helpers -----------------------------------------------------------------------------------


def _tile(shape, dtype, name, buffer=sbuf):
    """A new (uninitialized) tile, SBUF unless `buffer` says otherwise."""
    return new_tile(shape, dtype, name, buffer)


def _dt(dtype, default):
    return default if dtype is None else to_dtype(dtype)


def _need_tensor(x, what, loc):
    if not isinstance(x, NkiTensor):
        raise user_error("operand", f"nl.{what} needs a tensor, got {type(x).__name__}", loc)
    return x


def _expand(t, shape):
    """View of t with its size-1 free dims broadcast (stride 0) to `shape` (same rank)."""
    for d in range(1, t.ndim):
        if t.shape[d] == 1 and shape[d] != 1:
            t = t.broadcast(d, shape[d])
    return t


def _fit(v, shape, what, loc):
    """A tile of `shape`, or a [P, 1] column broadcast to it as a view."""
    if v.shape == tuple(shape):
        return v
    if _is_column(v, shape[0]):
        if v.ndim != len(shape):
            v = v.reshape((shape[0],) + (1,) * (len(shape) - 1))
        return _expand(v, shape)
    raise user_error("broadcast", f"{what} has shape {v.shape}, which is neither {tuple(shape)} nor a "
                     f"[{shape[0]}, 1] column", loc)


# ---- element-wise -------------------------------------------------------------------------------


def _make_binary(op):
    def fn(x: NkiTensor | float, y: NkiTensor | float, dtype: _t.DTypeLike | None = None) -> NkiTensor:
        return _binary(op, x, y, dtype)

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"nl.{op.name}(x, y, dtype=None): element-wise, NKI dtype promotion unless dtype= is given."
    return _checked(fn)


def _unary(name, x, dtype, emit):
    """Allocates the result (x's dtype unless dtype=) and lets `emit(out, x)` write it."""
    _need_tensor(x, name, user_location())
    out = _tile(x.shape, _dt(dtype, x.dtype), name)
    emit(out, x)
    return out


def _make_activation(op):
    def fn(x: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
        return _unary(op.name, x, dtype, lambda out, x: isa.activation(out, op, x))

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"nl.{op.name}(x, dtype=None): the {op.name} activation function (Scalar Engine)."
    return _checked(fn)


@_checked
def negative(x: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    return scalar_unary("negative", x, "multiply", -1.0, dtype)


@_checked
def logical_not(x: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """1 where x == 0, else 0 (logical xor with 1)."""
    return _unary("logical_not", x, dtype, lambda out, x: isa.tensor_scalar(out, x, _OPS["logical_xor"], 1.0))


@_checked
def _invert(x: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """Bitwise NOT of an integer tile."""
    return scalar_unary("invert", x, "invert", None, dtype)


@_checked
def _reciprocal(x: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """1 / x on the Vector Engine (more accurate than the activation table)."""
    return _unary("reciprocal", x, dtype, isa.reciprocal)


@_checked
def _rsqrt(x: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """1 / sqrt(x) on GpSimd (NKI 0.5 moved nl.rsqrt there from the ScalarE table, for accuracy).
    GpSimd cannot read PSUM, so a PSUM input is an error, as in NKI 0.5+."""
    loc = user_location()
    _need_tensor(x, "rsqrt", loc)
    if x.buffer is psum:
        raise user_error("buffer", "nl.rsqrt runs on GpSimd (NKI 0.5+), which cannot read PSUM; copy the tile to "
                         "SBUF first (nl.copy), or use nisa.activation(op=nl.rsqrt) on the Scalar Engine", loc)
    return _unary("rsqrt", x, dtype, lambda out, x: isa.tensor_scalar(out, x, _OPS["rsqrt"], None,
                                                                      engine=isa.engine.gpsimd))


_HALF_PI_HI = float(np.float32(math.pi / 2))  # pi/2 = _HALF_PI_HI + _HALF_PI_LO
_HALF_PI_LO = math.pi / 2 - _HALF_PI_HI


def _emit_cos(out, x):
    """cos(x) = sin(pi/2 - |x|), with pi/2 split in two fp32 parts so the argument is accurate
    near the zeros at |x| = pi/2 (hi - |x| is exact there). Accurate for |x| <= pi."""
    arg = _tile(x.shape, _F32, "cos_arg")
    isa.tensor_scalar(arg, x, _OPS["abs"], None, op1=_OPS["subtract"], operand1=_HALF_PI_HI, reverse1=True)
    isa.tensor_scalar(arg, arg, _OPS["add"], _HALF_PI_LO)
    isa.activation(out, _OPS["sin"], arg)


@_checked
def cos(x: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    return _unary("cos", x, dtype, _emit_cos)


@_checked
def tan(x: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """tan(x) = sin(x) / cos(x), in fp32."""
    def emit(out, x):
        s, c = _tile(x.shape, _F32, "tan_sin"), _tile(x.shape, _F32, "tan_cos")
        isa.activation(s, _OPS["sin"], x)
        _emit_cos(c, x)
        isa.tensor_tensor(out, s, c, _OPS["divide"])
    return _unary("tan", x, dtype, emit)


def _round_with(name, mod_op, divisor):
    """x - (x mod_op divisor) in one scalar_tensor_tensor; exact in fp32."""
    def fn(x: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
        return _unary(name, x, dtype, lambda out, x: isa.scalar_tensor_tensor(
            out, x, _OPS[mod_op], divisor, _OPS["subtract"], x, reverse1=True))

    fn.__name__ = fn.__qualname__ = name
    return _checked(fn)


trunc = _round_with("trunc", "fmod", 1.0)  # fmod keeps x's sign: x - frac(x)
floor = _round_with("floor", "mod", 1.0)  # Python mod by 1 is in [0, 1)
ceil = _round_with("ceil", "mod", -1.0)  # Python mod by -1 is in (-1, 0]

# ---- data movement ------------------------------------------------------------------------------


@_checked
def load(src: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """HBM view -> new SBUF tile (dim 0 becomes the partition dim), converting to dtype if given."""
    loc = user_location()
    _need_tensor(src, "load", loc)
    if src.buffer.on_chip:
        raise user_error("buffer", f"nl.load reads HBM, but src is in {src.buffer.name}; use nl.copy for "
                         "on-chip tiles", loc)
    out = _tile(src.shape, _dt(dtype, src.dtype), "load")
    isa.dma_copy(out, src)
    return out


@_checked
def store(dst: NkiTensor, value: NkiTensor) -> None:
    """SBUF (or PSUM, through an SBUF copy) tile -> HBM view."""
    loc = user_location()
    _need_tensor(dst, "store", loc)
    _need_tensor(value, "store", loc)
    if dst.buffer.on_chip:
        raise user_error("buffer", f"nl.store writes HBM, but dst is in {dst.buffer.name}; use nl.copy or "
                         "nisa.tensor_copy between on-chip tiles", loc)
    if value.buffer is psum:
        value = _copy(value)
    isa.dma_copy(dst, value)


@_checked
def _copy(x: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """New SBUF tile with x's values (bit-exact when the dtype is unchanged)."""
    return _unary("copy", x, dtype, isa.tensor_copy)


@_checked
def transpose(x: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """2-D [P, F] -> [F, P] (F <= 128) on the Tensor Engine, through PSUM, into SBUF."""
    loc = user_location()
    _need_tensor(x, "transpose", loc)
    if x.ndim != 2:
        raise user_error("transpose-shape", f"nl.transpose needs a 2-D tile, got shape {x.shape}", loc)
    if x.buffer is psum:
        x = _copy(x)
    p, f = x.shape
    staged = _tile((f, p), x.dtype, "transpose_psum", buffer=psum)
    isa.nc_transpose(staged, x)
    out = _tile((f, p), _dt(dtype, x.dtype), "transpose")
    isa.tensor_copy(out, staged)
    return out


@_checked
def load_transpose2d(src: NkiTensor, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """HBM [K, M] -> SBUF [M, K]: dma_transpose for 2-byte dtypes, else load + transpose."""
    loc = user_location()
    _need_tensor(src, "load_transpose2d", loc)
    if src.buffer.on_chip or src.ndim != 2:
        raise user_error("operand", f"nl.load_transpose2d needs a 2-D HBM tensor, got {src!r}", loc)
    if src.itemsize != 2:
        return transpose(load(src), dtype)
    out = _tile(src.shape[::-1], src.dtype, "load_transpose2d")
    isa.dma_transpose(out, src)
    return out if dtype is None or to_dtype(dtype) == src.dtype else _copy(out, dtype)


@_checked
def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False) -> NkiTensor:
    """x @ y (x.T @ y when transpose_x) into a new fp32 PSUM tile [M, N]. Without transpose_x, x
    [M, K] is first transposed to [K, M] on the Tensor Engine."""
    loc = user_location()
    _need_tensor(x, "matmul", loc)
    _need_tensor(y, "matmul", loc)
    if not transpose_x:
        x = transpose(x)
    out = _tile((math.prod(x.shape[1:]), math.prod(y.shape[1:])), _F32, "matmul", buffer=psum)
    isa.nc_matmul(out, x, y)
    return out


@_checked
def broadcast_to(x: NkiTensor, shape: Sequence[int], dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """Same rank; size-1 dims expand. Free dims (and any dim of an HBM tensor) become a stride-0
    view, so no data moves; an on-chip [1, ...] tile is copied to every partition with one DMA
    from a stride-0 source into a new SBUF tile. With dtype= the result is a converted copy."""
    loc = user_location()
    _need_tensor(x, "broadcast_to", loc)
    shape = tuple(int(s) for s in shape)
    if len(shape) != x.ndim or builtins.any(a != b and a != 1 for a, b in zip(x.shape, shape)):
        raise user_error("broadcast", f"nl.broadcast_to: cannot broadcast shape {x.shape} to {shape}; the rank "
                         "must match and each dim must be equal or 1", loc)
    if shape[0] != x.shape[0] and x.buffer.on_chip:
        src = _copy(x) if x.buffer is psum else x
        src = src.expand_dim(1).broadcast(1, shape[0])  # [1, P, free...]: partition p reads row 0
        for d in range(1, x.ndim):
            if x.shape[d] != shape[d]:
                src = src.broadcast(d + 1, shape[d])
        out = _tile(shape, _dt(dtype, x.dtype), "broadcast_to")
        isa.dma_copy(out, src)
        return out
    view = _expand(x, shape)
    if shape[0] != x.shape[0]:
        view = view.broadcast(0, shape[0])
    if dtype is None or to_dtype(dtype) == x.dtype:
        return view
    return _copy(view, dtype) if x.buffer.on_chip else load(view, dtype)


@_checked
def expand_dims(x: NkiTensor, axis: int | Sequence[int]) -> NkiTensor:
    """View with size-1 dims inserted at `axis` (an int or a sequence, positions in the result)."""
    loc = user_location()
    _need_tensor(x, "expand_dims", loc)
    axes: list = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    ndim = x.ndim + len(axes)
    for a in sorted(int(a) + ndim if int(a) < 0 else int(a) for a in axes):
        x = x.expand_dim(a)
    return x


@_checked
def gather_flattened(data: NkiTensor, indices: NkiTensor, axis: int = 0,
                     dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """out[p, j] = data[p, indices[p, j]] over data's flattened free dims (uint32 indices)."""
    loc = user_location()
    _need_tensor(data, "gather_flattened", loc)
    _need_tensor(indices, "gather_flattened", loc)
    if axis not in (0, -1, 1) or (axis != 0 and data.ndim != 2):
        raise user_error("unsupported", "nl.gather_flattened gathers over the flattened free dims (axis=0)", loc)
    out = _tile(indices.shape, data.dtype, "gather_flattened")
    isa.nc_n_gather(out, data, indices)
    return out if dtype is None or to_dtype(dtype) == data.dtype else _copy(out, dtype)


@_checked
def where(condition: NkiTensor, x: NkiTensor | float, y: NkiTensor | float,
          dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """x where condition (a 1.0/0.0 tile) is non-zero, else y; x and y are tiles of condition's
    shape, [P, 1] columns or numbers. y is copied in, then x is copied over it under the predicate."""
    loc = user_location()
    _need_tensor(condition, "where", loc)
    shape = condition.shape
    out = _tile(shape, _dt(dtype, _promote(_dtype_of(x), _dtype_of(y))), "where")
    if isinstance(y, NkiTensor):
        isa.tensor_copy(out, _fit(y, shape, "nl.where: y", loc))
    else:
        isa.memset(out, y)
    src = _fit(x, shape, "nl.where: x", loc) if isinstance(x, NkiTensor) else float(x)
    isa.tensor_copy_predicated(out, src, condition)
    return out


# ---- reductions (trailing free axes) ----------------------------------------------------------


def _reduce_axes(x, axis, what, loc):
    _need_tensor(x, what, loc)
    axes = set()
    for a in (axis if isinstance(axis, (tuple, list)) else [axis]):
        n = int(a) + x.ndim if int(a) < 0 else int(a)
        if n == 0:
            raise user_error("reduce-axis", f"nl.{what}: axis 0 is the partition dim and cannot be reduced on-chip; "
                             "reduce trailing free dims (transpose first, or use nisa.tensor_partition_reduce)", loc)
        if not 1 <= n < x.ndim:
            raise user_error("reduce-axis", f"nl.{what}: axis {a} is out of range for a tile of shape {x.shape}", loc)
        axes.add(n)
    return sorted(axes)


def _reduced_shape(x, axes, keepdims):
    """keepdims: reduced dims become 1. Otherwise they are dropped, but an on-chip result keeps
    at least 2 dims (a trailing 1, like integer indexing)."""
    if keepdims:
        return tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    shape = tuple(s for d, s in enumerate(x.shape) if d not in axes)
    return shape if len(shape) >= 2 else shape + (1,)


def _count(x, axes):
    return math.prod(x.shape[d] for d in axes)


def _reduce(opname, x, axis, dtype, keepdims, what, negate=False):
    loc = user_location()
    axes = _reduce_axes(x, axis, what, loc)
    out = _tile(_reduced_shape(x, axes, keepdims), _dt(dtype, x.dtype), what)
    isa.tensor_reduce(out, _OPS[opname], x, axes, negate=negate, keepdims=keepdims)
    return out


@_checked
def sum(x: NkiTensor, axis: _t.AxisLike, dtype: _t.DTypeLike | None = None, keepdims: bool = False) -> NkiTensor:
    return _reduce("add", x, axis, dtype, keepdims, "sum")


@_checked
def max(x: NkiTensor, axis: _t.AxisLike, dtype: _t.DTypeLike | None = None, keepdims: bool = False) -> NkiTensor:
    return _reduce("maximum", x, axis, dtype, keepdims, "max")


@_checked
def min(x: NkiTensor, axis: _t.AxisLike, dtype: _t.DTypeLike | None = None, keepdims: bool = False) -> NkiTensor:
    return _reduce("minimum", x, axis, dtype, keepdims, "min")


@_checked
def prod(x: NkiTensor, axis: _t.AxisLike, dtype: _t.DTypeLike | None = None, keepdims: bool = False) -> NkiTensor:
    return _reduce("multiply", x, axis, dtype, keepdims, "prod")


@_checked
def all(x: NkiTensor, axis: _t.AxisLike, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """1 where every reduced element is non-zero, else 0."""
    loc = user_location()
    axes = _reduce_axes(x, axis, "all", loc)
    if _count(x, axes) == 1:  # a one-element fold returns the element itself
        x = _binary(_OPS["not_equal"], x, 0, x.dtype)
    return _reduce("logical_and", x, axes, dtype, False, "all")


@_checked
def mean(x: NkiTensor, axis: _t.AxisLike, dtype: _t.DTypeLike | None = None, keepdims: bool = False) -> NkiTensor:
    """fp32 sum, then multiplied by 1/n (two fp32 roundings) into x's dtype or dtype."""
    loc = user_location()
    axes = _reduce_axes(x, axis, "mean", loc)
    s = _reduce("add", x, axes, _F32, keepdims, "mean_sum")
    out = _tile(s.shape, _dt(dtype, x.dtype), "mean")
    isa.tensor_scalar(out, s, _OPS["multiply"], 1.0 / _count(x, axes))
    return out


@_checked
def var(x: NkiTensor, axis: _t.AxisLike, dtype: _t.DTypeLike | None = None, keepdims: bool = False) -> NkiTensor:
    """Population variance mean(x^2) - mean(x)^2 in fp32. As in NKI G2, keepdims is ignored and
    the reduced dims are kept (size 1)."""
    loc = user_location()
    axes = _reduce_axes(x, axis, "var", loc)
    inv_n = 1.0 / _count(x, axes)
    s = _reduce("add", x, axes, _F32, True, "var_sum")
    sq = _tile(x.shape, _F32, "var_sq")
    isa.tensor_tensor(sq, x, x, _OPS["multiply"])
    s2 = _reduce("add", sq, axes, _F32, True, "var_sumsq")
    m = _tile(s.shape, _F32, "var_mean")
    isa.tensor_scalar(m, s, _OPS["multiply"], inv_n)
    isa.tensor_tensor(m, m, m, _OPS["multiply"])
    out = _tile(s.shape, _dt(dtype, x.dtype), "var")
    isa.scalar_tensor_tensor(out, s2, _OPS["multiply"], inv_n, _OPS["subtract"], m)  # s2/n - mean^2
    return out


# ---- composite wrappers ----------------------------------------------------------------------


@_checked
def softmax(x: NkiTensor, axis: _t.AxisLike = -1, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """exp(x - max) / sum(exp(x - max)) over trailing free axes, in fp32 (the result in x's dtype or
    dtype); the one lowering of both API generations. Over all free dims (one max per partition,
    a [P, 1] column): the negated max (tensor_reduce), exp with it as bias and the row sums in one
    activation_reduce, reciprocal, multiply. Over some free dims only, the negated max is added by
    a broadcast tensor_tensor and the exps are summed by a second tensor_reduce."""
    loc = user_location()
    axes = _reduce_axes(x, axis, "softmax", loc)
    neg_max = _reduce("maximum", x, axes, _F32, True, "softmax_negmax", negate=True)
    e = _tile(x.shape, _F32, "softmax_exp")
    if axes == list(range(1, x.ndim)):
        total = _tile(neg_max.shape, _F32, "softmax_sum")
        isa.activation_reduce(e, _OPS["exp"], x, _OPS["add"], total, bias=neg_max)
    else:
        isa.tensor_tensor(e, x, _expand(neg_max, x.shape), _OPS["add"])
        isa.activation(e, _OPS["exp"], e)
        total = _reduce("add", e, axes, _F32, True, "softmax_sum")
    isa.reciprocal(total, total)
    out = _tile(x.shape, _dt(dtype, x.dtype), "softmax")
    isa.tensor_tensor(out, e, _expand(total, x.shape), _OPS["multiply"])
    return out


@_checked
def rms_norm(x: NkiTensor, w: NkiTensor, axis: _t.AxisLike, n: float, epsilon: float = 1e-06,
             dtype: _t.DTypeLike | None = None, compute_dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """x / sqrt(sum(x^2)/n + epsilon) * w. w has x's shape, or broadcasts to it (a [1, F] or [F]
    HBM weight is loaded to every partition with a stride-0 DMA). Computed in compute_dtype
    (fp32 by default); the result is in dtype, else compute_dtype, else x's dtype."""
    loc = user_location()
    axes = _reduce_axes(x, axis, "rms_norm", loc)
    _need_tensor(w, "rms_norm", loc)
    compute = _dt(compute_dtype, _F32)
    out_dtype = _dt(dtype, _dt(compute_dtype, x.dtype))
    if not w.buffer.on_chip and w.ndim < x.ndim:
        w = w.reshape((1,) * (x.ndim - w.ndim) + w.shape)
    if w.shape != x.shape:
        w = broadcast_to(w, x.shape)
    if not w.buffer.on_chip:
        w = load(w)
    sq = _tile(x.shape, compute, "rms_norm_sq")
    isa.tensor_tensor(sq, x, x, _OPS["multiply"])
    rstd = _reduce("add", sq, axes, _F32, True, "rms_norm_rstd")
    isa.tensor_scalar(rstd, rstd, _OPS["multiply"], 1.0 / n, op1=_OPS["add"], operand1=float(epsilon))
    isa.activation(rstd, _OPS["rsqrt"], rstd)
    normed = _tile(x.shape, compute, "rms_norm_x")
    isa.tensor_tensor(normed, x, _expand(rstd, x.shape), _OPS["multiply"])
    out = _tile(x.shape, out_dtype, "rms_norm")
    isa.tensor_tensor(out, normed, w, _OPS["multiply"])
    return out


# ---- operator objects as calls --------------------------------------------------------------

# The element-wise function of each operator that has one (prelu needs its alpha: operator only).
FUNCTIONS = {"copy": _copy, "invert": _invert, "reciprocal": _reciprocal, "rsqrt": _rsqrt}
FUNCTIONS.update({name: _make_binary(_OPS[name]) for name in _BINARY})
FUNCTIONS.update({op.name: _make_activation(op) for op in _OPS.values()
                  if op.name not in FUNCTIONS and op.act is not None and op.name not in _OPERATOR_ONLY})
