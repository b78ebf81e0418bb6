"""G1 tensors over Knit's one core.

* :class:`LegacyTensor` — an :class:`knit._tensor.NkiTensor` (so every Knit instruction accepts it)
  plus the G1 extras: advanced indexing with ``nl.arange`` / ``nl.mgrid`` expressions (lowered to
  ``.ap()`` views), G1 arithmetic dunders (lowered straight to ISA instructions), ``t[...] = x``
  copies with broadcast, and ``psum += nisa.nc_matmul(...)`` accumulation.
* :class:`Pending` — the result of a result-returning G1 instruction. The instruction is emitted
  when the result is first used (into a fresh tile), or straight into the destination when the
  result is assigned (``t[...] = nisa.exp(x)``) or accumulated (``psum += nisa.nc_matmul(a, b)``)
  first. Every legacy API call first emits all pending results, so program order is kept.
* :class:`BlockTensor` — a tensor whose partition dim (``nl.par_dim``) is not dim 0: one tile per
  block index.
* PSUM accumulation state: ``nl.zeros(..., buffer=nl.psum)`` is not memset at once; matmuls
  ``+=``-ed into it use ``accumulate=None`` (the first write of an element overwrites, later writes
  accumulate — exactly ``0 + a + b + ...``), and only another use fills the never-written
  elements with zeros (a K=1 zero matmul in auto mode, so later ``+=`` can use ``accumulate=True``
  on matmul-written PSUM without the trn1/trn2 warning).
"""
import numbers

import numpy as np

from .. import _core, _trace, isa as _isa, language as _nl
from .._buffers import hbm, psum, sbuf, shared_hbm  # noqa: F401
from .._dtypes import ALL, to_dtype
from .._operators import OPS
from .._register import RegExpr, needs_value
from .._source import call_at, user_location
from .._tensor import NkiTensor, _key, new_tensor
from ..errors import user_error
from . import _index

F32 = ALL["float32"]


# ---- G1 operators ------------------------------------------------------------------------------------
# A tile's operators (t + u, -t, abs(t), ~t, t[...] = v, t += u, t.astype(d), t.broadcast_to(s)) are G1
# calls: lowerings in _ops and knit.legacy.language, which are built on this module's types and so
# import it. The tile reaches them through this table, filled once by knit.legacy.language when it is
# imported (bind_calls), which keeps the import order one-way.
_CALLS: dict = {}  # name -> the G1 call


def bind_calls(**calls):
    """Registers the G1 calls a tile's operators use: assign, broadcast, binary_into (from _ops),
    copy and the element-wise nl.* functions by name."""
    _CALLS.update(calls)


# ---- instruction emission (explicit source location) ---------------------------------------------
# Legacy calls emit through knit.isa's functions, at the location of the user's call that created
# the instruction (deferred results are emitted later): see call_isa.
def op_name(op, kind, what, loc):
    """ALU op / activation name of an nl.* operator (legacy or current) or a NumPy ufunc."""
    if isinstance(op, str):
        return op
    return _isa._op_name(op, kind, what, loc)


def operator(op, kind="alu", what="op", loc=None):
    """The operator object knit.isa takes as op= for `op` (anything op_name takes: an nl.* operator
    of either API, a NumPy ufunc, None for the instruction's default, or an IR name), checked as
    `kind` now, at the legacy call, rather than when a deferred result is emitted."""
    return OPS[op_name(op, kind, what, loc)]


def call_isa(loc, fn, *args, **kwargs):
    """Calls knit.isa instruction `fn` (dst first) as if from the user's line `loc`: the legacy
    call adds the result tile, the masks and the deferral; the instruction's fields, operand
    checks and errors are knit.isa's. A deferred result emits after the user's call returned, so
    the line is pinned (_source.call_at) rather than found on the stack."""
    call_at(loc, fn, *args, **kwargs)


