"""``neuronxcc.nki.isa`` (G1) on Knit: ``import knit.legacy.isa as nisa``.

G1 instructions take no ``dst``: each returns a new tile (SBUF; PSUM for ``nc_matmul`` and the
TensorE ``nc_transpose``) with ``dtype=`` choosing its element type (default: the input's, or the
promoted type for two-input ops) and ``mask=`` restricting the computed elements (masked-off
elements of a fresh result are zero; a reduction leaves them out). The result is written straight
into a destination when it is assigned (``t[...] = nisa.exp(...)``) or accumulated
(``psum[...] += nisa.nc_matmul(a, b)``). Operators are ``nl.*`` objects or NumPy ufuncs
(``np.add``, ``np.amax``, ...). ``dge_mode`` uses the G1 numbering
(``none=0, swdge=1, hwdge=2, unknown=3``).
"""
import enum as _enum

from .. import isa as _kisa
from .._dtypes import ALL as _ALL, to_dtype as _to_dtype
from .._keywords import checked as _checked_by
from .._source import user_location as _loc
from ..errors import NkiValidationError, user_error as _user_error  # noqa: F401
from . import _index, _ops
from ._index import IndexExpr as _IndexExpr, Predicate as _Predicate
from ._tensor import (
    alloc as _alloc,
    call_isa as _call,
    flush as _flush,
    op_name as _op,
    operator as _operator,
    psum as _psum,
    sbuf as _sbuf,
)
from .language import _split_shape

_checked = _checked_by("nisa", current_api=False)  # unknown keyword arguments are errors

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
# The enums under names no parameter shadows (engine=, reduce_cmd=, ... are parameters too).
_Engine, _ReduceCmd, _OobMode, _DgeMode = engine, reduce_cmd, _kisa.oob_mode, _kisa.dge_mode


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


def _free(t):
    return t.size // t.shape[0]


def _emitted(shape, dtype, region, loc, fn):
    """A result emitted at once (the instruction also writes reduce_res, a side effect that keeps
    program order); zero-filled first under a mask, like a deferred result."""
    out = _alloc(shape, dtype, _sbuf, loc)
    if region.masked:
        _call(loc, _kisa.memset, out, 0)
    fn(out)
    return out


def _t(x, what, loc):
    return _ops.tensor_arg(x, what, loc)


def _imm_or_tile(x, what, loc):
    if x is None:
        return None
    v = _ops.operand(x, what, loc)
    return v if _ops.is_tensor(v) else float(v)


# ---- Tensor Engine ------------------------------------------------------------------------------------
@_checked
def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=(), tile_size=(), mask=None, perf_mode=None):
    """``stationary.T @ moving`` -> a new fp32 PSUM tile [M, N]; ``psum += nisa.nc_matmul(...)`` and
    ``psum[...] += ...`` accumulate into an existing PSUM tile instead."""
    loc = _loc()
    _flush()
    (s, s_region), (m, m_region) = _ops.operand_region(stationary, loc), _ops.operand_region(moving, loc)
    s, m = _t(s, "stationary", loc), _t(m, "moving", loc)
    mode = matmul_perf_mode.none if perf_mode is None else perf_mode
    region = _ops.mask_region(mask, loc)  # over the [M, N] result

    def emit_matmul(dst, stationary, moving, accumulate):
        _call(loc, _kisa.nc_matmul, dst, stationary, moving, is_stationary_onezero=is_stationary_onezero,
              is_moving_onezero=is_moving_onezero, is_transpose=is_transpose, accumulate=accumulate,
              tile_position=tile_position, tile_size=tile_size, perf_mode=mode)

    def fn(dst, accumulate=False, mark_written=None):
        _ops.matmul_masked(dst, s, m, region, s_region, m_region, loc, emit_matmul, accumulate, mark_written)

    return _ops.pending((_free(s), _free(m)), _F32, _psum, loc, fn, kind="matmul",
                        mask=_ops.matmul_region(region, s_region, m_region))


