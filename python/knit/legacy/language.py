"""``neuronxcc.nki.language`` (G1, "Beta 1") on Knit: ``import knit.legacy.language as nl``.

G1 kernels load tiles with ``nl.load``, compute with result-returning calls and operators, store
with ``nl.store``, index with slices or ``nl.arange`` / ``nl.mgrid`` expressions and accumulate
matmuls with ``psum += nl.matmul(...)``. Every call lowers to Knit's dst-first instructions (the
same core as ``knit.language`` / ``knit.isa``), so rules are verified at the calling line.

Masks (``mask=``, operand masking ``t[pred]``, non-rectangular predicates) are lowered in
``_ops`` (``run_masked``); an index tile in an HBM subscript (``data[idx_tile, i_f]``) is an
indirect DMA view (``_tensor.IndirectRows``). Not supported (clear errors): ``|`` in a mask,
``all_reduce`` across launch-grid instances, ``mask=`` on ``rand`` / ``random_seed`` / ``dropout``.
"""
import ast as _ast
import linecache as _linecache
import numbers as _numbers

import numpy as _np

from .. import _source, _trace, isa as _kisa, language as _knl
from .._buffers import Buffer as _Buffer
from .._dtypes import ALL as _ALL, to_dtype as _to_dtype
from .._keywords import checked as _checked_by
from .._operators import (
    ALU_OPS as _ALU_OPS,
    BINARY as _BINARY,
    KINDS as _KINDS,
    OPERATOR_ONLY as _OPERATOR_ONLY,
    OPS as _OPERATORS,
    Op,
)
from .._source import user_location as _loc
from .._tensor import ds  # noqa: F401
from ..errors import user_error as _user_error
from . import _ops, _tensor
from ._index import IndexExpr, MGridResult, Predicate, arange, mgrid  # noqa: F401
from ._tensor import (  # noqa: F401
    BlockTensor,
    LegacyTensor,
    MaskedTile,
    Pending,
    alloc as _alloc,
    call_isa as _call,
    flush as _flush,
    psum,
    sbuf,
    wrap as _wrap,
)

_checked = _checked_by("nl", current_api=False)  # unknown keyword arguments are errors

# ---- dtypes / buffers / constants (shared with knit.language) ------------------------------------------
bool_ = _knl.bool_
int8, int16, int32 = _knl.int8, _knl.int16, _knl.int32
uint8, uint16, uint32 = _knl.uint8, _knl.uint16, _knl.uint32
float16, bfloat16, float32, tfloat32 = _knl.float16, _knl.bfloat16, _knl.float32, _knl.tfloat32
float8_e4m3, float8_e5m2 = _knl.float8_e4m3, _knl.float8_e5m2

hbm, private_hbm, shared_hbm = _knl.hbm, _knl.private_hbm, _knl.shared_hbm
is_hbm, is_sbuf, is_psum, is_on_chip = _knl.is_hbm, _knl.is_sbuf, _knl.is_psum, _knl.is_on_chip
tile_size = _knl.tile_size
tensor = LegacyTensor

_F32 = _ALL["float32"]


class fp32:
    """FP32 constants: ``nl.fp32.min`` is the most negative finite float32 (bit pattern 0xff7fffff)."""

    min = -3.4028234663852886e38


class bfp16:
    """BFLOAT16 constants: ``nl.bfp16.min`` is the most negative finite bfloat16 (0xff7f)."""

    min = -3.3895313892515355e38


class par_dim(int):
    """``nl.par_dim(n)`` marks the partition dim inside a shape: ``(nl.par_dim(128), 512)`` is a
    plain tile; ``(4, nl.par_dim(128), 512)`` is a block tensor of 4 tiles."""

    def __repr__(self):
        return f"nl.par_dim({int(self)})"


class nc(int):
    """``nl.nc(n)``: a logical-core launch-grid dim (the simulator runs every instance in order)."""


@_checked
def spmd_dim(*dims):
    n = 1
    for d in dims:
        n *= int(d)
    return n


# ---- loops and SPMD ---------------------------------------------------------------------------------
# G1's parallel loops: Knit runs every loop in order (sequential semantics are always correct).
affine_range = sequential_range = static_range = _knl.affine_range


def _grid():
    return _trace.current().__dict__.get("_legacy_grid") or ()


@_checked
def program_id(axis=0):
    trace = _trace.current()
    grid = _grid()
    if not grid:
        return 0
    return int(_np.unravel_index(trace.program_id, grid)[int(axis)])


