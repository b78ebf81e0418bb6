"""``neuronxcc.nki.isa`` (G1) on Knit: ``import knit.legacy.isa as nisa``.

G1 instructions take no ``dst``: each returns a new tile (SBUF; PSUM for ``nc_matmul`` and the
TensorE ``nc_transpose``) with ``dtype=`` choosing its element type (default: the input's, or the
promoted type for two-input ops) and ``mask=`` restricting the computed elements (rectangular
masks). The result is written straight into a destination when it is assigned
(``t[...] = nisa.exp(...)``) or accumulated (``psum[...] += nisa.nc_matmul(a, b)``). Operators
are ``nl.*`` objects or NumPy ufuncs (``np.add``, ``np.amax``, ...). ``dge_mode`` uses the G1
numbering (``none=0, swdge=1, hwdge=2, unknown=3``).
"""
import enum as _enum

from .. import isa as _kisa
from .._dtypes import ALL as _ALL, to_dtype as _to_dtype
from .._source import user_location as _loc
from ..errors import NkiValidationError, user_error as _user_error  # noqa: F401
from . import _ops
from ._index import IndexExpr as _IndexExpr, Predicate as _Predicate
from ._tensor import alloc as _alloc, emit as _emit, flush as _flush, op_name as _op, psum as _psum, sbuf as _sbuf

# ---- enums and target queries ------------------------------------------------------------------------
engine = _kisa.engine
tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine = engine.gpsimd, engine.unknown
reduce_cmd = _kisa.reduce_cmd
oob_mode = _kisa.oob_mode
nc_version = _kisa.nc_version
get_nc_version = _kisa.get_nc_version
get_nc_sub_version = _kisa.get_nc_sub_version
matmul_perf_mode = _kisa.matmul_perf_mode


class dge_mode(_enum.IntEnum):
    """G1 numbering (the current API numbers these differently)."""

    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


class dma_engine(_enum.IntEnum):
    dma = 1
    gpsimd_dma = 2


_F32 = _ALL["float32"]


def _engine(e, loc):
    if e is None:
        return "unknown"
    if isinstance(e, _enum.Enum) and e.name in engine.__members__:
        return e.name
    if isinstance(e, int):
        try:
            return engine(int(e)).name
        except ValueError:
            pass
    raise _user_error("engine", f"engine={e!r} is not an engine (nisa.vector_engine, nisa.scalar_engine, ...)", loc)


def _enum_name(value, cls, what, loc):
    if isinstance(value, _enum.Enum) and value.name in cls.__members__:
        return value.name
    if isinstance(value, int):
        try:
            return cls(int(value)).name
        except ValueError:
            pass
    raise _user_error("operand", f"{what}={value!r} is not a nisa.{cls.__name__} member", loc)


def _reduce_cmd(value, loc):
    return _enum_name(value, reduce_cmd, "reduce_cmd", loc)


def _acc_field(accumulate):
    return "auto" if accumulate is None else ("on" if accumulate else "off")


def _free(t):
    return t.size // t.shape[0]


def _t(x, what, loc):
    return _ops.tensor_arg(x, what, loc)


def _imm_or_tile(x, what, loc):
    if x is None:
        return None
    v = _ops.operand(x, what, loc)
    return v if _ops.is_tensor(v) else float(v)