@_checked
def nc_transpose(data, *, mask=None, dtype=None, engine=0):
    """Partition <-> free transpose (free dims flattened): TensorE (SBUF -> PSUM, <= 128x128) or
    VectorE (<= 32x32, SBUF/PSUM); ``engine=unknown`` picks TensorE unless data is in PSUM."""
    loc = _loc()
    _flush()
    x = _t(data, "data", loc)
    region = _ops.mask_region(mask, loc)  # over data's index grid
    eng = _engine(engine, loc)
    if eng == "unknown":
        eng = "vector" if x.buffer is _psum else "tensor"
    out_shape = (_free(x), x.shape[0])
    d = _to_dtype(dtype) if dtype is not None else x.dtype
    natural = _psum if eng == "tensor" else _sbuf

    def transposed(dst, x):
        if dst.dtype == x.dtype:
            _call(loc, _kisa.nc_transpose, dst, x, engine=_Engine[eng])
            return
        tmp = _alloc(dst.shape, x.dtype, natural, loc)
        _call(loc, _kisa.nc_transpose, tmp, x, engine=_Engine[eng])
        _call(loc, _kisa.tensor_copy, dst, tmp)

    def fn(dst, **kw):
        _ops.run_transposed(region, [1, 0], loc, transposed, dst, x)

    if d != x.dtype:
        return _ops.pending(out_shape, d, _sbuf, loc, fn, mask=region)
    return _ops.pending(out_shape, d, natural, loc, fn, kind="pe" if eng == "tensor" else "vector", mask=region)


# ---- Scalar Engine -----------------------------------------------------------------------------------
@_checked
def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               mask=None, dtype=None, alpha=0.0):
    """``op(data * scale + bias)`` (fp32 math) -> a new tile; with ``reduce_res`` the free-dim
    reduction is written into it too."""
    loc = _loc()
    _flush()
    mask, (data,) = _ops.unmask(mask, data, loc=loc)
    x = _t(data, "data", loc)
    opn, red = _operator(op, "act", "op", loc), _operator(reduce_op, "alu", "reduce_op", loc)
    bias, scale = _imm_or_tile(bias, "bias", loc), _imm_or_tile(scale, "scale", loc)
    res = None if reduce_res is None else _t(reduce_res, "reduce_res", loc)
    cmd = _reduce_cmd(reduce_cmd, loc)
    region = _ops.mask_region(mask, loc)
    if reduce_res is not None or cmd != "idle":
        _ops.rect_only(region, "nisa.activation with a reduction", loc)

    def act(dst, x, bias, scale, res):
        _call(loc, _kisa.activation, dst, opn, x, bias=bias, scale=scale, reduce_op=red, reduce_res=res,
              reduce_cmd=_ReduceCmd[cmd], alpha=alpha)

    def fn(dst, **kw):
        _ops.run_masked(region, loc, act, dst, x, bias, scale, res)

    if reduce_res is not None:  # side effect: emit now
        return _emitted(x.shape, dtype or x.dtype, region, loc, fn)
    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, mask=region)


@_checked
def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None):
    """``activation`` plus a reduction over all free dims written into ``reduce_res`` [P, 1]."""
    loc = _loc()
    _flush()
    x = _t(data, "data", loc)
    region = _ops.mask_region(mask, loc)
    _ops.rect_only(region, "nisa.activation_reduce", loc)
    opn, red = _operator(op, "act", "op", loc), _operator(reduce_op, "alu", "reduce_op", loc)

    def act(dst, x, res, bias, scale):
        _call(loc, _kisa.activation_reduce, dst, opn, x, red, res, bias=bias, scale=scale)

    return _emitted(x.shape, dtype or x.dtype, region, loc,
                    lambda out: _ops.run_masked(region, loc, act, out, x, _t(reduce_res, "reduce_res", loc),
                                                _imm_or_tile(bias, "bias", loc), _imm_or_tile(scale, "scale", loc)))