# ---- deferred results ------------------------------------------------------------------------------
def _pending_list():
    trace = _trace.current()
    lst = trace.__dict__.get("_legacy_pending")
    if lst is None:
        lst = trace._legacy_pending = []
    return lst


def flush(keep=None):
    """Emits every deferred result (oldest first) except `keep`. Called at the start of every
    legacy API call, so instructions stay in program order."""
    lst = _pending_list()  # outside a kernel: the "no-kernel" error, at the user's line
    while True:
        todo = [p for p in lst if p is not keep]
        if not todo:
            return
        todo[0]._materialize()


def _forget(p):
    lst = _pending_list()
    for i, q in enumerate(lst):
        if q is p:
            del lst[i]
            return


# ---- PSUM accumulation state -----------------------------------------------------------------------
class PsumState:
    """Shared by all views of one PSUM tensor created by the legacy API.

    mode ``lazy_zero``: logically zero, only matmuls have written it (``+=`` uses accumulate=auto);
    ``auto``: an nl.ndarray PSUM tile (``+=`` uses accumulate=auto, G2-style first-write-overwrites);
    ``acc``: real contents (``+=`` uses accumulate=True)."""

    __slots__ = ("mode", "full", "written")

    def __init__(self, mode, full_view):
        self.mode, self.full = mode, full_view
        self.written = None  # lazy_zero: which storage elements a matmul wrote (NumPy bool mask)

    def accumulate(self):
        return None if self.mode in ("lazy_zero", "auto") else True

    def mark_written(self, view):
        """Records the elements of `view` (of this tensor) as matmul-written."""
        if self.mode != "lazy_zero" or self.written is True:
            return
        needs_value(RegExpr(0, dict(view.dynamic)))  # a rolled loop's index: marks differ per iteration
        if view.offset == 0 and list(view.pattern) == list(self.full.pattern):
            self.written = True  # the whole tensor: the common `psum += matmul` of a full tile
            return
        n = 1
        for _, num in self.full.pattern:
            n *= num
        if self.written is None:
            self.written = np.zeros(n, dtype=bool)
        covered = _strided_elements(self.written, view.offset, view.pattern)
        if covered is not None:
            covered[...] = True
            return
        idx = np.full((1,), view.offset, dtype=np.int64)
        for step, num in view.pattern:
            idx = (idx[:, None] + step * np.arange(num, dtype=np.int64)[None, :]).reshape(-1)
        idx = idx[(idx >= 0) & (idx < n)]
        self.written[idx] = True

    def rolled_state(self):
        """What a rolled loop body must leave as it found it (knit/_rolled.py): the mode, which
        decides how `+=` accumulates. `written` may change: a body marks the same elements in
        every iteration (a view with a rolled loop's index unrolls the loop, mark_written), so the
        first iteration's marks are all of them."""
        return self.mode

    def materialize(self, loc):
        if self.mode != "lazy_zero":
            return
        self.mode = "acc"
        if self.written is True or (self.written is not None and self.written.all()):
            return  # matmuls wrote every element
        zero_fill(LegacyTensor(self.full), loc)


def _strided_elements(mask, offset, pattern):
    """The elements of the flat array `mask` that a view (offset, [[step, num], ...]) covers, as a
    writable strided NumPy view (no index array); None when a step is negative or the view
    leaves `mask` (the caller then clips an index list)."""
    if offset < 0 or any(step < 0 or num <= 0 for step, num in pattern):
        return None
    if offset + sum(step * (num - 1) for step, num in pattern) >= mask.size:
        return None
    return np.lib.stride_tricks.as_strided(mask[offset:], shape=[num for _, num in pattern],
                                           strides=[step * mask.itemsize for step, _ in pattern])