@_checked
def num_programs(axes=None):
    grid = _grid()
    if axes is None:
        n = 1
        for g in grid:
            n *= g
        return n
    axes = axes if isinstance(axes, (tuple, list)) else (axes,)
    n = 1
    for a in axes:
        n *= grid[int(a)] if grid else 1
    return n


@_checked
def program_ndim():
    return len(_grid())


# ---- tensor creation -------------------------------------------------------------------------------
def _buffer(buffer, loc):
    if buffer is None:
        return sbuf
    if isinstance(buffer, _Buffer):
        return buffer
    knit_buffer = getattr(buffer, "_knit_buffer", None)  # ncc.sbuf.mod_alloc(...) & co.
    if knit_buffer is not None:
        return knit_buffer
    raise _user_error("buffer", f"buffer={buffer!r} is not a buffer; pass nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm "
                      "or an ncc.sbuf/ncc.psum allocator", loc)


def _split_shape(shape, loc):
    if isinstance(shape, _numbers.Integral):
        shape = (shape,)
    shape = tuple(shape)
    marks = [i for i, s in enumerate(shape) if isinstance(s, par_dim)]
    if len(marks) > 1:
        raise _user_error("tensor-shape", "a shape may mark only one nl.par_dim", loc)
    k = marks[0] if marks else 0
    return tuple(int(s) for s in shape[:k]), tuple(int(s) for s in shape[k:])


def _shared_alias(trace, shape, dtype, name):
    """G1 SPMD: every launch-grid instance sees the same shared_hbm tensors, so the k-th shared_hbm
    tensor an instance creates is the one instance 0 created."""
    made = trace.__dict__.setdefault("_legacy_shared", [])
    i = trace.__dict__.get("_legacy_shared_i", 0)
    trace._legacy_shared_i = i + 1
    if trace.program_id > 0 and i < len(made):
        t = made[i]
        if t.shape == tuple(shape) and t.dtype == dtype:
            return t, made
    return None, made


def _create(shape, dtype, buffer, name, loc, value=None):
    buffer = _buffer(buffer, loc)
    dtype = _to_dtype(dtype)
    blocks, tile_shape = _split_shape(shape, loc)
    if not buffer.on_chip:  # HBM is linear: a par_dim mark means nothing there
        blocks, tile_shape = (), blocks + tile_shape

    def one(nm, deferred=False):
        if buffer is shared_hbm and not blocks:
            trace = _trace.current()
            t, made = _shared_alias(trace, tile_shape, dtype, nm)
            if t is not None:
                return t
        mode = "acc"
        if buffer is psum:
            mode = "auto" if value is None else ("lazy_zero" if value == 0 and dtype == _F32 else "acc")
        t = _alloc(tile_shape, dtype, buffer, loc, nm, psum_mode=mode)
        if buffer is shared_hbm and not blocks:
            if trace.program_id == 0:
                made.append(t)
        if value is not None and mode != "lazy_zero" and not deferred:
            _ops.fill(t, value, loc)
        return t

    if not blocks:
        return one(name)
    count = 1
    for b in blocks:
        count *= b
    tiles = [one(f"{name}_{i}" if name else "", deferred=True) for i in range(count)]
    needs_fill = value is not None and not (buffer is psum and value == 0 and dtype == _F32)
    fill = (lambda t: _ops.fill(t, value, loc), set(range(count))) if needs_fill else None
    return BlockTensor(blocks, tiles, tile_shape, dtype, buffer, fill)


@_checked
def ndarray(shape, dtype, *, buffer=None, name=""):
    """An uninitialized tensor (the simulator fills fresh memory with NaN / 4)."""
    loc = _loc()
    _flush()
    return _create(shape, dtype, buffer, name, loc)


@_checked
def zeros(shape, dtype, *, buffer=None, name="", lazy_initialization=False):
    """lazy_initialization (accepted, changes nothing): a block tensor's zero fill already waits
    for each block's first use, and an fp32 PSUM tensor is zeroed by its first matmul."""
    loc = _loc()
    _flush()
    return _create(shape, dtype, buffer, name, loc, 0)


@_checked
def ones(shape, dtype, *, buffer=None, name=""):
    loc = _loc()
    _flush()
    return _create(shape, dtype, buffer, name, loc, 1)


@_checked
def full(shape, fill_value, dtype, *, buffer=None, name=""):
    loc = _loc()
    _flush()
    return _create(shape, dtype, buffer, name, loc, fill_value)


@_checked
def empty_like(a, dtype=None, *, buffer=None, name=""):
    loc = _loc()
    _flush()
    return _create(a.shape, dtype or a.dtype, buffer or a.buffer, name, loc)


