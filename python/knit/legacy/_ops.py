"""Lowering helpers shared by the legacy language and ISA facades: dtype promotion, G1 broadcasting,
masks as boxes, element-wise / reduction / copy emission into a destination view."""
import numbers

import numpy as np

from .. import _core
from .._dtypes import ALL, to_dtype
from .._tensor import NkiTensor
from ..errors import user_error
from . import _index
from ._tensor import F32, BlockTensor, LegacyTensor, Pending, alloc, emit, op_name, psum, sbuf, wrap

# ---- operands -----------------------------------------------------------------------------------------


def is_tensor(x):
    return isinstance(x, NkiTensor)


def tensor_arg(x, what, loc):
    if isinstance(x, BlockTensor):
        raise user_error("operand", f"{what} is a block tensor {x.shape}; index its block dims first (t[i])", loc)
    if not isinstance(x, NkiTensor):
        raise user_error("operand", f"{what} must be a tile, got {type(x).__name__}", loc)
    return wrap(x)


def operand(x, what, loc):
    """A tile or a compile-time scalar."""
    if isinstance(x, (NkiTensor, BlockTensor)):
        return tensor_arg(x, what, loc)
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, numbers.Number):
        return x
    raise user_error("operand", f"{what} must be a tile or a scalar, got {type(x).__name__}", loc)


