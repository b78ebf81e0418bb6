"""Lowering helpers shared by the legacy language and ISA facades: dtype promotion, G1 broadcasting,
masks, element-wise / reduction / copy emission into a destination view.

A G1 mask is lowered in two parts (``_index.Region``): its bounding box clips every operand (the
instruction runs on the box only), and the comparisons that are not box bounds (``i_p >= i_f``,
``!=``) are applied with GpSimd ``affine_select`` — to build a predicate for a
``tensor_copy_predicated`` merge of a scratch result into the destination, or to put a
reduction's identity into masked-off inputs so they take no part."""
import numbers

import numpy as np

from .. import _core, isa as _kisa
from .._buffers import hbm
from .._dtypes import ALL, to_dtype
from .._operators import OPS
from .._promotion import promote, scalar_dtype  # noqa: F401  (the G1 calls' rule too)
from .._source import user_location
from .._tensor import NkiTensor
from ..errors import user_error
from . import _index
from ._tensor import F32, BlockTensor, LegacyTensor, MaskedTile, Pending, alloc, call_isa, operator, psum, sbuf, wrap

# ---- operands -----------------------------------------------------------------------------------------


def is_tensor(x):
    return isinstance(x, NkiTensor)


def tensor_arg(x, what, loc):
    if isinstance(x, MaskedTile):
        raise user_error("unsupported", f"{what} is operand-masked (t[pred]); operand masking is supported on "
                         "nl.matmul / nisa.nc_matmul and the element-wise and reduction calls: pass mask= here "
                         "instead", loc)
    if isinstance(x, BlockTensor):
        raise user_error("operand", f"{what} is a block tensor {x.shape}; index its block dims first (t[i])", loc)
    if not isinstance(x, NkiTensor):
        raise user_error("operand", f"{what} must be a tile, got {type(x).__name__}", loc)
    return wrap(x)


def operand(x, what, loc):
    """A tile or a compile-time scalar."""
    if isinstance(x, (NkiTensor, BlockTensor, MaskedTile)):
        return tensor_arg(x, what, loc)
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, numbers.Number):
        return x
    raise user_error("operand", f"{what} must be a tile or a scalar, got {type(x).__name__}", loc)


def unmask(mask, *xs, shape=None, loc=None):
    """G1 operand masking in an instruction whose mask= is over its operands' own index grid
    (element-wise calls, reductions): ``f(x[pred], mask=m)`` is ``f(x, mask=m & pred)``. Returns
    the combined mask and the plain operands."""
    plain = []
    for x in xs:
        if isinstance(x, MaskedTile):
            if shape is not None and tuple(x.shape) != tuple(shape):
                raise user_error("operand-shape", f"a masked operand t[pred] of shape {list(x.shape)} must have the "
                                 f"result's shape {list(shape)}", loc)
            mask = x.predicate if mask is None else (mask & x.predicate)
            x = x.tile
        plain.append(x)
    return mask, plain


def operand_region(x, loc):
    """(tile, Region of its operand mask) for a possibly operand-masked tile."""
    if isinstance(x, MaskedTile):
        return x.tile, _index.region(x.predicate, loc)
    return x, _index.Region()


def scalar_imm(v):
    """An immediate operand: Python bools/ints stay ints, everything else becomes a float."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    return float(v)


# ---- dtype promotion: one rule for both API generations (knit/_promotion.py) -------------------------
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
    if t.buffer is psum:
        t = to_sbuf(t, loc)
    scratch = alloc(t.shape, t.dtype, hbm, loc, "partition_broadcast")
    call_isa(loc, _kisa.dma_copy, scratch, t)
    out = alloc((partitions,) + tuple(t.shape[1:]), t.dtype, sbuf, loc)
    call_isa(loc, _kisa.dma_copy, out, scratch._derive_at(loc, _core.view_broadcast, 0, partitions))
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
def mask_region(mask, loc):
    return _index.region(mask, loc)


def rect_only(region, what, loc):
    """Rejects a non-rectangular mask for `what`, whose result mixes elements (a scan, a reduction
    into reduce_res) so that picking elements after computing the bounding box would be wrong."""
    if region.rest:
        raise user_error("unsupported", f"a non-rectangular mask= (a comparison of two indices, or !=) is not "
                         f"supported for {what}; bound each index separately, or zero the unwanted elements first "
                         "with nisa.affine_select", loc)


def _dim_range(box, r, n):
    lo, hi = box.get(r, (None, None))
    return (0 if lo is None else max(lo, 0)), (n if hi is None else min(hi, n))


def lows(region, t):
    """The first grid index of each dim of `t` clipped to the region's box."""
    box = region.box or {}
    return [0 if n == 1 else _dim_range(box, r, n)[0] for r, n in enumerate(t.shape)]