@_checked
def zeros_like(a, dtype=None, *, buffer=None, name=""):
    loc = _loc()
    _flush()
    return _create(a.shape, dtype or a.dtype, buffer or a.buffer, name, loc, 0)


@_checked
def ones_like(a, dtype=None, *, buffer=None, name=""):
    loc = _loc()
    _flush()
    return _create(a.shape, dtype or a.dtype, buffer or a.buffer, name, loc, 1)


@_checked
def full_like(a, fill_value, dtype=None, *, buffer=None, name=""):
    loc = _loc()
    _flush()
    return _create(a.shape, dtype or a.dtype, buffer or a.buffer, name, loc, fill_value)


@_checked
def shared_constant(constant, dtype=None):
    _flush()
    return _wrap(_knl.shared_constant(constant, dtype=dtype))


@_checked
def shared_identity_matrix(n, dtype=uint8):
    _flush()
    return _wrap(_knl.shared_identity_matrix(n, dtype=dtype))


# ---- random numbers (knit/_random.py; generator: docs/architecture.md) -----------------------------------
@_checked
def rand(shape, dtype=float32, *, buffer=None, name=""):
    """A new tile of uniform samples in [0, 1) (G1: dtype defaults to float32)."""
    loc = _loc()
    _flush()
    return _wrap(_knl.rand(shape, dtype, buffer=_buffer(buffer, loc), name=name))