# ---- Tensor Engine ------------------------------------------------------------------------------------
def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=(), tile_size=(), mask=None, perf_mode=None, **kwargs):
    """``stationary.T @ moving`` -> a new fp32 PSUM tile [M, N]; ``psum += nisa.nc_matmul(...)`` and
    ``psum[...] += ...`` accumulate into an existing PSUM tile instead."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.nc_matmul", loc)
    s, m = _t(stationary, "stationary", loc), _t(moving, "moving", loc)
    mode = "none" if perf_mode is None else str(getattr(perf_mode, "value", perf_mode))

    def fn(dst, accumulate=False):
        _emit(loc, "nc_matmul", dst=dst, stationary=s, moving=m, is_stationary_onezero=bool(is_stationary_onezero),
              is_moving_onezero=bool(is_moving_onezero), is_transpose=bool(is_transpose),
              accumulate=_acc_field(accumulate), tile_position=[int(v) for v in tile_position or ()],
              tile_size=[int(v) for v in tile_size or ()], perf_mode=mode.replace("double_row_gen3", "double_row"))

    return _ops.pending((_free(s), _free(m)), _F32, _psum, loc, fn, kind="matmul")


def nc_transpose(data, *, mask=None, dtype=None, engine=0, **kwargs):
    """Partition <-> free transpose (free dims flattened): TensorE (SBUF -> PSUM, <= 128x128) or
    VectorE (<= 32x32, SBUF/PSUM); ``engine=unknown`` picks TensorE unless data is in PSUM."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.nc_transpose", loc)
    x = _t(data, "data", loc)
    eng = _engine(engine, loc)
    if eng == "unknown":
        eng = "vector" if x.buffer is _psum else "tensor"
    out_shape = (_free(x), x.shape[0])
    d = _to_dtype(dtype) if dtype is not None else x.dtype
    natural = _psum if eng == "tensor" else _sbuf

    def fn(dst, **kw):
        if dst.dtype == x.dtype:
            _emit(loc, "nc_transpose", dst=dst, data=x, engine=eng)
            return
        tmp = _alloc(out_shape, x.dtype, natural, loc)
        _emit(loc, "nc_transpose", dst=tmp, data=x, engine=eng)
        _emit(loc, "tensor_copy", dst=dst, src=tmp)

    if d != x.dtype:
        return _ops.pending(out_shape, d, _sbuf, loc, fn)
    return _ops.pending(out_shape, d, natural, loc, fn, kind="pe" if eng == "tensor" else "vector")


# ---- Scalar Engine -----------------------------------------------------------------------------------
def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               mask=None, dtype=None, **kwargs):
    """``op(data * scale + bias)`` (fp32 math) -> a new tile; with ``reduce_res`` the free-dim
    reduction is written into it too."""
    loc = _loc()
    _flush()
    x = _t(data, "data", loc)
    fields = dict(op=_op(op, "act", "op", loc), bias=_imm_or_tile(bias, "bias", loc),
                  scale=_imm_or_tile(scale, "scale", loc), reduce_op=_op(reduce_op, "alu", "reduce_op", loc),
                  reduce_res=None if reduce_res is None else _t(reduce_res, "reduce_res", loc),
                  reduce_cmd=_reduce_cmd(reduce_cmd, loc), alpha=float(kwargs.get("alpha", 0.0)))
    bx = _ops.mask_box(mask, loc)

    def fn(dst, **kw):
        args = _ops.clip(bx, loc, dst, x, fields["bias"], fields["scale"])
        if args:
            _emit(loc, "activation", **{**fields, "dst": args[0], "data": args[1], "bias": args[2],
                                        "scale": args[3]})

    if reduce_res is not None:  # side effect: emit now
        out = _alloc(x.shape, dtype or x.dtype, _sbuf, loc)
        fn(out)
        return out
    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, mask=bx)