# ---- Vector Engine -----------------------------------------------------------------------------------
@_checked
def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=0):
    """Element-wise ``data1 op data2`` (equal partitions and elements per partition)."""
    loc = _loc()
    _flush()
    mask, (data1, data2) = _ops.unmask(mask, data1, data2, loc=loc)
    a, b = _t(data1, "data1", loc), _t(data2, "data2", loc)
    opn, eng = _op(op, "alu", "op", loc), _engine(engine, loc)
    region = _ops.mask_region(mask, loc)

    def fn(dst, **kw):
        _ops.run_masked(region, loc, lambda d, a, b: _call(loc, _kisa.tensor_tensor, d, a, b, _operator(opn),
                                                           engine=_Engine[eng]), dst, a, b)

    kind = "gpsimd" if eng == "gpsimd" or opn == "power" else "vector"
    return _ops.pending(a.shape, _ops.out_dtype(dtype, a, b), _sbuf, loc, fn, kind=kind, mask=region)


@_checked
def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *, dtype=None,
                  mask=None, engine=0):
    """``(data op0 operand0) op1 operand1`` with scalar or [P, 1] operands."""
    loc = _loc()
    _flush()
    mask, (data,) = _ops.unmask(mask, data, loc=loc)
    x = _t(data, "data", loc)
    first, second = _operator(op0, "alu", "op0", loc), _operator(op1, "alu", "op1", loc)
    operand0, operand1 = _operand(operand0, "operand0", loc), _operand(operand1, "operand1", loc)
    eng = _engine(engine, loc)
    region = _ops.mask_region(mask, loc)

    def scalar_op(dst, x, operand0, operand1):
        _call(loc, _kisa.tensor_scalar, dst, x, first, operand0, reverse0, second, operand1, reverse1,
              engine=_Engine[eng])

    def fn(dst, **kw):
        _ops.run_masked(region, loc, scalar_op, dst, x, operand0, operand1)

    kind = "gpsimd" if eng == "gpsimd" else "vector"
    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, kind=kind, mask=region)


def _operand(v, what, loc):
    if v is None:
        return None
    v = _ops.operand(v, what, loc)
    return v if _ops.is_tensor(v) else _ops.scalar_imm(v)


@_checked
def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                         mask=None):
    """``(data op0 operand0) op1 operand1`` with operand0 scalar/[P, 1] and operand1 a full tile."""
    loc = _loc()
    _flush()
    x, o1 = _t(data, "data", loc), _t(operand1, "operand1", loc)
    first, second = _operator(op0, "alu", "op0", loc), _operator(op1, "alu", "op1", loc)
    operand0 = _operand(operand0, "operand0", loc)
    region = _ops.mask_region(mask, loc)

    def stt(dst, x, operand1, operand0):
        _call(loc, _kisa.scalar_tensor_tensor, dst, x, first, operand0, second, operand1, reverse0, reverse1)

    def fn(dst, **kw):
        _ops.run_masked(region, loc, stt, dst, x, o1, operand0)

    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, mask=region)


@_checked
def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False):
    """Reduction over trailing free axes (``axis`` int or list)."""
    loc = _loc()
    _flush()
    mask, (data,) = _ops.unmask(mask, data, loc=loc)
    x = _t(data, "data", loc)
    opn = _op(op, "alu", "op", loc)
    axes = _ops.reduce_axes(axis, x.ndim, loc)
    region = _ops.mask_region(mask, loc)  # over data's index grid: masked-off elements take no part
    shape = _ops.reduced_shape(x.shape, axes, keepdims)
    return _ops.pending(shape, dtype or x.dtype, _sbuf, loc,
                        lambda dst, **kw: _ops.reduce_into(dst, x, opn, axes, loc, negate, keepdims, region),
                        mask=region)