@_checked
def random_seed(seed, *, mask=None):
    """Seeds the generator nl.rand / nl.dropout draw from: a [1, 1] int32/uint32 tile or (G1) a
    Python int, whose 32 bits an iota writes into a [1, 1] int32 tile first (exact, unlike a memset
    through fp32)."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nl.random_seed", loc)
    if isinstance(seed, _numbers.Integral) and not isinstance(seed, bool):
        if not -(2**31) <= seed < 2**32:
            raise _user_error("operand", f"nl.random_seed: seed {seed} does not fit in 32 bits", loc)
        tile = _alloc((1, 1), int32, sbuf, loc)
        _call(loc, _kisa.iota, tile, [[0, 1]], offset=seed - 2**32 if seed >= 2**31 else seed)
        seed = tile
    _knl.random_seed(_ops.tensor_arg(seed, "seed", loc) if isinstance(seed, _tensor.LegacyTensor) else seed)


@_checked
def dropout(x, rate, *, dtype=None, mask=None):
    """x with each element zeroed with probability `rate` (a number or a [P, 1] tile), unscaled."""
    loc = _loc()
    _flush()
    _ops.no_mask(mask, "nl.dropout", loc)
    rate = _ops.operand(rate, "rate", loc)
    return _wrap(_knl.dropout(_ops.tensor_arg(x, "x", loc), rate if _ops.is_tensor(rate) else float(rate),
                              dtype=dtype))


# ---- data movement -----------------------------------------------------------------------------------
def _in_hbm(x, what, does, hint, loc):
    """Tile argument `what` of a call that `does` HBM ("nl.load reads"); on-chip, an error with `hint`."""
    t = _ops.tensor_arg(x, what, loc)
    if t.buffer.on_chip:
        raise _user_error("buffer", f"{does} HBM; {what} is in {t.buffer.name} ({hint})", loc)
    return t


@_checked
def load(src, *, mask=None, dtype=None):
    """HBM -> a new SBUF tile (dim 0 of the indexed view is the partition dim)."""
    loc = _loc()
    _flush()
    src = _in_hbm(src, "src", "nl.load reads", "use nl.copy for on-chip tiles", loc)
    if len(src.shape) == 1:  # A[c0:c1, i]: NKI keeps the partition dim, a [c1 - c0, 1] tile
        src = src.expand_dims(1)
    region = _ops.mask_region(mask, loc)

    def fn(dst, **kw):
        _ops.run_masked(region, loc, lambda d, s: _call(loc, _kisa.dma_copy, d, s), dst, src)

    return _ops.pending(src.shape, dtype or src.dtype, sbuf, loc, fn, kind="dma", mask=region)


@_checked
def store(dst, value, *, mask=None):
    """value (an SBUF/PSUM tile or a number) -> HBM view `dst`."""
    loc = _loc()
    _flush()
    dst = _in_hbm(dst, "dst", "nl.store writes", "assign on-chip tiles with t[...] = value", loc)
    mask, (value,) = _ops.unmask(mask, value, shape=dst.shape, loc=loc)
    _ops.assign(dst, value, loc, _ops.mask_region(mask, loc))


@_checked
def atomic_rmw(dst, value, op, *, mask=None):
    """HBM read-modify-write ``dst = op(dst, value)``; G1 has op=np.add only. With an index tile in
    dst (``t[idx_tile, i_f]``) rows that repeat accumulate, like ``np.add.at``."""
    loc = _loc()
    _flush()
    dst = _in_hbm(dst, "dst", "nl.atomic_rmw updates", "add into on-chip tiles with t[...] += value", loc)
    if _tensor.op_name(op, "alu", "op", loc) != "add":
        raise _user_error("unsupported", "nl.atomic_rmw supports op=np.add / nl.add only (the DMA accumulates by "
                          "adding); for other ops load the rows, compute and store them", loc)
    mask, (value,) = _ops.unmask(mask, value, shape=dst.shape, loc=loc)
    _ops.accumulate_into(dst, value, loc, _ops.mask_region(mask, loc), "nl.atomic_rmw")


def _pe_transpose(x, loc):
    """x [P, F] (free dims flattened) -> a PSUM tile [F, P] through TensorE."""
    if x.buffer is not sbuf:
        x = _ops.to_sbuf(x, loc)
    free = x.size // x.shape[0]
    out = _alloc((free, x.shape[0]), x.dtype, psum, loc)
    _call(loc, _kisa.nc_transpose, out, x, engine=_kisa.engine.tensor)
    return out


@_checked
def load_transpose2d(src, *, mask=None, dtype=None):
    """HBM [K, M] -> SBUF [M, K] (a load and a TensorE transpose)."""
    loc = _loc()
    _flush()
    src = _ops.tensor_arg(src, "src", loc)
    if src.ndim != 2:
        raise _user_error("operand-shape", f"nl.load_transpose2d needs a 2-D source, got {list(src.shape)}", loc)
    region = _ops.mask_region(mask, loc)  # over src's index grid

    def transposed(d, s):
        # K may pass the 128 partitions of one tile (a [2048, 128] source): K is loaded and
        # transposed 128 rows at a time, each block filling its K columns of d.
        pmax = tile_size.pmax
        for k0 in range(0, s.shape[0], pmax):
            rows = pmax if s.shape[0] - k0 > pmax else s.shape[0] - k0  # (nl.min shadows min here)
            block = s if rows == s.shape[0] else s[k0:k0 + rows, :]
            tile = _alloc((rows, s.shape[1]), s.dtype, sbuf, loc)
            _call(loc, _kisa.dma_copy, tile, block)
            _call(loc, _kisa.tensor_copy, d if rows == s.shape[0] else d[:, k0:k0 + rows], _pe_transpose(tile, loc))

    return _ops.pending(src.shape[::-1], dtype or src.dtype, sbuf, loc,
                        lambda dst, **kw: _ops.run_transposed(region, [1, 0], loc, transposed, dst, src), mask=region)


@_checked
def _copy(src, *, mask=None, dtype=None):
    """A new SBUF tile with src's contents (cast to dtype)."""
    loc = _loc()
    _flush()
    mask, (src,) = _ops.unmask(mask, src, loc=loc)
    src = _ops.tensor_arg(src, "src", loc)
    region = _ops.mask_region(mask, loc)
    return _ops.pending(src.shape, dtype or src.dtype, sbuf, loc,
                        lambda dst, **kw: _ops.copy_into(dst, src, loc, region), mask=region)


@_checked
def static_cast(x, dtype):
    return _copy(x, dtype=dtype)


@_checked
def matmul(x, y, *, transpose_x=False, mask=None):
    """``x @ y`` (or ``x.T @ y`` with transpose_x=True) as an fp32 PSUM tile; ``psum += nl.matmul(...)``
    accumulates into an existing PSUM tile."""
    loc = _loc()
    _flush()
    (x, x_region), (y, y_region) = _ops.operand_region(x, loc), _ops.operand_region(y, loc)
    x, y = _ops.tensor_arg(x, "x", loc), _ops.tensor_arg(y, "y", loc)
    if x.ndim != 2 or y.ndim != 2:
        raise _user_error("matmul-shape", f"nl.matmul takes 2-D tiles, got {list(x.shape)} and {list(y.shape)}", loc)
    M = x.shape[1] if transpose_x else x.shape[0]
    region = _ops.mask_region(mask, loc)  # over the [M, N] result
    if not transpose_x:  # x [M, K] is transposed into the stationary [K, M]
        x_region = x_region.permuted([1, 0])

    def emit_matmul(dst, stationary, moving, accumulate):
        _call(loc, _kisa.nc_matmul, dst, stationary, moving, accumulate=accumulate)

    def fn(dst, accumulate=False, mark_written=None):
        stationary = x if transpose_x else _ops.to_sbuf(_pe_transpose(x, loc), loc)
        if stationary.buffer is not sbuf:
            stationary = _ops.to_sbuf(stationary, loc)
        moving = y if y.buffer is sbuf else _ops.to_sbuf(y, loc)
        _ops.matmul_masked(dst, stationary, moving, region, x_region, y_region, loc, emit_matmul, accumulate,
                           mark_written)

    return _ops.pending((M, y.shape[1]), _F32, psum, loc, fn, kind="matmul",
                        mask=_ops.matmul_region(region, x_region, y_region))