def zero_fill(full, loc):
    """Zeros the elements of the PSUM tensor `full` that no matmul wrote, keeping the others: a
    K=1 matmul of zeros in accumulate=auto mode (adds 0 to matmul-written elements, overwrites the
    rest with 0 and marks them matmul-written). Falls back to memset when the shape/dtype does not
    fit a matmul destination."""
    shape = full.shape
    P = shape[0]
    F = 1
    for s in shape[1:]:
        F *= s
    if full.dtype != F32 or P > _nl.tile_size.pmax or len(shape) < 2:
        call_isa(loc, _isa.memset, full, 0.0)
        return
    flat = full if full.ndim == 2 else full._derive_at(loc, _core.view_flatten_dims, 1, full.ndim - 1)
    bank = _nl.tile_size.psum_bank_fmax
    zs = alloc((1, P), F32, sbuf, loc, "psum_zero_lhs")
    zm = alloc((1, min(F, bank)), F32, sbuf, loc, "psum_zero_rhs")
    call_isa(loc, _isa.memset, zs, 0.0)
    call_isa(loc, _isa.memset, zm, 0.0)
    for c in range(0, F, bank):
        w = min(bank, F - c)
        call_isa(loc, _isa.nc_matmul, flat._derive_at(loc, _core.view_slice, 1, c, c + w, 1), zs,
                 zm if w == zm.shape[1] else zm._derive_at(loc, _core.view_slice, 1, 0, w, 1), accumulate=None)


# ---- allocation ------------------------------------------------------------------------------------
def alloc(shape, dtype, buffer, loc, name="", psum_mode="acc"):
    """A new legacy tensor; PSUM tensors get a PsumState in `psum_mode`."""
    t = new_tensor(shape, dtype, buffer, name, None, loc)
    view = NkiTensor.__dict__["_view"].__get__(t)  # the plain NkiTensor slot
    store = PsumState(psum_mode, view) if buffer is psum else None
    return LegacyTensor(view, store)


def wrap(t):
    """A LegacyTensor for any NkiTensor (kernel arguments, knit.language results)."""
    if isinstance(t, LegacyTensor) or not isinstance(t, NkiTensor):
        return t
    return LegacyTensor(NkiTensor.__dict__["_view"].__get__(t))