@_checked
def tensor_partition_reduce(op, data, *, mask=None, dtype=None):
    """Reduction across partitions (GpSimd) -> a [1, F] tile."""
    loc = _loc()
    _flush()
    x = _t(data, "data", loc)
    opn = _op(op, "alu", "op", loc)
    region = _ops.mask_region(mask, loc)  # over data's index grid: masked-off elements take no part

    def fn(dst, **kw):
        d = _ops.clip(region, loc, dst)  # dst's one partition is the reduced dim; its free dims are data's
        data = _ops.reduce_input(region, loc, x, _ops.identity_of(opn))
        if d and data is not None:
            _call(loc, _kisa.tensor_partition_reduce, d[0], _operator(opn), data)

    return _ops.pending((1,) + x.shape[1:], dtype or x.dtype, _sbuf, loc, fn, kind="gpsimd", mask=region)


@_checked
def tensor_copy(src, *, mask=None, dtype=None, engine=0):
    """A copy of an on-chip tile (cast to dtype)."""
    loc = _loc()
    _flush()
    mask, (src,) = _ops.unmask(mask, src, loc=loc)
    x = _t(src, "src", loc)
    eng = _engine(engine, loc)
    region = _ops.mask_region(mask, loc)

    def fn(dst, **kw):
        _ops.run_masked(region, loc, lambda d, s: _call(loc, _kisa.tensor_copy, d, s, engine=_Engine[eng]), dst, x)

    kind = "gpsimd" if eng == "gpsimd" else "vector"
    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, kind=kind, mask=region)


@_checked
def tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None, dtype=None):
    """In place: ``dst = predicate ? src : dst`` element-wise."""
    loc = _loc()
    _flush()
    d, p = _t(dst, "dst", loc), _t(predicate, "predicate", loc)
    s = _operand(src, "src", loc)
    _ops.run_masked(_ops.mask_region(mask, loc), loc,
                    lambda d, p, s: _call(loc, _kisa.tensor_copy_predicated, d, s, p, reverse_pred=reverse_pred),
                    d, p, s, inplace=True)


@_checked
def nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None):
    """In place: ``dst[q*32 + i] = src[q*32 + shuffle_mask[i]]`` in each 32-partition quadrant
    (255 leaves dst partition i unchanged)."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.nc_stream_shuffle", loc)
    _call(loc, _kisa.nc_stream_shuffle, _t(dst, "dst", loc), _t(src, "src", loc), shuffle_mask)


@_checked
def dropout(data, prob, *, mask=None, dtype=None):
    """``data`` with each element zeroed with probability ``prob`` (a number or a [P, 1] tile), kept
    elements unscaled (knit.isa.dropout), emitted at once: its draws keep program order."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nisa.dropout", loc)
    x = _t(data, "data", loc)
    out = _alloc(x.shape, x.dtype, _sbuf, loc)
    _call(loc, _kisa.dropout, out, x, _imm_or_tile(prob, "prob", loc))
    if dtype is None or _to_dtype(dtype) == x.dtype:
        return out
    cast = _alloc(x.shape, _to_dtype(dtype), _sbuf, loc)
    _call(loc, _kisa.tensor_copy, cast, out)
    return cast


@_checked
def reciprocal(data, *, dtype=None, mask=None, engine=0):
    loc = _loc()
    _flush()
    mask, (data,) = _ops.unmask(mask, data, loc=loc)
    x = _t(data, "data", loc)
    region = _ops.mask_region(mask, loc)

    def fn(dst, **kw):
        _ops.run_masked(region, loc, lambda d, x: _call(loc, _kisa.reciprocal, d, x), dst, x)

    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, mask=region)


@_checked
def memset(shape, value, dtype, *, mask=None, engine=0):
    """A new tile of `shape` filled with `value`."""
    loc = _loc()
    _flush()
    blocks, tile_shape = _split_shape(shape, loc)
    if blocks:
        raise _user_error("unsupported", "nisa.memset of a block shape; memset each tile", loc)
    eng = _engine(engine, loc)
    region = _ops.mask_region(mask, loc)

    def fn(dst, **kw):
        _ops.run_masked(region, loc, lambda d: _call(loc, _kisa.memset, d, value, engine=_Engine[eng]), dst)

    return _ops.pending(tile_shape, dtype, _sbuf, loc, fn, kind="gpsimd" if eng == "gpsimd" else "vector",
                        mask=region)