@_checked
def transpose(x, *, dtype=None, mask=None):
    """2-D partition <-> free transpose into a new SBUF tile."""
    loc = _loc()
    _flush()
    x = _ops.tensor_arg(x, "x", loc)
    free = x.size // x.shape[0]
    region = _ops.mask_region(mask, loc)  # over x's index grid

    def transposed(d, x):
        if x.buffer is psum and x.shape[0] <= 32 and d.shape[0] <= 32:  # VectorE reads PSUM (<= 32x32)
            _call(loc, _kisa.nc_transpose, d, x, engine=_kisa.engine.vector)
        else:
            _call(loc, _kisa.tensor_copy, d, _pe_transpose(x, loc))

    return _ops.pending((free, x.shape[0]), dtype or x.dtype, sbuf, loc,
                        lambda dst, **kw: _ops.run_transposed(region, [1, 0], loc, transposed, dst, x), mask=region)


@_checked
def broadcast_to(src, *, shape):
    """A view of src broadcast to `shape` (free dims of size 1 only)."""
    loc = _loc()
    _flush()
    return _ops.broadcast(_ops.tensor_arg(src, "src", loc), tuple(int(s) for s in shape), loc)


@_checked
def expand_dims(data, axis):
    loc = _loc()
    _flush()
    t = _ops.tensor_arg(data, "data", loc)
    for a in sorted(axis if isinstance(axis, (tuple, list)) else [axis]):
        t = t.expand_dims(a)
    return t


@_checked
def where(condition, x, y, *, dtype=None, mask=None):
    """Element-wise ``condition ? x : y`` (a copy of y, then a predicated copy of x)."""
    loc = _loc()
    _flush()
    mask, (condition, x, y) = _ops.unmask(mask, condition, x, y, shape=getattr(condition, "shape", None), loc=loc)
    cond = _ops.tensor_arg(condition, "condition", loc)
    d = _ops.out_dtype(dtype, x, y)  # before operand() makes NumPy scalars Python's
    x, y = _ops.operand(x, "x", loc), _ops.operand(y, "y", loc)
    region = _ops.mask_region(mask, loc)

    def predicated(dst, cond, src):
        _call(loc, _kisa.tensor_copy_predicated, dst, src if _ops.is_tensor(src) else _ops.scalar_imm(src), cond)

    def fn(dst, **kw):
        _ops.assign(dst, y, loc, region)
        src = x if not _ops.is_tensor(x) else (x if x.size == dst.size else _ops.broadcast(x, dst.shape, loc))
        _ops.run_masked(region, loc, predicated, dst, cond, src, inplace=True)

    return _ops.pending(cond.shape, d, sbuf, loc, fn, mask=region)


@_checked
def gather_flattened(data, indices, *, mask=None, dtype=None):
    loc = _loc()
    _flush()
    data, indices = _ops.tensor_arg(data, "data", loc), _ops.tensor_arg(indices, "indices", loc)
    region = _ops.mask_region(mask, loc)  # over the indices' (and the result's) index grid
    return _ops.pending(indices.shape, dtype or data.dtype, sbuf, loc,
                        lambda dst, **kw: _ops.gather_masked(region, loc, dst, data, indices), kind="gpsimd",
                        mask=region)


@_checked
def softmax(x, axis, *, dtype=None, compute_dtype=None, mask=None):
    """knit.language.softmax (fp32 math; compute_dtype is accepted and has no effect); with a mask,
    masked-off elements take no part and the result there is zero."""
    return _run_current("softmax", (x, axis), 1, float("-inf"), dtype, mask, {})


@_checked
def device_print(prefix, x, *, mask=None):
    """Prints x's values when the simulation finishes."""
    loc = _loc()
    _flush()
    x = _ops.tensor_arg(x, "x", loc)
    region = _ops.mask_region(mask, loc)
    args = _ops.clip(region, loc, x)  # the masked box; with a non-rectangular mask, masked-off elements print 0
    if args:
        t = args[0] if not region.rest else _ops.select_where(args[0], region.rest, _ops.lows(region, x), 0, loc)
        _knl.device_print(prefix, t)