def clip(region, loc, *items):
    """`items` restricted to the region's bounding box (tensors sliced on every boxed dim they
    span; scalars and size-1 dims untouched); None when the box is empty."""
    box = region.box if region is not None else {}
    if box is False:  # statically all-false mask: nothing is computed
        return None
    out = []
    for t in items:
        if isinstance(t, LegacyTensor):
            for r in sorted(box):
                if r >= t.ndim or t.shape[r] == 1:
                    continue
                lo, hi = _dim_range(box, r, t.shape[r])
                if lo >= hi:
                    return None
                if (lo, hi) != (0, t.shape[r]):
                    t = t._derive_at(loc, _core.view_slice, r, lo, hi, 1)
        out.append(t)
    return out


def clip_partitions(region, loc, t):
    """`t` restricted to the region's box along the partition dim only (None when empty)."""
    if region.box is False:
        return None
    out = clip(_index.Region({0: region.bound(0)}), loc, t)
    return out[0] if out else None


def no_mask(mask, what, loc):
    if mask is not None:
        raise user_error("unsupported", f"mask= is not supported yet for {what}; slice the operands instead", loc)


_CMP = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal", "==": "equal", "!=": "not_equal"}


def check_rank(terms, ndim, loc):
    """Masks index a tile's dims from the partition dim on; a comparison may not use more."""
    for expr, _ in terms:
        if any(expr.coefs[ndim:]):
            raise user_error("mask", f"the mask uses {len(expr.coefs)} indices but the tile has {ndim} dims", loc)


def affine_select_into(dst, src, expr, op, fill, loc):
    """dst = src where ``expr op 0`` holds at dst's (tile-relative) index, else `fill` (GpSimd).
    GpSimd cannot reach PSUM, which G1 kernels passed here all the same (NKI's G1 simulator and
    compiler staged it): a PSUM operand goes through an SBUF copy (VectorE), an instruction timed
    like any other."""
    check_rank([(expr, op)], dst.ndim, loc)
    coefs = list(expr.coefs[:dst.ndim]) + [0] * (dst.ndim - len(expr.coefs))
    pattern = [[coefs[r], dst.shape[r]] for r in range(1, dst.ndim)]
    if src.buffer is psum:
        src = to_sbuf(src, loc)
    target = alloc(dst.shape, dst.dtype, sbuf, loc) if dst.buffer is psum else dst
    call_isa(loc, _kisa.affine_select, target, pattern, coefs[0], src, fill, operator(_CMP[op]), offset=expr.const)
    if target is not dst:
        call_isa(loc, _kisa.tensor_copy, dst, target)


def select_where(x, terms, lo, fill, loc, dtype=None):
    """A new SBUF tile: x where every comparison of `terms` holds (indices counted from `lo`),
    `fill` elsewhere."""
    src = x if x.buffer is sbuf else to_sbuf(x, loc)
    out = alloc(x.shape, dtype or x.dtype, sbuf, loc)
    for expr, op in _index.shifted(terms, lo):
        affine_select_into(out, src, expr, op, fill, loc)
        src = out
    return out


def predicate_tile(terms, shape, lo, loc):
    """A uint8 SBUF tile of `shape`: 1 where every comparison holds, else 0."""
    ones = alloc(shape, ALL["uint8"], sbuf, loc)
    call_isa(loc, _kisa.memset, ones, 1)
    return select_where(ones, terms, lo, 0, loc)


def merge_masked(dst, scratch, terms, lo, loc):
    """dst = scratch where every comparison holds; dst's other elements keep their values. On-chip
    with a predicated copy; into HBM as one DMA per box of the masked elements (a triangle is a
    box per row), so the destination is never read."""
    if dst.buffer.on_chip:
        call_isa(loc, _kisa.tensor_copy_predicated, dst, scratch, predicate_tile(terms, dst.shape, lo, loc))
        return
    check_rank(terms, dst.ndim, loc)
    for box in _index.split_boxes(_index.shifted(terms, lo), dst.shape):
        part = _index.Region(dict(enumerate(box)))
        d, s = clip(part, loc, dst, scratch)
        call_isa(loc, _kisa.dma_copy, d, s)