def _affine(expr, what, loc):
    if not isinstance(expr, _IndexExpr):
        raise _user_error("operand", f"{what} must be an affine expression of nl.arange / nl.mgrid indices", loc)
    if expr.ndim < 2:
        raise _user_error("operand", f"{what} must be 2-D or more: lift nl.arange with [:, None] / [None, :]", loc)
    return expr


@_checked
def iota(expr, dtype, *, mask=None):
    """A tile holding the values of an affine index expression (GpSimd, int32 math); masked-off
    elements are not written."""
    loc = _loc()
    _flush()
    e = _affine(expr, "expr", loc)
    region = _ops.mask_region(mask, loc)

    def fn(dst, **kw):
        (shifted, _), = _index.shifted([(e, None)], _ops.lows(region, dst))

        def write(d):  # d is the masked box: the expression's indices count from its first element
            _call(loc, _kisa.iota, d, [[c, n] for n, c in zip(d.shape[1:], shifted.coefs[1:])],
                  offset=shifted.const, channel_multiplier=shifted.coefs[0])

        _ops.run_masked(region, loc, write, dst)

    return _ops.pending(e.sizes, dtype, _sbuf, loc, fn, kind="gpsimd", mask=region)


@_checked
def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None):
    """``pred ? on_true_tile : on_false_value`` where pred is one comparison of affine index
    expressions (e.g. ``i_p >= i_f`` for a causal mask); masked-off elements are not written."""
    loc = _loc()
    _flush()
    x = _t(on_true_tile, "on_true_tile", loc)
    if not isinstance(pred, _Predicate) or len(pred.terms) != 1:
        raise _user_error("operand", "pred must be one comparison of nl.arange/nl.mgrid expressions, e.g. i_p >= i_f",
                          loc)
    if pred.terms[0][0].ndim > x.ndim:
        raise _user_error("operand-shape", f"pred has {pred.terms[0][0].ndim} dims, on_true_tile {x.ndim}", loc)
    region = _ops.mask_region(mask, loc)

    def fn(dst, **kw):
        def select(d, x):  # d is the masked box: pred's indices count from the box's first element
            (expr, op), = _index.shifted(pred.terms, _ops.lows(region, dst))
            _ops.affine_select_into(d, x, expr, op, on_false_value, loc)

        _ops.run_masked(region, loc, select, dst, x)

    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn, kind="gpsimd", mask=region)


def _reducing(region, reduce_res, cmd, what, loc):
    """A select/scan with a reduction into the accumulator registers or reduce_res takes
    rectangular masks only (the reduction would see the bounding box's masked-off elements)."""
    if reduce_res is not None or cmd != "idle":
        _ops.rect_only(region, what, loc)


@_checked
def select_reduce(*, predicate, on_true, on_false, dst=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                  reduce_op=None, reverse_pred=False, mask=None, dtype=None):
    """``where(predicate, on_true, on_false)``, optionally max-reduced into reduce_res. Into `dst`
    when given (late G1 releases take dst=; the result is also returned), else a new tile."""
    loc = _loc()
    _flush()
    p, t = _t(predicate, "predicate", loc), _t(on_true, "on_true", loc)
    cmd = _reduce_cmd(reduce_cmd, loc)
    red = _operator("maximum" if reduce_op is None else reduce_op, "alu", "reduce_op", loc)
    res = None if reduce_res is None else _t(reduce_res, "reduce_res", loc)
    region = _ops.mask_region(mask, loc)
    _reducing(region, res, cmd, "nisa.select_reduce with a reduction", loc)

    def select(dst, p, t, f, r):
        _call(loc, _kisa.select_reduce, dst, p, t, f, reduce_res=r, reduce_cmd=_ReduceCmd[cmd], reduce_op=red,
              reverse_pred=reverse_pred)

    if dst is not None:
        d = _t(dst, "dst", loc)
        _ops.run_masked(region, loc, select, d, p, t, _operand(on_false, "on_false", loc), res)
        return dst
    return _emitted(t.shape, dtype or t.dtype, region, loc,
                    lambda out: _ops.run_masked(region, loc, select, out, p, t, _operand(on_false, "on_false", loc),
                                                res))