def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None, **kwargs):
    """``activation`` plus a reduction over all free dims written into ``reduce_res`` [P, 1]."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.activation_reduce", loc)
    x = _t(data, "data", loc)
    out = _alloc(x.shape, dtype or x.dtype, _sbuf, loc)
    _emit(loc, "activation_reduce", dst=out, op=_op(op, "act", "op", loc), data=x,
          reduce_op=_op(reduce_op, "alu", "reduce_op", loc), reduce_res=_t(reduce_res, "reduce_res", loc),
          bias=_imm_or_tile(bias, "bias", loc), scale=_imm_or_tile(scale, "scale", loc))
    return out


# ---- Vector Engine -----------------------------------------------------------------------------------
def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=0, **kwargs):
    """Element-wise ``data1 op data2`` (equal partitions and elements per partition)."""
    loc = _loc()
    _flush()
    a, b = _t(data1, "data1", loc), _t(data2, "data2", loc)
    opn, eng = _op(op, "alu", "op", loc), _engine(engine, loc)
    bx = _ops.mask_box(mask, loc)

    def fn(dst, **kw):
        args = _ops.clip(bx, loc, dst, a, b)
        if args:
            _emit(loc, "tensor_tensor", dst=args[0], data1=args[1], data2=args[2], op=opn, engine=eng)

    kind = "gpsimd" if eng == "gpsimd" or opn == "power" else "vector"
    return _ops.pending(a.shape, _ops.out_dtype(dtype, a, b), _sbuf, loc, fn, kind=kind, mask=bx)


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *, dtype=None,
                  mask=None, engine=0, **kwargs):
    """``(data op0 operand0) op1 operand1`` with scalar or [P, 1] operands."""
    loc = _loc()
    _flush()
    x = _t(data, "data", loc)
    fields = dict(op0=_op(op0, "alu", "op0", loc), operand0=_operand(operand0, "operand0", loc),
                  reverse0=bool(reverse0), op1=_op(op1, "alu", "op1", loc),
                  operand1=_operand(operand1, "operand1", loc), reverse1=bool(reverse1), engine=_engine(engine, loc))
    bx = _ops.mask_box(mask, loc)

    def fn(dst, **kw):
        args = _ops.clip(bx, loc, dst, x, fields["operand0"], fields["operand1"])
        if args:
            _emit(loc, "tensor_scalar", **{**fields, "dst": args[0], "data": args[1], "operand0": args[2],
                                           "operand1": args[3]})

    kind = "gpsimd" if fields["engine"] == "gpsimd" else "vector"
    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, kind=kind, mask=bx)


def _operand(v, what, loc):
    if v is None:
        return None
    v = _ops.operand(v, what, loc)
    return v if _ops.is_tensor(v) else _ops.scalar_imm(v)


def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                         mask=None, **kwargs):
    """``(data op0 operand0) op1 operand1`` with operand0 scalar/[P, 1] and operand1 a full tile."""
    loc = _loc()
    _flush()
    x, o1 = _t(data, "data", loc), _t(operand1, "operand1", loc)
    fields = dict(op0=_op(op0, "alu", "op0", loc), operand0=_operand(operand0, "operand0", loc),
                  op1=_op(op1, "alu", "op1", loc), reverse0=bool(reverse0), reverse1=bool(reverse1))
    bx = _ops.mask_box(mask, loc)

    def fn(dst, **kw):
        args = _ops.clip(bx, loc, dst, x, o1, fields["operand0"])
        if args:
            _emit(loc, "scalar_tensor_tensor", **{**fields, "dst": args[0], "data": args[1], "operand1": args[2],
                                                  "operand0": args[3]})

    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, mask=bx)


def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False, **kwargs):
    """Reduction over trailing free axes (``axis`` int or list)."""
    loc = _loc()
    _flush()
    x = _t(data, "data", loc)
    opn = _op(op, "alu", "op", loc)
    axes = _ops.reduce_axes(axis, x.ndim, loc)
    bx = _ops.mask_box(mask, loc)
    shape = _ops.reduced_shape(x.shape, axes, keepdims)
    return _ops.pending(shape, dtype or x.dtype, _sbuf, loc,
                        lambda dst, **kw: _ops.reduce_into(dst, x, opn, axes, loc, negate, keepdims, bx), mask=bx)


def tensor_partition_reduce(op, data, *, mask=None, dtype=None, **kwargs):
    """Reduction across partitions (GpSimd) -> a [1, F] tile."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.tensor_partition_reduce", loc)
    x = _t(data, "data", loc)
    opn = _op(op, "alu", "op", loc)
    return _ops.pending((1,) + x.shape[1:], dtype or x.dtype, _sbuf, loc,
                        lambda dst, **kw: _emit(loc, "tensor_partition_reduce", dst=dst, op=opn, data=x),
                        kind="gpsimd")


def tensor_copy(src, *, mask=None, dtype=None, engine=0, **kwargs):
    """A copy of an on-chip tile (cast to dtype)."""
    loc = _loc()
    _flush()
    x = _t(src, "src", loc)
    eng = _engine(engine, loc)
    bx = _ops.mask_box(mask, loc)

    def fn(dst, **kw):
        args = _ops.clip(bx, loc, dst, x)
        if args:
            _emit(loc, "tensor_copy", dst=args[0], src=args[1], engine=eng)

    kind = "gpsimd" if eng == "gpsimd" else "vector"
    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, kind=kind, mask=bx)


def tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None, dtype=None, **kwargs):
    """In place: ``dst = predicate ? src : dst`` element-wise."""
    loc = _loc()
    _flush()
    d, p = _t(dst, "dst", loc), _t(predicate, "predicate", loc)
    s = _operand(src, "src", loc)
    args = _ops.clip(_ops.mask_box(mask, loc), loc, d, p, s)
    if args:
        _emit(loc, "tensor_copy_predicated", dst=args[0], predicate=args[1], src=args[2],
              reverse_pred=bool(reverse_pred))


def nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None, **kwargs):
    """In place: ``dst[q*32 + i] = src[q*32 + shuffle_mask[i]]`` in each 32-partition quadrant
    (255 leaves dst partition i unchanged)."""
    loc = _loc()
    _flush()
    if mask is not None:
        raise _user_error("unsupported", "mask= is not supported yet for nc_stream_shuffle", loc)
    _emit(loc, "nc_stream_shuffle", dst=_t(dst, "dst", loc), src=_t(src, "src", loc),
          shuffle_mask=[int(m) for m in shuffle_mask])


def reciprocal(data, *, dtype=None, mask=None, engine=0, **kwargs):
    loc = _loc()
    _flush()
    x = _t(data, "data", loc)
    bx = _ops.mask_box(mask, loc)

    def fn(dst, **kw):
        args = _ops.clip(bx, loc, dst, x)
        if args:
            _emit(loc, "reciprocal", dst=args[0], data=args[1])

    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, mask=bx)


def memset(shape, value, dtype, *, mask=None, engine=0, **kwargs):
    """A new tile of `shape` filled with `value`."""
    from .language import _split_shape

    loc = _loc()
    _flush()
    blocks, tile_shape = _split_shape(shape, loc)
    if blocks:
        raise _user_error("unsupported", "nisa.memset of a block shape; memset each tile", loc)
    eng = _engine(engine, loc)
    bx = _ops.mask_box(mask, loc)

    def fn(dst, **kw):
        args = _ops.clip(bx, loc, dst)
        if args:
            _emit(loc, "memset", dst=args[0], value=_ops.scalar_imm(value), engine=eng)

    return _ops.pending(tile_shape, dtype, _sbuf, loc, fn, kind="gpsimd" if eng == "gpsimd" else "vector", mask=bx)


def _affine(expr, what, loc):
    if not isinstance(expr, _IndexExpr):
        raise _user_error("operand", f"{what} must be an affine expression of nl.arange / nl.mgrid indices", loc)
    if expr.ndim < 2:
        raise _user_error("operand", f"{what} must be 2-D or more: lift nl.arange with [:, None] / [None, :]", loc)
    return expr


def iota(expr, dtype, *, mask=None, **kwargs):
    """A tile holding the values of an affine index expression (GpSimd, int32 math)."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.iota", loc)
    e = _affine(expr, "expr", loc)
    pattern = [[c, n] for n, c in zip(e.sizes[1:], e.coefs[1:])]

    def fn(dst, **kw):
        _emit(loc, "iota", dst=dst, pattern=pattern, offset=e.const, channel_multiplier=e.coefs[0])

    return _ops.pending(e.sizes, dtype, _sbuf, loc, fn, kind="gpsimd")


_CMP = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal", "==": "equal", "!=": "not_equal"}


def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None, **kwargs):
    """``pred ? on_true_tile : on_false_value`` where pred is one comparison of affine index
    expressions (e.g. ``i_p >= i_f`` for a causal mask)."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.affine_select", loc)
    x = _t(on_true_tile, "on_true_tile", loc)
    if not isinstance(pred, _Predicate) or len(pred.terms) != 1:
        raise _user_error("operand", "pred must be one comparison of nl.arange/nl.mgrid expressions, e.g. i_p >= i_f",
                          loc)
    expr, op = pred.terms[0]
    if expr.ndim > x.ndim:
        raise _user_error("operand-shape", f"pred has {expr.ndim} dims, on_true_tile {x.ndim}", loc)
    coefs = list(expr.coefs) + [0] * (x.ndim - expr.ndim)
    pattern = [[coefs[r], x.shape[r]] for r in range(1, x.ndim)]

    def fn(dst, **kw):
        _emit(loc, "affine_select", dst=dst, pattern=pattern, channel_multiplier=coefs[0], on_true_tile=x,
              on_false_value=float(on_false_value), cmp_op=_CMP[op], offset=expr.const)

    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, kind="gpsimd")


def select_reduce(*, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle, reduce_op=None,
                  reverse_pred=False, mask=None, dtype=None, **kwargs):
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.select_reduce", loc)
    p, t = _t(predicate, "predicate", loc), _t(on_true, "on_true", loc)
    out = _alloc(t.shape, dtype or t.dtype, _sbuf, loc)
    _emit(loc, "select_reduce", dst=out, predicate=p, on_true=t, on_false=_operand(on_false, "on_false", loc),
          reduce_res=None if reduce_res is None else _t(reduce_res, "reduce_res", loc),
          reduce_cmd=_reduce_cmd(reduce_cmd, loc),
          reduce_op=_op(reduce_op, "alu", "reduce_op", loc) if reduce_op is not None else "maximum",
          reverse_pred=bool(reverse_pred))
    return out