# ---- tensors ---------------------------------------------------------------------------------------
class LegacyTensor(NkiTensor):
    """A G1 tile or tensor (``neuronxcc.nki.tensor``): a Knit tensor view with G1 semantics."""

    __slots__ = ("_raw_view", "_store")
    __array_ufunc__ = None  # NumPy scalars/arrays defer to our reflected operators

    def __init__(self, view, store=None):
        self._raw_view = view
        self._store = store

    def _rolled_state(self):
        """The Python-side state a rolled loop body must not change (knit/_rolled.py)."""
        return None if self._store is None else self._store.rolled_state()

    # The storage view without side effects (views, metadata) ...
    @property
    def _raw(self):
        return self._raw_view

    # ... and the view handed to instructions: a lazily-zeroed PSUM tensor is materialized first.
    @property
    def _view(self):
        st = self._store
        if st is not None and st.mode == "lazy_zero":
            st.materialize(user_location())
        return self._raw

    # ---- metadata (never triggers emission) -------------------------------------------------------
    @property
    def shape(self):
        return tuple(self._raw.shape)

    @property
    def dtype(self):
        return ALL[self._raw.dtype]

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def offset(self):
        return self._raw.offset

    @property
    def strides(self):
        return tuple(step for step, _ in self._raw.pattern)

    @property
    def _info(self):
        return _trace.current().builder.tensor_info(self._raw.tensor)

    def get_pattern(self):
        return [list(p) for p in self._raw.pattern]

    def same_view(self, other):
        return isinstance(other, LegacyTensor) and other._raw_view is not None and self._raw == other._raw

    def __repr__(self):
        try:
            where = f"{self.buffer.name} "
        except Exception:
            where = ""
        return f"nki.tensor({where}{self.dtype}{list(self.shape)})"

    # ---- views ----------------------------------------------------------------------------------
    def _wrap(self, view):
        return LegacyTensor(view, self._store)

    def _derive_at(self, loc, fn, *args):
        b = _trace.current().builder
        return self._wrap(_trace.core_call(fn, b, self._raw, *args, loc))

    def _derive(self, fn, *args):
        return self._derive_at(user_location(), fn, *args)

    def __getitem__(self, key):
        return self._index(key, user_location())

    def _index(self, key, loc):
        if _index.has_predicate(key):
            preds = key if isinstance(key, tuple) else (key,)
            if len(preds) != 1:
                raise user_error("view-index", "operand masking takes one predicate (t[(i_p < m) & (i_f < n)]); "
                                 "index the tile first, then mask it", loc)
            return MaskedTile(self, preds[0])
        tiles = [d for d, k in enumerate(key if isinstance(key, tuple) else (key,)) if isinstance(k, NkiTensor)]
        if tiles:
            return self._index_rows(key if isinstance(key, tuple) else (key,), tiles, loc)
        if _index.has_index_expr(key):
            raw = self._raw
            pattern, off = _index.advanced_pattern(key, self.shape, [s for s, _ in raw.pattern], raw.offset,
                                                   self.buffer.on_chip, loc)
            if isinstance(off, RegExpr):  # a rolled loop's index: a flat offset term per symbol
                if self.buffer.on_chip:
                    needs_value(off)  # on-chip, a flat offset may cross partitions: unroll
                view = self._derive_at(loc, _core.view_ap, pattern, off.const, None)
                for reg, coeff in off.terms.items():
                    view = view._derive_at(loc, _core.view_add_flat_dynamic, reg, coeff)
                return view
            return self._derive_at(loc, _core.view_ap, pattern, off, None)
        return self._derive_at(loc, _core.view_index, _key(key, self.ndim, loc))

    def _index_rows(self, key, tiles, loc):
        """``data[idx_tile, ...]``: the HBM rows named by an SBUF index tile (G1 indirect DMA)."""
        if len(tiles) != 1 or tiles[0] != 0:
            raise user_error("unsupported", "an index tile (data[idx_tile[i_p, 0], i_f]) must be the first index, and "
                             "only one per subscript: it picks rows of the tensor's first dim", loc)
        if self.buffer.on_chip:
            raise user_error("unsupported", f"indexing an on-chip ({self.buffer.name}) tile with a tile's values is "
                             "not supported: indirect rows are a DMA feature of HBM tensors (on-chip, gather with "
                             "nisa.nc_n_gather or nl.gather_flattened)", loc)
        idx = wrap(key[0])
        if not isinstance(idx, LegacyTensor):
            raise user_error("operand", f"the index tile must be a tile, got {type(idx).__name__}", loc)
        if idx.buffer is not sbuf or str(idx.dtype) not in ("int32", "uint32"):
            raise user_error("indirect", f"the index tile is {idx.dtype} in {idx.buffer.name}; indirect rows take "
                             "an int32 or uint32 SBUF tile (nl.load(idx, dtype=nl.int32), or nl.copy(...) it)", loc)
        if idx.ndim < 2 or any(n != 1 and step != 0 for step, n in idx._raw.pattern[1:]):
            raise user_error("indirect", f"the index tile has shape {list(idx.shape)}; it needs one row index per "
                             "partition, [P, 1]: pick a column with idx_tile[i_p, j]", loc)
        if idx.shape[1:] != (1,):  # idx_tile[i_p, 0] with an nl.mgrid i_p repeats the column along the free dims
            idx = idx._derive_at(loc, _core.view_ap, [list(idx._raw.pattern[0]), [1, 1]], idx._raw.offset, None)
        raw = self._raw
        steps = [s for s, _ in raw.pattern]
        total = 1
        for n in self._info[3]:
            total *= n
        if raw.offset != 0 or self.shape[0] * steps[0] != total:
            raise user_error("unsupported", f"an index tile indexes the rows of a whole HBM tensor; this view "
                             f"{list(self.shape)} of '{self._info[0]}' {list(self._info[3])} is a part of it or "
                             "reordered (index the kernel argument itself, or reshape it to rows first)", loc)
        key = _index.tile_index_key(key, 0, idx.shape[0], self.shape, loc)
        pattern, off = _index.advanced_pattern(key, self.shape, steps, raw.offset, False, loc)
        return IndirectRows(self._derive_at(loc, _core.view_ap, pattern, off, None), idx, steps[0], loc)

    def __setitem__(self, key, value):
        """``t[key] = value``: writes an instruction result straight into the view, copies a tile
        (broadcasting size-1 free dims), or fills with a number."""
        loc = user_location()
        if isinstance(value, Pending) and value.pending:
            flush(keep=value)
            dst = self._index(key, loc)
            if value.can_write(dst):
                value.consume(dst)
                return
        flush()
        dst = self._index(key, loc)
        if dst.same_view(value):
            return  # t[k] += x already updated the view in place
        _CALLS["assign"](dst, value, loc)

    # ---- G1 nki.tensor methods ------------------------------------------------------------------
    def reshape(self, *dims, shape=None):
        """t.reshape(2, 3), t.reshape((2, 3)) or t.reshape(shape=(2, 3))."""
        if shape is None:
            shape = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        elif dims:
            raise TypeError("reshape() takes the shape either positionally or as shape=, not both")
        return self._derive(_core.view_reshape, [int(s) for s in shape])

    def expand_dims(self, axis):
        return self._derive(_core.view_expand_dim, int(axis))

    def broadcast_to(self, shape):
        loc = user_location()
        flush()
        return _CALLS["broadcast"](self, tuple(int(s) for s in shape), loc)

    def astype(self, dtype):
        return _CALLS["copy"](self, dtype=dtype)

    def assert_shape(self, shape):
        if tuple(self.shape) != tuple(shape):
            raise user_error("tensor-shape", f"expected shape {tuple(shape)}, got {self.shape}", user_location())
        return self

    # ---- G1 arithmetic ----------------------------------------------------------------------------
    def _binary(self, other, name, reverse=False):
        fn = _CALLS[name]
        return fn(other, self) if reverse else fn(self, other)

    def __neg__(self):
        return _CALLS["negative"](self)

    def __abs__(self):
        return _CALLS["abs"](self)

    def __invert__(self):
        return _CALLS["invert"](self)

    def __mod__(self, o): return self._binary(o, "mod")
    def __rmod__(self, o): return self._binary(o, "mod", True)
    def __rpow__(self, o): return self._binary(o, "power", True)
    def __rand__(self, o): return self._binary(o, "bitwise_and", True)
    def __ror__(self, o): return self._binary(o, "bitwise_or", True)
    def __rxor__(self, o): return self._binary(o, "bitwise_xor", True)
    def __lshift__(self, o): return self._binary(o, "left_shift")
    def __rshift__(self, o): return self._binary(o, "right_shift")

    # In place (NumPy semantics: the result is cast to this tile's dtype).
    def __iadd__(self, other):
        loc = user_location()
        if (isinstance(other, Pending) and other.pending and other.kind == "matmul" and self.buffer is psum
                and self.dtype == F32):
            flush(keep=other)
            acc = self._store.accumulate() if self._store is not None else True
            other.consume(self, accumulate=acc)
            return self
        flush()
        _CALLS["binary_into"](self, self, other, "add", loc)
        return self

    def _inplace(self, other, name):
        loc = user_location()
        flush()
        _CALLS["binary_into"](self, self, other, name, loc)
        return self

    def __isub__(self, o): return self._inplace(o, "subtract")
    def __imul__(self, o): return self._inplace(o, "multiply")
    def __itruediv__(self, o): return self._inplace(o, "divide")