@_checked
def range_select(*, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.idle, reduce_res=None,
                 reduce_op=None, range_start=0, on_false_value=-3.4028234663852886e38, mask=None, dtype=None):
    """Keeps on_true_tile's elements whose free index (from range_start) lies in both bounds. Under
    a mask the free index stays the element's index in the whole tile."""
    loc = _loc()
    _flush()
    x = _t(on_true_tile, "on_true_tile", loc)
    first, second = _operator(comp_op0, "alu", "comp_op0", loc), _operator(comp_op1, "alu", "comp_op1", loc)
    cmd = _reduce_cmd(reduce_cmd, loc)
    red = _operator("maximum" if reduce_op is None else reduce_op, "alu", "reduce_op", loc)
    res = None if reduce_res is None else _t(reduce_res, "reduce_res", loc)
    region = _ops.mask_region(mask, loc)
    _reducing(region, res, cmd, "nisa.range_select with a reduction", loc)
    if x.ndim > 2 and (region.rest or any(r > 0 for r in (region.box or {}))):
        raise _user_error("unsupported", "a mask on nisa.range_select of a tile with several free dims may bound only "
                          "the partition index; reshape the tile to 2-D first", loc)
    start = float(range_start) + (_ops.lows(region, x)[1] if x.ndim == 2 else 0)

    def select(dst, x, b0, b1, r):
        _call(loc, _kisa.range_select, dst, x, first, second, b0, b1, reduce_cmd=_ReduceCmd[cmd], reduce_res=r,
              reduce_op=red, range_start=start, on_false_value=on_false_value)

    return _emitted(x.shape, dtype or x.dtype, region, loc,
                    lambda out: _ops.run_masked(region, loc, select, out, x, _t(bound0, "bound0", loc),
                                                _t(bound1, "bound1", loc), res))


@_checked
def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *, dtype=None, mask=None):
    """A scan along the free dim; under a (rectangular) mask it starts from `initial` at the first
    masked element of each row."""
    loc = _loc()
    _flush()
    a, b = _t(data0, "data0", loc), _t(data1, "data1", loc)
    first, second = _operator(op0, "alu", "op0", loc), _operator(op1, "alu", "op1", loc)
    region = _ops.mask_region(mask, loc)
    _ops.rect_only(region, "nisa.tensor_tensor_scan", loc)

    def scan(dst, a, b, init):
        _call(loc, _kisa.tensor_tensor_scan, dst, a, b, init, first, second, reverse0, reverse1)

    return _ops.pending(a.shape, _ops.out_dtype(dtype, a, b), _sbuf, loc,
                        lambda dst, **kw: _ops.run_masked(region, loc, scan, dst, a, b,
                                                          _operand(initial, "initial", loc)), mask=region)


@_checked
def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None):
    """``data op0 operand0`` -> a new tile; its free-dim reduction is written into ``reduce_res``."""
    loc = _loc()
    _flush()
    x = _t(data, "data", loc)
    first, red = _operator(op0, "alu", "op0", loc), _operator(reduce_op, "alu", "reduce_op", loc)
    region = _ops.mask_region(mask, loc)
    _ops.rect_only(region, "nisa.tensor_scalar_reduce", loc)

    def scalar_reduce(dst, x, operand0, res):
        _call(loc, _kisa.tensor_scalar_reduce, dst, x, first, operand0, red, reduce_res=res, reverse0=reverse0)

    return _emitted(x.shape, dtype or x.dtype, region, loc,
                    lambda out: _ops.run_masked(region, loc, scalar_reduce, out, x,
                                                _operand(operand0, "operand0", loc), _t(reduce_res, "reduce_res", loc)))