def run_masked(region, loc, fn, dst, *operands, fill=None, inplace=False):
    """fn(dst, *operands) restricted to the mask, whose index grid is dst's and the operands'.
    The bounding box clips every tensor; remaining comparisons (a non-rectangular mask) run fn on
    a scratch tile over the box and merge its masked elements into dst. With `fill`, the first
    operand's masked-off elements are replaced by it first (a reduction's identity, so they do not
    take part). `inplace`: fn updates only some elements of dst (a predicated copy), so the
    scratch starts as a copy of dst."""
    args = clip(region, loc, dst, *operands)
    if not args:
        return
    if not region.rest:
        fn(*args)
        return
    d, ops = args[0], list(args[1:])
    lo = lows(region, dst)
    if fill is not None:
        ops[0] = select_where(ops[0], region.rest, lows(region, operands[0]), fill, loc)
    scratch = alloc(d.shape, d.dtype, d.buffer if d.buffer.on_chip else sbuf, loc)
    if inplace:
        call_isa(loc, _kisa.tensor_copy, scratch, d)
    fn(scratch, *ops)
    merge_masked(d, scratch, region.rest, lo, loc)


def run_transposed(region, order, loc, fn, dst, src):
    """fn(dst, src) for a transpose whose result dim k is src dim order[k] (src's free dims
    flattened into one when src has more dims), with the mask over src's index grid (the indices
    the kernel loaded src with): src is clipped to the box and the result to the permuted box."""
    if src.ndim != len(order) and (region.rest or any(r != 0 for r in (region.box or {}))):
        raise user_error("unsupported", f"a mask on the transpose of a {src.ndim}-D tile may bound only its partition "
                         "index; reshape the tile to 2-D first", loc)
    s = clip(region, loc, src)
    if s:
        run_masked(region.permuted(order), loc, lambda d: fn(d, s[0]), dst)


def identity(n, loc):
    """An fp32 SBUF identity matrix [n, n] (memset 1, then affine_select keeps the diagonal)."""
    ident = alloc((n, n), F32, sbuf, loc)
    call_isa(loc, _kisa.memset, ident, 1.0)
    affine_select_into(ident, ident, _index.IndexExpr((n, n), (1, -1)), "==", 0.0, loc)
    return ident


def matmul_region(region, s_region, m_region):
    """The region of a matmul's [M, N] result that is computed: the mask's, narrowed by the operand
    masks' bounds on the stationary's and the moving's free index."""
    if s_region.empty or m_region.empty:
        return _index.Region(False)
    return region.narrowed({0: s_region.bound(1), 1: m_region.bound(1)})


def matmul_masked(dst, stationary, moving, region, s_region, m_region, loc, emit_mm, accumulate, mark_written=None):
    """emit_mm(dst, stationary, moving, accumulate) under G1 masks: `region` over the [M, N] result
    bounds the rows and columns computed; `s_region` / `m_region` over the [K, M] / [K, N] operands
    (operand masking) leave masked-off operand elements out, as if they were zero. A non-rectangular
    result mask computes the box into scratch PSUM, zeroes the masked-off elements and writes the
    box through an identity matmul, so the PSUM accumulation state stays a matmul's. `mark_written`
    records the PSUM elements really written (lazily zeroed accumulators)."""
    if region.empty or s_region.empty or m_region.empty:
        return
    k = _index.intersect(s_region.bound(0), m_region.bound(0))
    out = matmul_region(region, s_region, m_region)
    d = clip(out, loc, dst)
    s = clip(_index.Region({0: k, 1: out.bound(0)}), loc, stationary)
    m = clip(_index.Region({0: k, 1: out.bound(1)}), loc, moving)
    if not (d and s and m):
        return
    d, s, m = d[0], s[0], m[0]
    lo_k = lows(_index.Region({0: k}), stationary)[0]
    lo_m, lo_n = lows(out, dst)[:2]
    if s_region.rest:
        s = select_where(s, s_region.rest, [lo_k, lo_m], 0.0, loc)
    if m_region.rest:
        m = select_where(m, m_region.rest, [lo_k, lo_n], 0.0, loc)
    if mark_written is not None:
        mark_written(d._raw)
    if not out.rest:
        emit_mm(d, s, m, accumulate)
        return
    box = alloc(d.shape, F32, psum, loc)
    emit_mm(box, s, m, False)
    picked = select_where(box, out.rest, [lo_m, lo_n], 0.0, loc)
    call_isa(loc, _kisa.nc_matmul, d, identity(d.shape[0], loc), picked, accumulate=accumulate)