def _statement_target(frame):
    """The target expression (an ast node) of the assignment statement the frame is executing, or
    None when that statement is not a plain assignment."""
    lines = _linecache.getlines(frame.f_code.co_filename, frame.f_globals)
    first = frame.f_lineno - 1
    # A statement may span lines. (This module's min/max/sum are nl.min/nl.max/nl.sum.)
    for end in range(first + 1, len(lines[:first + 20]) + 1):
        text = lines[first].lstrip() + "".join(lines[first + 1:end])
        try:
            tree = _ast.parse(text)
        except SyntaxError:
            continue
        stmt = tree.body[0] if tree.body else None
        if isinstance(stmt, _ast.Assign) and len(stmt.targets) == 1:
            return stmt.targets[0]
        return None
    return None


def _current_value(target, frame):
    """The value the assignment target holds now (None if it is not bound yet)."""
    for node in _ast.walk(target):  # read the target instead of assigning it
        if hasattr(node, "ctx"):
            node.ctx = _ast.Load()
    code = compile(_ast.fix_missing_locations(_ast.Expression(body=target)), "<nl.loop_reduce target>", "eval")
    try:
        return eval(code, frame.f_globals, frame.f_locals)  # a name or a subscript view: no side effects
    except NameError:
        return None


@_checked
def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None):
    """G1: ``b = nl.loop_reduce(x, op, loop_indices)`` in a loop is ``b = op(x, b)``: the statement's
    target is both the destination and the other input. Knit unrolls every loop, so each iteration
    applies op to the target tile in place (masked-off elements keep their value); loop_indices only
    name the loops reduced over. A target not bound yet starts as x (cast to dtype)."""
    loc = _loc()
    _flush()
    for i in loop_indices if isinstance(loop_indices, (tuple, list)) else [loop_indices]:
        if not isinstance(i, _numbers.Integral):
            raise _user_error("operand", f"loop_indices must be loop indices (ints), got {type(i).__name__}", loc)
    opn = _tensor.op_name(op, "alu", "op", loc)
    frame = _source.user_frame()
    target = _statement_target(frame) if frame is not None else None
    if target is None:
        raise _user_error("operand", "nl.loop_reduce must be assigned to its accumulator inside the loop: "
                          "b = nl.loop_reduce(x, op, loop_indices=[i])", loc)
    acc = _current_value(target, frame)
    if acc is None:
        return _copy(x, dtype=dtype, mask=mask)
    acc = _ops.tensor_arg(acc, "the loop_reduce accumulator", loc)
    _ops.binary_into(acc, x, acc, opn, loc, _ops.mask_region(mask, loc))
    return acc


@_checked
def all_reduce(x, op, program_axes, *, dtype=None, mask=None, parallel_reduce=True, asynchronous=False):
    """G1 reduction of x across the launch-grid instances along program_axes. Knit traces the
    instances one after another into one kernel, so an instance cannot see the values of later
    ones: only a grid of one instance along those axes (where the reduction is x itself) works."""
    loc = _loc()
    _flush()
    if num_programs(program_axes) != 1:
        raise _user_error("unsupported", "nl.all_reduce across launch-grid instances is not supported: Knit traces "
                          "the instances one after another, so no instance sees a later one's values; reduce "
                          "through a shared_hbm tensor in a second kernel instead", loc)
    _tensor.op_name(op, "alu", "op", loc)
    return _copy(x, dtype=dtype, mask=mask)


def _run_current(name, args, nargs, fill, dtype, mask, options):
    """nl.<name> of the current API (knit.language) on `args`, the result as a G1 tile. With a
    mask it runs on the masked box of the first `nargs` (tile) arguments; `fill` replaces
    masked-off input elements of a non-rectangular mask (0 for rms_norm's sum of squares)."""
    loc = _loc()
    _flush()
    impl = getattr(_knl, name)
    mask, tiles = _ops.unmask(mask, *args[:nargs], shape=getattr(args[0], "shape", None), loc=loc)
    tiles = [_ops.tensor_arg(a, "x", loc) for a in tiles]
    rest = args[nargs:]
    region = _ops.mask_region(mask, loc)
    if not region.masked:
        return _wrap(impl(*tiles, *rest, dtype=dtype, **options))
    out_dtype = _to_dtype(dtype or options.get("compute_dtype") or tiles[0].dtype)

    def run(dst, *ts):  # computed in dst's dtype, so the copy is exact (one rounding, as unmasked)
        _ops.copy_into(dst, _wrap(impl(*ts, *rest, dtype=out_dtype, **options)), loc)

    return _ops.pending(tiles[0].shape, out_dtype, sbuf, loc,
                        lambda dst, **kw: _ops.run_masked(region, loc, run, dst, *tiles, fill=fill), mask=region)