def _stats(name, width_fn):
    def fn(data, *, mask=None, dtype=None):
        loc = _loc()
        _flush()
        x = _t(data, "data", loc)
        region = _ops.mask_region(mask, loc)
        _ops.rect_only(region, f"nisa.{name}", loc)

        def emit_fn(dst, **kw):  # the mask cuts the input; the output keeps its width
            args = _ops.clip(region, loc, x)
            d = _ops.clip_partitions(region, loc, dst)
            if args and d is not None:
                _call(loc, getattr(_kisa, name), d, args[0])

        return _ops.pending((x.shape[0], width_fn(x)), dtype or x.dtype, _sbuf, loc, emit_fn, mask=region)

    fn.__name__ = name
    return _checked(fn)


bn_stats = _stats("bn_stats", lambda x: 6)
bn_aggr = _stats("bn_aggr", lambda x: 2)


@_checked
def max8(*, src, mask=None, dtype=None):
    """The 8 largest values of each row; under a mask, of its masked elements only."""
    loc = _loc()
    _flush()
    x = _t(src, "src", loc)
    region = _ops.mask_region(mask, loc)

    def fn(dst, **kw):
        d = _ops.clip_partitions(region, loc, dst)
        data = _ops.reduce_input(region, loc, x, float("-inf"))
        if d is not None and data is not None:
            _call(loc, _kisa.max8, d, data)

    return _ops.pending((x.shape[0], 8), dtype or x.dtype, _sbuf, loc, fn, mask=region)


@_checked
def nc_find_index8(*, data, vals, mask=None, dtype=None):
    """Index of each of 8 values in each row; under a mask only the masked elements are searched
    (the others are NaN in a copy, never equal to a value), and indices stay positions in the row."""
    loc = _loc()
    _flush()
    x, v = _t(data, "data", loc), _t(vals, "vals", loc)
    region = _ops.mask_region(mask, loc)
    terms = mask.terms if isinstance(mask, _Predicate) else []

    def fn(dst, **kw):
        d, vv, xx = (_ops.clip_partitions(region, loc, t) for t in (dst, v, x))
        if d is None:
            return
        if any(any(expr.coefs[1:]) for expr, _ in terms):
            xx = _ops.select_where(xx, terms, _ops.lows(_index.Region({0: region.bound(0)}), x), float("nan"), loc)
        _call(loc, _kisa.nc_find_index8, d, xx, vv)

    return _ops.pending((x.shape[0], 8), dtype or _ALL["uint32"], _sbuf, loc, fn, mask=region)


# ---- GpSimd -------------------------------------------------------------------------------------------
@_checked
def nc_match_replace8(*, data, vals, imm, dst_idx=None, mask=None, dtype=None):
    """data with the first occurrence of each partition's 8 vals set to imm; dst_idx, when given,
    receives the positions. Slots claim in NKI 0.6's order (the last first), as knit.isa's."""
    loc = _loc()
    _flush()
    if mask is not None:
        raise _user_error("unsupported", "nisa.nc_match_replace8 with a mask; replace on the whole tile, or "
                          "select the masked elements first", loc)
    x, v = _t(data, "data", loc), _t(vals, "vals", loc)
    idx = None if dst_idx is None else _t(dst_idx, "dst_idx", loc)

    def fn(dst, **kw):
        _call(loc, _kisa.nc_match_replace8, dst, x, v, float(imm), idx)

    return _ops.pending(x.shape, dtype or x.dtype, _sbuf, loc, fn)


@_checked
def local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, *, mask=None):
    """GpSimd gather within 16-partition groups. The groups tie the instruction to whole tiles, so
    under a mask it gathers everything into a scratch tile and copies the masked elements."""
    loc = _loc()
    _flush()
    src, idx = _t(src_buffer, "src_buffer", loc), _t(index, "index", loc)
    P = idx.shape[0]
    valid = num_valid_indices if num_valid_indices is not None else _free(idx) * 16
    free = int(valid) * int(num_elem_per_idx)
    region = _ops.mask_region(mask, loc)

    def fn(dst, **kw):
        out = _alloc(dst.shape, dst.dtype, _sbuf, loc) if region.masked else dst
        _call(loc, _kisa.local_gather, out, src, idx, num_elem_per_idx, valid)
        if out is not dst:
            _ops.copy_into(dst, out, loc, region)

    return _ops.pending((P, free), src.dtype, _sbuf, loc, fn, kind="gpsimd", mask=region)