def range_select(*, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.idle, reduce_res=None,
                 reduce_op=None, range_start=0, on_false_value=-3.4028234663852886e38, mask=None, dtype=None,
                 **kwargs):
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.range_select", loc)
    x = _t(on_true_tile, "on_true_tile", loc)
    out = _alloc(x.shape, dtype or x.dtype, _sbuf, loc)
    _emit(loc, "range_select", dst=out, on_true_tile=x, comp_op0=_op(comp_op0, "alu", "comp_op0", loc),
          comp_op1=_op(comp_op1, "alu", "comp_op1", loc), bound0=_t(bound0, "bound0", loc),
          bound1=_t(bound1, "bound1", loc), reduce_cmd=_reduce_cmd(reduce_cmd, loc),
          reduce_res=None if reduce_res is None else _t(reduce_res, "reduce_res", loc),
          reduce_op=_op(reduce_op, "alu", "reduce_op", loc) if reduce_op is not None else "maximum",
          range_start=float(range_start), on_false_value=float(on_false_value))
    return out


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *, dtype=None, mask=None,
                       **kwargs):
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.tensor_tensor_scan", loc)
    a, b = _t(data0, "data0", loc), _t(data1, "data1", loc)
    fields = dict(initial=_operand(initial, "initial", loc), op0=_op(op0, "alu", "op0", loc),
                  op1=_op(op1, "alu", "op1", loc), reverse0=bool(reverse0), reverse1=bool(reverse1))
    return _ops.pending(a.shape, _ops.out_dtype(dtype, a, b), _sbuf, loc,
                        lambda dst, **kw: _emit(loc, "tensor_tensor_scan", dst=dst, data0=a, data1=b, **fields))