def gather_masked(region, loc, dst, data, indices):
    """nc_n_gather under a mask over the result's (= the indices') index grid; with a
    non-rectangular mask the masked-off indices are replaced by 0 first, so they are never out of
    range."""
    data = clip_partitions(region, loc, data)
    if data is not None:
        run_masked(region, loc, lambda d, i: call_isa(loc, _kisa.nc_n_gather, d, data, i), dst, indices, fill=0)


def reduce_input(region, loc, x, fill):
    """x restricted to the mask for a reduction: clipped to the box, and with a non-rectangular
    mask a copy whose masked-off elements hold the reduction's identity `fill`."""
    args = clip(region, loc, x)
    if not args or not region.rest:
        return args[0] if args else None
    if fill is None:
        rect_only(region, "this reduction", loc)
    return select_where(args[0], region.rest, lows(region, x), fill, loc)


def reduced_region(region, ndim, axes, keepdims):
    """The mask's box over a reduction's result, whose dims are the input's kept dims (the other
    comparisons act on the input only)."""
    if region.box is False:
        return region
    kept = range(ndim) if keepdims else [d for d in range(ndim) if d not in axes]
    return _index.Region({k: region.box[d] for k, d in enumerate(kept) if d in region.box})


# The identity of each reduction op: masked-off elements hold it, so they do not take part.
_IDENTITY = {"add": 0.0, "maximum": float("-inf"), "minimum": float("inf"), "multiply": 1.0,
             "bitwise_or": 0, "bitwise_xor": 0, "logical_or": 0.0, "logical_and": 1.0}


def identity_of(op):
    return _IDENTITY.get(op)


# ---- emission into a destination ----------------------------------------------------------------------
def to_sbuf(t, loc, dtype=None):
    out = alloc(t.shape, dtype or t.dtype, sbuf, loc)
    call_isa(loc, _kisa.tensor_copy, out, t)
    return out


def binary_into(dst, x, y, op, loc, region=None):
    """dst = x op y (tiles or scalars) with G1 broadcasting."""
    region = region or _index.Region()
    opn = operator(op, "alu", "op", loc)
    x, y = operand(x, "x", loc), operand(y, "y", loc)
    xt, yt = is_tensor(x), is_tensor(y)
    if xt and yt:
        if x.buffer is psum and y.buffer is psum:
            y = to_sbuf(y, loc)
        shape = dst.shape
        if x.shape == shape and y.shape != shape and is_column(y, shape):
            run_masked(region, loc, lambda d, a, b: call_isa(loc, _kisa.tensor_scalar, d, a, opn, b),
                       dst, x, column(y, loc))
            return
        if y.shape == shape and x.shape != shape and is_column(x, shape):
            run_masked(region, loc, lambda d, a, b: call_isa(loc, _kisa.tensor_scalar, d, a, opn, b, reverse0=True),
                       dst, y, column(x, loc))
            return
        x, y = broadcast(x, shape, loc), broadcast(y, shape, loc)
        run_masked(region, loc, lambda d, a, b: call_isa(loc, _kisa.tensor_tensor, d, a, b, opn), dst, x, y)
        return
    if not xt and not yt:
        raise user_error("operand", "an element-wise operation needs at least one tile operand", loc)
    data, imm, rev = (x, y, False) if xt else (y, x, True)
    data = broadcast(data, dst.shape, loc) if data.size != dst.size else data
    run_masked(region, loc, lambda d, a: call_isa(loc, _kisa.tensor_scalar, d, a, opn, scalar_imm(imm), reverse0=rev),
               dst, data)


_ALU_UNARY = {"negative": ("multiply", -1.0), "invert": ("bitwise_xor", -1), "logical_not": ("equal", 0.0)}


def unary_into(dst, x, name, loc, region=None):
    """dst = f(x) for an nl.* unary function name."""
    x = tensor_arg(x, "x", loc)
    if x.size != dst.size:
        x = broadcast(x, dst.shape, loc)

    def fn(d, x):
        if name == "reciprocal":
            call_isa(loc, _kisa.reciprocal, d, x)
        elif name in _ALU_UNARY:
            alu, imm = _ALU_UNARY[name]
            call_isa(loc, _kisa.tensor_scalar, d, x, operator(alu), imm)
        elif name in OPS and OPS[name].act is not None:
            call_isa(loc, _kisa.activation, d, operator(OPS[name].act), x)
        else:
            raise user_error("unsupported", f"nl.{name} is not supported by Knit yet", loc)

    run_masked(region or _index.Region(), loc, fn, dst, x)