@_checked
def nc_n_gather(data, indices, *, mask=None, dtype=None):
    loc = _loc()
    _flush()
    x, idx = _t(data, "data", loc), _t(indices, "indices", loc)
    region = _ops.mask_region(mask, loc)  # over the indices' (and the result's) index grid
    return _ops.pending(idx.shape, x.dtype, _sbuf, loc,
                        lambda dst, **kw: _ops.gather_masked(region, loc, dst, x, idx), kind="gpsimd", mask=region)


# ---- DMA ----------------------------------------------------------------------------------------------
@_checked
def dma_copy(*args, dst=None, src=None, mask=None, dst_rmw_op=None, oob_mode=oob_mode.error,
             dge_mode=dge_mode.unknown):
    """In place: copy src into dst (HBM/SBUF either side; dtypes convert through fp32).
    ``dst_rmw_op=np.add`` accumulates into dst (one DMA accumulate; repeated rows of an indirect
    dst accumulate too). The earliest G1 releases took ``(src, dst)``
    positionally; that order is accepted too."""
    loc = _loc()
    _flush()
    if args:
        if len(args) != 2 or dst is not None or src is not None:
            raise _user_error("operand", "nisa.dma_copy takes dst= and src= keywords", loc)
        src, dst = args
    d, s = _t(dst, "dst", loc), _t(src, "src", loc)
    oob = _enum_name(oob_mode, _OobMode, "oob_mode", loc)
    dge = _enum_name(dge_mode, globals()["dge_mode"], "dge_mode", loc)  # G1's numbering
    region = _ops.mask_region(mask, loc)
    if dst_rmw_op is None:
        _ops.run_masked(region, loc, lambda d, s: _call(loc, _kisa.dma_copy, d, s, oob_mode=_OobMode[oob],
                                                        dge_mode=_DgeMode[dge]), d, s)
        return
    if _op(dst_rmw_op, "alu", "dst_rmw_op", loc) != "add":
        raise _user_error("unsupported", "dma_copy(dst_rmw_op=...) supports np.add / nl.add only", loc)
    if d.buffer is _psum:
        raise _user_error("buffer", "dma_copy(dst_rmw_op=np.add) accumulates into HBM or SBUF; dst is in psum", loc)
    _ops.accumulate_into(d, s, loc, region, "nisa.dma_copy with dst_rmw_op", oob)


@_checked
def dma_transpose(src, *, axes=None, mask=None, dtype=None):
    """A transposed copy into a new SBUF tile (2-byte dtypes; axes (1,0), (2,1,0) or (3,1,2,0))."""
    loc = _loc()
    _flush()
    x = _t(src, "src", loc)
    region = _ops.mask_region(mask, loc)  # over src's index grid
    default = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}.get(x.ndim, tuple(range(x.ndim))[::-1])
    perm = tuple(int(a) for a in (axes or default))
    shape = tuple(x.shape[a] for a in perm)
    d = _to_dtype(dtype) if dtype is not None else x.dtype

    def transposed(dst, x):
        if dst.dtype == x.dtype:
            _call(loc, _kisa.dma_transpose, dst, x, axes=perm)
            return
        tmp = _alloc(dst.shape, x.dtype, _sbuf, loc)
        _call(loc, _kisa.dma_transpose, tmp, x, axes=perm)
        _call(loc, _kisa.tensor_copy, dst, tmp)

    return _ops.pending(shape, d, _sbuf, loc,
                        lambda dst, **kw: _ops.run_transposed(region, list(perm), loc, transposed, dst, x), kind="dma",
                        mask=region)


builtin_custom_op = _ops.unsupported("nisa.builtin_custom_op")
tensor_copy_dynamic_src = _ops.unsupported("nisa.tensor_copy_dynamic_src")
tensor_copy_dynamic_dst = _ops.unsupported("nisa.tensor_copy_dynamic_dst")