def _delegate(name):
    """A unary nl.* function the current API implements (cos, floor, ...), with the G1 signature
    (keyword-only dtype / mask)."""

    def fn(x, *, dtype=None, mask=None):
        return _run_current(name, (x,), 1, None, dtype, mask, {})

    fn.__name__ = name
    return _checked(fn)


@_checked
def rms_norm(x, w, axis, n, epsilon=1e-06, *, dtype=None, compute_dtype=None, mask=None):
    """x / sqrt(sum(x^2, axis) / n + epsilon) * w (knit.language.rms_norm); with a mask, masked-off
    elements take no part in the sum (n is still the divisor, as G1 takes it from the caller)."""
    w_tile = w.tile if isinstance(w, MaskedTile) else w
    if mask is not None and isinstance(w_tile, LegacyTensor) and not w_tile.buffer.on_chip and w_tile.ndim < x.ndim:
        w_tile = w_tile.reshape((1,) * (x.ndim - w_tile.ndim) + tuple(w_tile.shape))  # clip it like x
        w = w_tile if not isinstance(w, MaskedTile) else MaskedTile(w_tile, w.predicate)
    return _run_current("rms_norm", (x, w, axis, n, epsilon), 2, 0.0, dtype, mask, {"compute_dtype": compute_dtype})


# ---- operators: element-wise, reductions (usable as op= of nki.isa calls) -------------------------------
def _shape_of(*xs):
    shapes = [x.shape for x in xs if _ops.is_tensor(x)]
    out = shapes[0]
    for s in shapes[1:]:
        out = _ops.broadcast_shape(out, s, None)
    return out


_BOOL_OUT = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or",
             "logical_xor"}
_PY_BINARY = {"add": _np.add, "subtract": _np.subtract, "multiply": _np.multiply, "divide": _np.divide,
              "maximum": _np.maximum, "minimum": _np.minimum, "power": _np.power}


def _binary(name):
    def fn(x, y, *, dtype=None, mask=None):
        loc = _loc()
        _flush()
        mask, (x, y) = _ops.unmask(mask, x, y, loc=loc)
        typed = (x, y)  # NumPy scalars keep their dtype in the promotion (operand() makes them Python's)
        x, y = _ops.operand(x, "x", loc), _ops.operand(y, "y", loc)
        if not _ops.is_tensor(x) and not _ops.is_tensor(y):
            if name in _PY_BINARY:
                return _PY_BINARY[name](x, y).item()
            raise _user_error("operand", f"nl.{name} needs a tile operand", loc)
        try:
            shape = _shape_of(x, y)
        except Exception:
            raise _user_error("operand-shape", f"nl.{name}: shapes {[getattr(v, 'shape', ()) for v in (x, y)]} "
                              "do not broadcast", loc) from None
        d = _to_dtype(dtype) if dtype is not None else (bool_ if name in _BOOL_OUT else _ops.out_dtype(None, *typed))
        region = _ops.mask_region(mask, loc)
        return _ops.pending(shape, d, sbuf, loc, lambda dst, **kw: _ops.binary_into(dst, x, y, name, loc, region),
                            mask=region)

    fn.__name__ = name
    return _checked(fn)


def _unary(name):
    def fn(x, *, dtype=None, mask=None):
        loc = _loc()
        _flush()
        mask, (x,) = _ops.unmask(mask, x, loc=loc)
        x = _ops.tensor_arg(x, "x", loc)
        d = _to_dtype(dtype) if dtype is not None else (bool_ if name == "logical_not" else x.dtype)
        region = _ops.mask_region(mask, loc)
        return _ops.pending(x.shape, d, sbuf, loc, lambda dst, **kw: _ops.unary_into(dst, x, name, loc, region),
                            mask=region)

    fn.__name__ = name
    return _checked(fn)