class Pending(LegacyTensor):
    """A G1 instruction result not emitted yet (see the module docstring)."""

    __slots__ = ("_p_shape", "_p_dtype", "_p_buffer", "_p_emit", "_p_loc", "kind", "prefill")

    def __init__(self, shape, dtype, buffer, emit_fn, loc, kind="vector"):
        LegacyTensor.__init__(self, None, None)
        self._p_shape = tuple(int(s) for s in shape)
        self._p_dtype = to_dtype(dtype)
        self._p_buffer = buffer
        self._p_emit = emit_fn
        self._p_loc = loc
        self.kind = kind  # matmul | pe (TensorE -> PSUM) | dma | gpsimd | vector (any on-chip dst)
        self.prefill = False  # zero-fill a fresh result tile first (masked instructions)
        _pending_list().append(self)

    @property
    def pending(self):
        return self._raw_view is None

    @property
    def _raw(self):
        if self._raw_view is None:
            self._materialize()
        return self._raw_view

    @property
    def shape(self):
        return self._p_shape

    @property
    def dtype(self):
        return self._p_dtype

    @property
    def buffer(self):
        return self._p_buffer if self.pending else LegacyTensor.buffer.fget(self)

    def _materialize(self):
        _forget(self)
        t = alloc(self._p_shape, self._p_dtype, self._p_buffer, self._p_loc)
        self._raw_view, self._store = t._raw_view, t._store
        if self.prefill:
            call_isa(self._p_loc, _isa.memset, t, 0)
        self._p_emit(t)

    def can_write(self, dst):
        """Whether the instruction can write `dst` directly with the same result as writing a fresh
        tile and copying it into `dst`."""
        if not self.pending or tuple(dst.shape) != self._p_shape:
            return False
        if dst.dtype != self._p_dtype and (self._p_dtype != F32 or self.kind in ("matmul", "pe")):
            return False
        if self.kind in ("matmul", "pe"):
            return dst.buffer is psum
        if self.kind in ("dma", "gpsimd"):
            return dst.buffer is sbuf
        return dst.buffer.on_chip

    def consume(self, dst, **kw):
        _forget(self)
        if self.kind == "matmul":
            # A matmul into a lazily-zeroed PSUM tensor keeps it lazy (accumulate=auto semantics);
            # the matmul records the elements it writes (a mask may leave some out).
            store = dst._store
            dst = LegacyTensor(dst._raw)
            kw["mark_written"] = store.mark_written if store is not None else None
        self._p_emit(dst, **kw)

    def __repr__(self):
        if self.pending:
            return f"nki.tensor(pending {self._p_buffer.name} {self._p_dtype}{list(self._p_shape)})"
        return LegacyTensor.__repr__(self)