def scalar_imm(v):
    """An immediate operand: Python bools/ints stay ints, everything else becomes a float."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    return float(v)


# ---- dtype promotion (nki-api.md §4.5) -----------------------------------------------------------------
_FLOAT_RANK = {"float8_e4m3": 1, "float8_e5m2": 1, "bfloat16": 2, "float16": 2, "tfloat32": 3, "float32": 4}
_INT_SIZE = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4}


def scalar_dtype(v):
    """Weak Python scalars: bool -> uint8, int -> int32, float -> float32; NumPy scalars keep theirs."""
    if isinstance(v, np.generic) and not isinstance(v, np.bool_):
        return to_dtype(v.dtype)
    if isinstance(v, (bool, np.bool_)):
        return ALL["uint8"]
    if isinstance(v, numbers.Integral):
        return ALL["int32"]
    return F32


def promote(a, b):
    a, b = str(to_dtype(a)), str(to_dtype(b))
    if a == b:
        return ALL[a]
    if a == "bool":
        return ALL[b]
    if b == "bool":
        return ALL[a]
    fa, fb = a in _FLOAT_RANK, b in _FLOAT_RANK
    if fa != fb:
        return ALL[a if fa else b]
    if fa:
        pair = {a, b}
        if "float32" in pair:
            return F32
        if "tfloat32" in pair:
            return ALL["tfloat32"]
        if pair == {"float16", "bfloat16"}:
            return F32
        if pair == {"float8_e4m3", "float8_e5m2"}:
            return ALL["bfloat16"]
        return ALL[a if _FLOAT_RANK[a] > _FLOAT_RANK[b] else b]
    sa, sb = a.startswith("int"), b.startswith("int")
    if sa == sb:
        return ALL[a if _INT_SIZE[a] >= _INT_SIZE[b] else b]
    s, u = (a, b) if sa else (b, a)
    if _INT_SIZE[s] > _INT_SIZE[u]:
        return ALL[s]
    return ALL[{1: "int16", 2: "int32", 4: "float32"}[_INT_SIZE[u]]]


def dtype_of(x):
    return x.dtype if is_tensor(x) or isinstance(x, BlockTensor) else scalar_dtype(x)


def out_dtype(dtype, *xs):
    if dtype is not None:
        return to_dtype(dtype)
    d = dtype_of(xs[0])
    for x in xs[1:]:
        d = promote(d, dtype_of(x))
    return d


# ---- shapes ---------------------------------------------------------------------------------------------
def broadcast_shape(a, b, loc):
    try:
        return tuple(int(s) for s in np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise user_error("operand-shape", f"shapes {list(a)} and {list(b)} do not broadcast", loc) from None


def broadcast(t, shape, loc):
    """A view of tile `t` broadcast to `shape` (NumPy rules; size-1 free dims only on-chip)."""
    shape = tuple(shape)
    if t.shape == shape:
        return t
    if t.ndim != len(shape):
        if t.buffer.on_chip:
            raise user_error(
                "operand-shape",
                f"cannot broadcast a tile of shape {list(t.shape)} to {list(shape)}: the ranks differ and the "
                "partition dim would move; reshape or index the tile first",
                loc,
            )
        for _ in range(len(shape) - t.ndim):
            t = t._derive_at(loc, _core.view_expand_dim, 0)
    for d, (have, want) in enumerate(zip(t.shape, shape)):
        if have == want:
            continue
        if have != 1:
            raise user_error("operand-shape", f"cannot broadcast shape {list(t.shape)} to {list(shape)}", loc)
        if d == 0 and t.buffer.on_chip:
            t = partition_broadcast(t, want, loc)
            continue
        t = t._derive_at(loc, _core.view_broadcast, d, want)
    return t


def partition_broadcast(t, partitions, loc):
    """A new SBUF tile holding `partitions` copies of the one-partition tile `t` (bit-exact, any
    dtype): the row goes to an HBM scratch tensor and comes back through a stride-0 DMA (on-chip
    views cannot repeat a partition)."""
    from .. import language as _knl

    if t.buffer is psum:
        t = to_sbuf(t, loc)
    scratch = alloc(t.shape, t.dtype, _knl.hbm, loc, "partition_broadcast")
    emit(loc, "dma_copy", dst=scratch, src=t)
    out = alloc((partitions,) + tuple(t.shape[1:]), t.dtype, sbuf, loc)
    emit(loc, "dma_copy", dst=out, src=scratch._derive_at(loc, _core.view_broadcast, 0, partitions))
    return out


def is_column(t, shape):
    """A [P,1]-like tile broadcast along every free dim of `shape` (a tensor_scalar operand)."""
    return (t.shape[0] == shape[0] and all(s == 1 for s in t.shape[1:]) and len(shape) >= 2
            and any(s != 1 for s in shape[1:]))


def column(t, loc):
    return t if t.ndim == 2 else t._derive_at(loc, _core.view_reshape, [t.shape[0], 1])


def reduce_axes(axis, ndim, loc):
    axes = [int(a) for a in (axis if isinstance(axis, (tuple, list)) else [axis])]
    return sorted(a + ndim if a < 0 else a for a in axes)


def reduced_shape(shape, axes, keepdims):
    out = [1 if d in axes else s for d, s in enumerate(shape)] if keepdims else \
        [s for d, s in enumerate(shape) if d not in axes]
    if len(out) < 2:  # on-chip tiles keep a free dim
        out = [shape[0], 1]
    return tuple(out)


# ---- masks ------------------------------------------------------------------------------------------
def mask_box(mask, loc):
    return _index.box(mask, loc)


def clip_partitions(bx, loc, t):
    """`t` restricted to the mask box along the partition dim only (None when empty)."""
    if bx is False:
        return None
    if not bx or 0 not in bx:
        return t
    out = clip({0: bx[0]}, loc, t)
    return out[0] if out else None


def clip(bx, loc, *items):
    """`items` restricted to the mask box (tensors sliced on every boxed dim they span; scalars and
    size-1 dims untouched); None when the box is empty."""
    if bx is False:  # statically all-false mask: nothing is computed
        return None
    if not bx:  # no mask
        return list(items)
    out = []
    for t in items:
        if isinstance(t, LegacyTensor):
            for r, (lo, hi) in sorted(bx.items()):
                if r >= t.ndim or t.shape[r] == 1:
                    continue
                n = t.shape[r]
                lo = 0 if lo is None else max(lo, 0)
                hi = n if hi is None else min(hi, n)
                if lo >= hi:
                    return None
                if (lo, hi) != (0, n):
                    t = t._derive_at(loc, _core.view_slice, r, lo, hi, 1)
        out.append(t)
    return out


def no_mask(mask, what, loc):
    if mask is not None:
        raise user_error("unsupported", f"mask= is not supported yet for {what}; slice the operands instead", loc)


# ---- emission into a destination ----------------------------------------------------------------------
def to_sbuf(t, loc, dtype=None):
    out = alloc(t.shape, dtype or t.dtype, sbuf, loc)
    emit(loc, "tensor_copy", dst=out, src=t)
    return out


def binary_into(dst, x, y, op, loc, bx=None):
    """dst = x op y (tiles or scalars) with G1 broadcasting."""
    opn = op_name(op, "alu", "op", loc)
    x, y = operand(x, "x", loc), operand(y, "y", loc)
    xt, yt = is_tensor(x), is_tensor(y)
    if xt and yt:
        if x.buffer is psum and y.buffer is psum:
            y = to_sbuf(y, loc)
        shape = dst.shape
        if x.shape == shape and y.shape != shape and is_column(y, shape):
            args = clip(bx, loc, dst, x, column(y, loc))
            if args:
                emit(loc, "tensor_scalar", dst=args[0], data=args[1], op0=opn, operand0=args[2])
            return
        if y.shape == shape and x.shape != shape and is_column(x, shape):
            args = clip(bx, loc, dst, y, column(x, loc))
            if args:
                emit(loc, "tensor_scalar", dst=args[0], data=args[1], op0=opn, operand0=args[2], reverse0=True)
            return
        x, y = broadcast(x, shape, loc), broadcast(y, shape, loc)
        args = clip(bx, loc, dst, x, y)
        if args:
            emit(loc, "tensor_tensor", dst=args[0], data1=args[1], data2=args[2], op=opn)
        return
    if not xt and not yt:
        raise user_error("operand", "an element-wise operation needs at least one tile operand", loc)
    data, imm, rev = (x, y, False) if xt else (y, x, True)
    data = broadcast(data, dst.shape, loc) if data.size != dst.size else data
    args = clip(bx, loc, dst, data)
    if args:
        emit(loc, "tensor_scalar", dst=args[0], data=args[1], op0=opn, operand0=scalar_imm(imm), reverse0=rev)


_ALU_UNARY = {"negative": ("multiply", -1.0), "invert": ("bitwise_xor", -1), "logical_not": ("equal", 0.0)}


def unary_into(dst, x, name, loc, bx=None):
    """dst = f(x) for an nl.* unary function name."""
    from ..language import OPS

    x = tensor_arg(x, "x", loc)
    if x.size != dst.size:
        x = broadcast(x, dst.shape, loc)
    args = clip(bx, loc, dst, x)
    if not args:
        return
    d, x = args
    if name == "reciprocal":
        emit(loc, "reciprocal", dst=d, data=x)
    elif name in _ALU_UNARY:
        alu, imm = _ALU_UNARY[name]
        emit(loc, "tensor_scalar", dst=d, data=x, op0=alu, operand0=imm)
    elif name in OPS and OPS[name].act is not None:
        emit(loc, "activation", dst=d, op=OPS[name].act, data=x)
    else:
        raise user_error("unsupported", f"nl.{name} is not supported by Knit yet", loc)


def reduce_into(dst, x, alu, axes, loc, negate=False, keepdims=False, bx=None):
    """dst = reduction of x over `axes`; axes that are not the trailing free dims are moved there
    first with a view permute (e.g. axis=[2, 4] of a 5-D pooling view)."""
    args = clip(bx, loc, dst, x)
    if not args:
        return
    dst, x = args
    axes = sorted(axes)
    if axes and axes != list(range(x.ndim - len(axes), x.ndim)) and 0 not in axes:
        order = [d for d in range(x.ndim) if d not in axes] + axes
        x = x._derive_at(loc, _core.view_permute, order)
        axes = list(range(x.ndim - len(axes), x.ndim))
    emit(loc, "tensor_reduce", dst=dst, op=alu, data=x, axis=list(axes), negate=bool(negate),
         keepdims=bool(keepdims))


def copy_into(dst, src, loc, bx=None):
    """dst = src between any buffers (tensor_copy on-chip, dma_copy with HBM; PSUM -> HBM through
    an SBUF tile)."""
    args = clip(bx, loc, dst, src)
    if not args:
        return
    dst, src = args
    if dst.buffer.on_chip and src.buffer.on_chip:
        emit(loc, "tensor_copy", dst=dst, src=src)
    elif src.buffer is psum:
        emit(loc, "dma_copy", dst=dst, src=to_sbuf(src, loc, dst.dtype))
    else:
        emit(loc, "dma_copy", dst=dst, src=src)


def fill(dst, value, loc, bx=None):
    args = clip(bx, loc, dst)
    if not args:
        return
    dst = args[0]
    if dst.buffer.on_chip:
        emit(loc, "memset", dst=dst, value=scalar_imm(value))
    else:
        tmp = alloc(dst.shape, dst.dtype, sbuf, loc)
        emit(loc, "memset", dst=tmp, value=scalar_imm(value))
        emit(loc, "dma_copy", dst=dst, src=tmp)


def assign(dst, value, loc, bx=None):
    """``dst[...] = value`` (G1: the value broadcasts into the destination)."""
    if isinstance(value, (NkiTensor, BlockTensor)):
        value = tensor_arg(value, "value", loc)
        if value.size != dst.size:
            value = broadcast(value, dst.shape, loc)
        copy_into(dst, value, loc, bx)
    elif isinstance(value, (numbers.Number, np.generic)):
        fill(dst, value, loc, bx)
    else:
        raise user_error("view-assign", f"cannot assign {type(value).__name__} to a tensor", loc)


def pending(shape, dtype, buffer, loc, fn, kind="vector", mask=None):
    """A deferred result: fn(dst, **kw) emits the instruction(s) that write `dst`. With a mask
    (`mask` is the box), a fresh result tile is zero-filled first: G1 kernels go on computing
    on whole tiles after a masked load, so the masked-off part must be defined (any value)."""
    p = Pending(shape, dtype, buffer, fn, loc, kind)
    p.prefill = bool(mask) or mask is False
    return p