def _reduction(name, alu):
    def fn(x, axis, *, dtype=None, mask=None, keepdims=False):
        loc = _loc()
        _flush()
        mask, (x,) = _ops.unmask(mask, x, loc=loc)
        x = _ops.tensor_arg(x, "x", loc)
        axes = _ops.reduce_axes(axis, x.ndim, loc)
        shape = _ops.reduced_shape(x.shape, axes, keepdims)
        d = _to_dtype(dtype) if dtype is not None else (bool_ if name == "all" else x.dtype)
        region = _ops.mask_region(mask, loc)  # over x's index grid: masked-off elements take no part
        if name == "var" and axes != list(range(1, x.ndim)):
            raise _user_error("unsupported", "nl.var reduces over all free dims only in Knit", loc)
        if name in ("mean", "var"):  # the divisor is the masked count, the same on every row
            _ops.rect_only(region, f"nl.{name}", loc)

        def emit_fn(dst, **kw):
            if name in ("sum", "max", "min", "prod"):
                _ops.reduce_into(dst, x, alu, axes, loc, keepdims=keepdims, region=region)
                return
            if name == "all":
                nonzero = _alloc(x.shape, _F32, sbuf, loc)
                _ops.binary_into(nonzero, x, 0.0, "not_equal", loc)
                _ops.reduce_into(dst, nonzero, "minimum", axes, loc, keepdims=keepdims, region=region)
                return
            d = _ops.clip(_ops.reduced_region(region, x.ndim, axes, keepdims), loc, dst)
            xs = _ops.clip(region, loc, x)
            if d and xs:
                _mean_or_var(d[0], xs[0])

        def _mean_or_var(dst, x):
            count = 1
            for a in axes:
                count *= x.shape[a]
            if name == "mean":
                total = _alloc(dst.shape, _F32, sbuf, loc)
                _ops.reduce_into(total, x, "add", axes, loc, keepdims=keepdims)
                _call(loc, _kisa.tensor_scalar, dst, total, _OPERATORS["multiply"], 1.0 / count)
                return
            # var: mean of (x - mean)^2 over all free dims (population variance)
            neg_mean = _alloc((x.shape[0], 1), _F32, sbuf, loc)
            _call(loc, _kisa.tensor_reduce, neg_mean, _OPERATORS["add"], x, axes, negate=True, keepdims=True)
            _call(loc, _kisa.tensor_scalar, neg_mean, neg_mean, _OPERATORS["multiply"], 1.0 / count)
            squares = _alloc(x.shape, _F32, sbuf, loc)
            ssq = _alloc((x.shape[0], 1), _F32, sbuf, loc)
            _call(loc, _kisa.activation_reduce, squares, _OPERATORS["square"], x, _OPERATORS["add"], ssq,
                  bias=neg_mean)
            _call(loc, _kisa.tensor_scalar, dst, ssq, _OPERATORS["multiply"], 1.0 / count)

        return _ops.pending(shape, d, sbuf, loc, emit_fn, mask=region)

    fn.__name__ = name
    return _checked(fn)


# G1's element-wise calls: the two-input ALU operators, and the one-input ones (the unary ALU
# operators and the activation functions but nl.copy, defined above) plus two G1 computes from
# other instructions. The operator names come from the C++ tables (knit/_operators.py).
_BINARY_NAMES = list(_BINARY)
_UNARY_NAMES = [_n for _n, (_alu, _act) in _KINDS.items() if _n not in _OPERATOR_ONLY and _n != "copy"
                and (_act is not None or _ALU_OPS[_n]["unary"])] + ["negative", "logical_not"]
_REDUCTIONS = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply", "mean": None, "var": None,
               "all": None}

OPS = {}
for _n in _BINARY_NAMES:
    OPS[_n] = Op(_n, alu=_n, fn=_binary(_n))
for _n in _UNARY_NAMES:
    _alu, _act = _KINDS.get(_n, (None, None))
    OPS[_n] = Op(_n, alu=_alu, act=_act, fn=_unary(_n))
for _n, _alu in _REDUCTIONS.items():
    OPS[_n] = Op(_n, alu=_alu, fn=_reduction(_n, _alu))
for _n in sorted(_OPERATOR_ONLY):  # operator-only constants
    OPS[_n] = Op(_n, *_KINDS[_n])
OPS["copy"] = Op("copy", act="copy", fn=_copy)  # nl.copy: the copy function and the identity activation
for _n in ["cos", "tan", "ceil", "floor", "trunc"]:  # computed by knit.language from other instructions
    OPS[_n] = Op(_n, fn=_delegate(_n))
globals().update(OPS)
del _n, _alu, _act

# A tile's operators (t + u, t[...] = v, t.astype(d), ...) are these calls (see _tensor.bind_calls).
_tensor.bind_calls(assign=_ops.assign, broadcast=_ops.broadcast, binary_into=_ops.binary_into,
                   **{name: op.fn for name, op in OPS.items() if op.fn is not None})