class IndirectRows(LegacyTensor):
    """``data[idx_tile, ...]``: view partition p reads HBM row ``idx_tile[p]`` (an indirect DMA
    view, ir ``make_indirect``; rows out of range are a runtime error). `rows` is the direct view
    that reads row p; it and the index tile are sliced together (a mask= clipping the operands),
    and the indirect view is made from them when an instruction takes it. `row_size` is the
    number of elements in one row of the tensor."""

    __slots__ = ("_rows", "_idx", "_row_size", "_loc")

    def __init__(self, rows, idx, row_size, loc):
        LegacyTensor.__init__(self, None)
        self._rows, self._idx, self._row_size, self._loc = rows, idx, row_size, loc

    @property
    def _raw(self):
        rows = self._rows._raw
        lo = hi = rows.offset  # the elements each partition reads, counted from its row's start
        for step, num in rows.pattern[1:]:
            span = step * (num - 1)
            lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
        if lo < 0 or hi >= self._row_size:
            raise user_error("view-out-of-range", f"the indices after the index tile reach elements {lo}..{hi} of "
                             f"each row, which has {self._row_size} (0..{self._row_size - 1}); cut the ragged part "
                             "with mask=", self._loc)
        b = _trace.current().builder
        return _trace.core_call(_core.view_indirect, b, rows, 0, self._idx._raw, self._loc)

    @property
    def shape(self):
        return self._rows.shape

    @property
    def dtype(self):
        return self._rows.dtype

    @property
    def _info(self):
        return self._rows._info

    def same_view(self, other):
        return other is self

    def _derive_at(self, loc, fn, *args):
        """Only slices (a mask= clipping the operands): on the partition dim they slice the index
        tile too."""
        if fn is not _core.view_slice:
            self._index(None, loc)
        rows = self._rows._derive_at(loc, fn, *args)
        idx = self._idx._derive_at(loc, fn, *args) if args[0] == 0 else self._idx
        return IndirectRows(rows, idx, self._row_size, self._loc)

    def _index(self, key, loc):
        raise user_error("unsupported", "a tensor indexed with an index tile (data[idx_tile, ...]) is used as it is: "
                         "by nl.load, nl.store, nl.atomic_rmw or nisa.dma_copy; index it in one subscript", loc)