def reduce_into(dst, x, alu, axes, loc, negate=False, keepdims=False, region=None):
    """dst = reduction of x over `axes` (masked-off elements do not take part); axes that are not
    the trailing free dims are moved there first with a view permute (e.g. axis=[2, 4] of a 5-D
    pooling view)."""
    region = region or _index.Region()
    d = clip(reduced_region(region, x.ndim, axes, keepdims), loc, dst)
    x = reduce_input(region, loc, x, identity_of(alu))
    if not d or x is None:
        return
    dst = d[0]
    axes = sorted(axes)
    if axes and axes != list(range(x.ndim - len(axes), x.ndim)) and 0 not in axes:
        order = [d for d in range(x.ndim) if d not in axes] + axes
        x = x._derive_at(loc, _core.view_permute, order)
        axes = list(range(x.ndim - len(axes), x.ndim))
    call_isa(loc, _kisa.tensor_reduce, dst, operator(alu), x, axes, negate=negate, keepdims=keepdims)


def _copy_fn(loc):
    def fn(dst, src):
        if dst.buffer.on_chip and src.buffer.on_chip:
            call_isa(loc, _kisa.tensor_copy, dst, src)
        elif src.buffer is psum:
            call_isa(loc, _kisa.dma_copy, dst, to_sbuf(src, loc, dst.dtype))
        else:
            call_isa(loc, _kisa.dma_copy, dst, src)

    return fn


def copy_into(dst, src, loc, region=None):
    """dst = src between any buffers (tensor_copy on-chip, dma_copy with HBM; PSUM -> HBM through
    an SBUF tile)."""
    run_masked(region or _index.Region(), loc, _copy_fn(loc), dst, src)


def fill(dst, value, loc, region=None):
    def fn(d):
        if d.buffer.on_chip:
            call_isa(loc, _kisa.memset, d, scalar_imm(value))
        else:
            tmp = alloc(d.shape, d.dtype, sbuf, loc)
            call_isa(loc, _kisa.memset, tmp, scalar_imm(value))
            call_isa(loc, _kisa.dma_copy, d, tmp)

    run_masked(region or _index.Region(), loc, fn, dst)


def assign(dst, value, loc, region=None):
    """``dst[...] = value`` (G1: the value broadcasts into the destination)."""
    if isinstance(value, (NkiTensor, BlockTensor)):
        value = tensor_arg(value, "value", loc)
        if value.size != dst.size:
            value = broadcast(value, dst.shape, loc)
        copy_into(dst, value, loc, region)
    elif isinstance(value, (numbers.Number, np.generic)):
        fill(dst, value, loc, region)
    else:
        raise user_error("view-assign", f"cannot assign {type(value).__name__} to a tensor", loc)


def accumulate_into(dst, value, loc, region, what, oob_mode="error"):
    """dst += value (a tile or a number, broadcast into dst) in one DMA accumulate (dma_compute:
    fp32 adds, the sum cast to dst's dtype). With an index tile in dst (``t[idx_tile, i_f]``) it
    is a scatter-add in which repeated rows accumulate in order (unique_indices=False). The mask
    (a Region over dst's indices) must be rectangular."""
    rect_only(region, what, loc)
    if not isinstance(value, (NkiTensor, BlockTensor)):
        imm = operand(value, "value", loc)
        value = alloc(dst.shape, F32, sbuf, loc)
        fill(value, imm, loc)
    value = tensor_arg(value, "value", loc)
    if value.buffer is psum:
        value = to_sbuf(value, loc)
    if value.size != dst.size:
        value = broadcast(value, dst.shape, loc)
    args = clip(region, loc, dst, value)
    if args:
        d, v = args
        call_isa(loc, _kisa.dma_compute, d, [d, v], unique_indices=False, oob_mode=_kisa.oob_mode[oob_mode])


def pending(shape, dtype, buffer, loc, fn, kind="vector", mask=None):
    """A deferred result: fn(dst, **kw) emits the instruction(s) that write `dst`. With a mask
    (`mask` is its Region), a fresh result tile is zero-filled first: G1 kernels go on computing
    on whole tiles after a masked load, so the masked-off part must be defined (any value)."""
    p = Pending(shape, dtype, buffer, fn, loc, kind)
    p.prefill = mask is not None and mask.masked
    return p


def unsupported(qualified_name):
    """A stand-in for a G1 call Knit does not implement: raises `unsupported` at the kernel line."""
    def fn(*args, **kwargs):
        raise user_error("unsupported", f"{qualified_name} is not supported by Knit's legacy API yet", user_location())

    fn.__name__ = qualified_name.rsplit(".", 1)[-1]
    fn.__knit_unsupported__ = True  # rejects every call, whatever its arguments
    return fn