def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None,
                         **kwargs):
    """``data op0 operand0`` -> a new tile; its free-dim reduction is written into ``reduce_res``."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.tensor_scalar_reduce", loc)
    x = _t(data, "data", loc)
    out = _alloc(x.shape, dtype or x.dtype, _sbuf, loc)
    _emit(loc, "tensor_scalar_reduce", dst=out, data=x, op0=_op(op0, "alu", "op0", loc),
          operand0=_operand(operand0, "operand0", loc), reduce_op=_op(reduce_op, "alu", "reduce_op", loc),
          reduce_res=_t(reduce_res, "reduce_res", loc), reverse0=bool(reverse0))
    return out


def _stats(name, width_fn):
    def fn(data, *, mask=None, dtype=None, **kwargs):
        loc = _loc()
        _flush()
        x = _t(data, "data", loc)
        bx = _ops.mask_box(mask, loc)

        def emit_fn(dst, **kw):  # the mask cuts the input; the output keeps its width
            args = _ops.clip(bx, loc, x)
            d = _ops.clip_partitions(bx, loc, dst)
            if args and d is not None:
                _emit(loc, name, dst=d, data=args[0])

        return _ops.pending((x.shape[0], width_fn(x)), dtype or x.dtype, _sbuf, loc, emit_fn, mask=bx)

    fn.__name__ = name
    return fn


bn_stats = _stats("bn_stats", lambda x: 6)
bn_aggr = _stats("bn_aggr", lambda x: 2)


def max8(*, src, mask=None, dtype=None, **kwargs):
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.max8", loc)
    x = _t(src, "src", loc)
    return _ops.pending((x.shape[0], 8), dtype or x.dtype, _sbuf, loc,
                        lambda dst, **kw: _emit(loc, "max8", dst=dst, src=x))


def nc_find_index8(*, data, vals, mask=None, dtype=None, **kwargs):
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.nc_find_index8", loc)
    x, v = _t(data, "data", loc), _t(vals, "vals", loc)
    return _ops.pending((x.shape[0], 8), dtype or _ALL["uint32"], _sbuf, loc,
                        lambda dst, **kw: _emit(loc, "nc_find_index8", dst=dst, data=x, vals=v))


# ---- GpSimd -------------------------------------------------------------------------------------------
def local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, *, mask=None, **kwargs):
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.local_gather", loc)
    src, idx = _t(src_buffer, "src_buffer", loc), _t(index, "index", loc)
    P = idx.shape[0]
    valid = num_valid_indices if num_valid_indices is not None else _free(idx) * 16
    free = int(valid) * int(num_elem_per_idx)
    return _ops.pending((P, free), src.dtype, _sbuf, loc,
                        lambda dst, **kw: _emit(loc, "local_gather", dst=dst, src_buffer=src, index=idx,
                                                num_elem_per_idx=int(num_elem_per_idx), num_valid_indices=int(valid)),
                        kind="gpsimd")


def nc_n_gather(data, indices, *, mask=None, dtype=None, **kwargs):
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.nc_n_gather", loc)
    x, idx = _t(data, "data", loc), _t(indices, "indices", loc)
    return _ops.pending(idx.shape, x.dtype, _sbuf, loc,
                        lambda dst, **kw: _emit(loc, "nc_n_gather", dst=dst, data=x, indices=idx), kind="gpsimd")


# ---- DMA ----------------------------------------------------------------------------------------------
def dma_copy(*args, dst=None, src=None, mask=None, dst_rmw_op=None, oob_mode=oob_mode.error,
             dge_mode=dge_mode.unknown, **kwargs):
    """In place: copy src into dst (HBM/SBUF either side; dtypes convert through fp32).
    ``dst_rmw_op=np.add`` accumulates into dst. The earliest G1 releases took ``(src, dst)``
    positionally; that order is accepted too."""
    loc = _loc()
    _flush()
    if args:
        if len(args) != 2 or dst is not None or src is not None:
            raise _user_error("operand", "nisa.dma_copy takes dst= and src= keywords", loc)
        src, dst = args
    d, s = _t(dst, "dst", loc), _t(src, "src", loc)
    fields = dict(oob_mode=_enum_name(oob_mode, globals()["oob_mode"], "oob_mode", loc),
                  dge_mode=_enum_name(dge_mode, globals()["dge_mode"], "dge_mode", loc))
    args = _ops.clip(_ops.mask_box(mask, loc), loc, d, s)
    if not args:
        return
    d, s = args
    if dst_rmw_op is None:
        _emit(loc, "dma_copy", dst=d, src=s, **fields)
        return
    if _op(dst_rmw_op, "alu", "dst_rmw_op", loc) != "add":
        raise _user_error("unsupported", "dma_copy(dst_rmw_op=...) supports np.add / nl.add only", loc)
    acc = d if d.buffer is _sbuf else _alloc(d.shape, d.dtype, _sbuf, loc)
    if acc is not d:
        _emit(loc, "dma_copy", dst=acc, src=d, **fields)
    if s.buffer.on_chip:
        addend = s
    else:
        addend = _alloc(s.shape, s.dtype, _sbuf, loc)
        _emit(loc, "dma_copy", dst=addend, src=s, **fields)
    _emit(loc, "tensor_tensor", dst=acc, data1=acc, data2=addend, op="add")
    if acc is not d:
        _emit(loc, "dma_copy", dst=d, src=acc, **fields)


def dma_transpose(src, *, axes=None, mask=None, dtype=None, **kwargs):
    """A transposed copy into a new SBUF tile (2-byte dtypes; axes (1,0), (2,1,0) or (3,1,2,0))."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.dma_transpose", loc)
    x = _t(src, "src", loc)
    default = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}.get(x.ndim, tuple(range(x.ndim))[::-1])
    perm = tuple(int(a) for a in (axes or default))
    shape = tuple(x.shape[a] for a in perm)
    d = _to_dtype(dtype) if dtype is not None else x.dtype

    def fn(dst, **kw):
        if dst.dtype == x.dtype:
            _emit(loc, "dma_transpose", dst=dst, src=x, axes=list(perm))
            return
        tmp = _alloc(shape, x.dtype, _sbuf, loc)
        _emit(loc, "dma_transpose", dst=tmp, src=x, axes=list(perm))
        _emit(loc, "tensor_copy", dst=dst, src=tmp)

    return _ops.pending(shape, d, _sbuf, loc, fn, kind="dma")


def _unsupported(name):
    def fn(*args, **kwargs):
        raise _user_error("unsupported", f"nisa.{name} is not supported by Knit's legacy API yet", _loc())

    fn.__name__ = name
    return fn


dropout = _unsupported("dropout")
builtin_custom_op = _unsupported("builtin_custom_op")
tensor_copy_dynamic_src = _unsupported("tensor_copy_dynamic_src")
tensor_copy_dynamic_dst = _unsupported("tensor_copy_dynamic_dst")