class MaskedTile:
    """``t[pred]``: G1 operand masking. As an operand, only the elements of `tile` where `predicate`
    (over the tile's own index grid) holds take part: ``nl.matmul(x[i_f < 64], y)``."""

    __slots__ = ("tile", "predicate")

    def __init__(self, tile, predicate):
        self.tile, self.predicate = tile, predicate

    @property
    def shape(self):
        return self.tile.shape

    @property
    def dtype(self):
        return self.tile.dtype

    def __repr__(self):
        return f"{self.tile!r}[{self.predicate!r}]"


class BlockTensor:
    """A G1 tensor with block dims before its partition dim, e.g. ``(4, nl.par_dim(128), 512)``:
    one Knit tile per block index. Index the block dims with ints to get a tile."""

    def __init__(self, block_shape, tiles, tile_shape, dtype, buffer, fill=None):
        self.block_shape = tuple(block_shape)
        self._tiles = tiles  # flat, row-major over block_shape
        # (write(tile), indices of tiles not filled yet): a block's fill (nl.zeros / nl.full) is
        # emitted at the block's first access, so a block is live only from where it is used, as
        # each block is its own tile to the allocator. The legacy API has no device control flow
        # (its loops unroll), so the first access in trace order runs first.
        self._fill = fill
        self.tile_shape = tuple(tile_shape)
        self.dtype = to_dtype(dtype)
        self.buffer = buffer

    @property
    def shape(self):
        return self.block_shape + self.tile_shape

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"nki.tensor(blocks {list(self.block_shape)} x {self.buffer.name} {self.dtype}{list(self.tile_shape)})"

    def _split(self, key, loc):
        key = key if isinstance(key, tuple) else (key,)
        nb = len(self.block_shape)
        blocks, rest = key[:nb], key[nb:]
        flat = 0
        for d, b in enumerate(blocks):
            if not isinstance(b, numbers.Integral):
                raise user_error("unsupported", f"block dims (before nl.par_dim) must be indexed with ints, got {b!r}",
                                 loc)
            b = int(b) + (self.block_shape[d] if b < 0 else 0)
            if not 0 <= b < self.block_shape[d]:
                raise user_error("view-out-of-range", f"block index {b} out of range for block dim {d} of size "
                                 f"{self.block_shape[d]}", loc)
            flat = flat * self.block_shape[d] + b
        if len(blocks) < nb:
            raise user_error("unsupported", "index every block dim (before nl.par_dim) with an int", loc)
        if self._fill is not None and flat in self._fill[1]:
            self._fill[1].discard(flat)
            self._fill[0](self._tiles[flat])
        return self._tiles[flat], rest

    def __getitem__(self, key):
        loc = user_location()
        tile, rest = self._split(key, loc)
        return tile._index(rest, loc) if rest else tile

    def __setitem__(self, key, value):
        loc = user_location()
        tile, rest = self._split(key, loc)
        tile.__setitem__(rest if rest else Ellipsis, value)

    def __iter__(self):
        raise TypeError("iterate over a block tensor's blocks with an index: for i in nl.affine_range(n): t[i]")
