"""NkiTensor: a view of one tensor of the kernel being traced (nki-api.md §2.3). Every view method
returns a new NkiTensor on the same storage; the view rules live in C++ (ir/view.h).

This module also creates tensors (``new_tensor``, behind nl.ndarray) and holds the element-wise
arithmetic of the current API (``binary``: ``nl.add(x, y)`` and ``x + y`` alike), because a
tensor's operators need it and it needs tensors: keeping both here keeps the import order
one-way (knit.isa and knit.language build on this module, never the reverse)."""
import numbers
from typing import SupportsFloat

import numpy as np

from . import _core, _trace
from ._buffers import buffer_named, check_buffer, sbuf, shared_hbm
from ._dtypes import ALL, storage_dtype, to_dtype
from ._keywords import argument_boundary
from ._operators import OPS
from ._promotion import promote, scalar_dtype
from ._register import RegExpr, VirtualRegister, check_subscript, needs_value, new_register
from ._source import user_location
from .errors import user_error


def _append(opname, fields, loc):
    """Appends one instruction (operands already converted: views, numbers, names) at `loc`."""
    _trace.core_call(_trace.current().builder.append, opname, fields, loc, "")


def new_tensor(shape, dtype, buffer, name, address, loc):
    """A new tensor of the current trace (nl.ndarray): `shape` (an int or a sequence), stored as
    `dtype` (NKI_PRECISE_FP=0 keeps low-precision floats in fp32), in `buffer`."""
    trace = _trace.current()
    buffer = check_buffer(buffer, loc)
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    shape = [int(s) for s in shape]
    dtype = storage_dtype(dtype)
    # Launch-grid instances share named shared_hbm tensors (NKI: equal names alias the same
    # memory across cores), so every instance writes its part of one output.
    # Unnamed ones are matched by their order of creation within the instance.
    shared_key = None
    if buffer is shared_hbm:
        trace.shared_created += 1
        shared_key = (trace.rank, name or f"#{trace.shared_created}", tuple(shape), str(dtype))
    if shared_key in trace.shared_tensors:
        return NkiTensor(trace.builder.full_view(trace.shared_tensors[shared_key]))
    addr = None if address is None else [int(a) for a in address]
    tid = _trace.core_call(trace.builder.add_tensor, name or "", buffer.name, str(dtype),
                           shape, addr, loc)
    if shared_key:
        trace.shared_tensors[shared_key] = tid
    return NkiTensor(trace.builder.full_view(tid))


def load_scalar(src, loc):
    """A new register holding the single element of tensor `src` (register_load)."""
    reg = VirtualRegister(new_register())
    _append("register_load", {"dst": ("reg", reg.id), "src": src._view}, loc)
    return reg


class ds:
    """nl.ds(start, size): the slice start:start+size. start may be a register expression (a
    runtime offset); size is a Python int."""

    __slots__ = ("start", "size")

    def __init__(self, start, size):
        self.start = start if isinstance(start, RegExpr) else int(start)
        self.size = int(size)

    def __repr__(self):
        return f"ds({self.start}, {self.size})"


def _static_slice(start, stop, loc):
    """A slice whose bounds may be register expressions: (start const, stop const, runtime part)."""
    if not isinstance(start, RegExpr) and not isinstance(stop, RegExpr):
        return start, stop, None
    if start is None or stop is None:
        raise user_error("view-index", "a slice with a register bound needs both bounds, e.g. "
                         "t[i * 128:(i + 1) * 128] or nl.ds(i * 128, 128)", loc)
    size = RegExpr.of(stop) - start
    if size.terms:
        raise user_error("view-index", "a slice's size must be known while tracing (stop - start may not "
                         "depend on a register); use nl.ds(start, size)", loc)
    return 0, size.const, RegExpr.of(start)


def _subscript(item, loc):
    """(subscript for the C++ view algebra, runtime start or None). A runtime subscript indexes
    from 0 statically; its whole start (register terms and constant) is applied afterwards, so a
    negative constant (t[i - 1]) is an offset, not Python's from-the-end index."""
    if isinstance(item, ds) and isinstance(item.start, RegExpr):
        return ("slice", 0, item.size, 1), item.start
    if isinstance(item, ds):
        return ("slice", item.start, item.start + item.size, 1), None
    if isinstance(item, slice):
        if item.step not in (None, 1) and (isinstance(item.start, RegExpr) or isinstance(item.stop, RegExpr)):
            raise user_error("view-index", "a slice with a register bound must have step 1", loc)
        start, stop, runtime = _static_slice(item.start, item.stop, loc)
        return ("slice", start, stop, item.step), runtime
    if isinstance(item, RegExpr):
        return ("int", 0), item
    if isinstance(item, numbers.Integral):
        return ("int", int(item)), None
    raise user_error(
        "view-index",
        f"cannot index a tensor with {item!r}; use ints, slices, nl.ds(start, size) or registers",
        loc,
    )


def _key(key, ndim, loc):
    """The C++ key of a subscript tuple without register offsets (the legacy facade's)."""
    subscripts, runtime = _key_parts(key, ndim, loc)
    if runtime:
        raise user_error("view-index", "register offsets need the current API (knit.language)", loc)
    return subscripts


def _key_parts(key, ndim, loc):
    """The C++ key and the runtime offsets [(dim, RegExpr)] of a subscript tuple."""
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        at = key.index(Ellipsis)
        fill = ndim - (len(key) - 1)
        key = key[:at] + (slice(None),) * max(fill, 0) + key[at + 1:]
    parts = [_subscript(k, loc) for k in key]
    return [p for p, _ in parts], [(dim, r) for dim, (_, r) in enumerate(parts) if r is not None]


def _with_runtime_offset(builder, view, dim, expr, loc):
    """view moved along dim by expr: its register terms (ir add_dynamic), then its constant."""
    for reg, coeff in expr.terms.items():
        view = _trace.core_call(_core.view_add_dynamic, builder, view, dim, reg, coeff, loc)
    if expr.const and expr.terms:
        view = _trace.core_call(_core.view_shift_dynamic, builder, view, dim, expr.const, loc)
    return view


class NkiTensor:
    """A tensor handle: storage (one kernel tensor) plus a strided view of it."""

    __slots__ = ("_view",)
    # NumPy scalars on the left (np.float32(2) * t) defer to NkiTensor's reflected operators.
    __array_ufunc__ = None

    def __init__(self, view):
        self._view = view

    # ---- attributes ---------------------------------------------------------------------------
    @property
    def shape(self):
        return tuple(self._view.shape)

    @property
    def dtype(self):
        return ALL[self._view.dtype]

    @property
    def ndim(self):
        return len(self._view.shape)

    @property
    def size(self):
        n = 1
        for s in self._view.shape:
            n *= s
        return n

    @property
    def offset(self):
        return self._view.offset

    @property
    def strides(self):
        return tuple(step for step, _ in self._view.pattern)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def _info(self):
        return _trace.current().builder.tensor_info(self._view.tensor)

    @property
    def name(self):
        return self._info[0]

    @property
    def buffer(self):
        return buffer_named(self._info[1])

    @property
    def data(self):  # G3 grids expose .data; on a plain tensor it is the tensor itself
        return self

    def get_pattern(self):
        return [list(p) for p in self._view.pattern]

    def is_contiguous(self):
        step = 1
        dims = self._view.pattern[1:] if self.buffer.on_chip else self._view.pattern
        for s, n in reversed(dims):
            if n != 1 and s != step:
                return False
            step *= n
        return True

    def __repr__(self):
        try:
            where = f"{self.buffer.name} "
        except Exception:
            where = ""
        return f"NkiTensor({where}{self.dtype}{list(self.shape)})"

    # ---- views ------------------------------------------------------------------------------
    def _derive(self, fn, *args):
        loc = user_location()
        b = _trace.current().builder
        return NkiTensor(_trace.core_call(fn, b, self._view, *args, loc))

    def __getitem__(self, key):
        loc = user_location()
        subscripts, runtime = _key_parts(key, self.ndim, loc)
        b = _trace.current().builder
        view = self._view
        for dim, expr in runtime:
            if dim < len(view.shape):
                sub = subscripts[dim]
                check_subscript(expr, view.shape[dim], sub[2] if sub[0] == "slice" else 1)
            view = _with_runtime_offset(b, view, dim, expr, loc)
        return NkiTensor(_trace.core_call(_core.view_index, b, view, subscripts, loc))

    def _derive_at(self, loc, fn, *args):
        b = _trace.current().builder
        return NkiTensor(_trace.core_call(fn, b, self._view, *args, loc))

    def __setitem__(self, key, value):
        """t[key] = value: a copy into the view (dma_copy when HBM is involved, else tensor_copy),
        or a fill when value is a number."""
        loc = user_location()
        dst = self[key]
        if isinstance(value, NkiTensor):
            on_chip = dst.buffer.on_chip and value.buffer.on_chip
            _append("tensor_copy" if on_chip else "dma_copy", {"dst": dst._view, "src": value._view}, loc)
        elif isinstance(value, numbers.Number) and isinstance(value, SupportsFloat):  # float() takes no complex
            _append("memset", {"dst": dst._view, "value": float(value)}, loc)
        else:
            raise user_error("view-assign", f"cannot assign {type(value).__name__} to a tensor view", loc)

    def slice(self, dim, start, end, step=1):
        return self._derive(_core.view_slice, int(dim), int(start), int(end), int(step))

    def select(self, dim, index):
        if isinstance(index, NkiTensor):  # a 1x1 int tensor: a runtime index
            index = load_scalar(index, user_location())
        if isinstance(index, RegExpr):
            loc = user_location()
            b = _trace.current().builder
            if 0 <= int(dim) < self.ndim:
                check_subscript(index, self.shape[int(dim)], 1)
            view = _with_runtime_offset(b, self._view, int(dim), index, loc)
            return NkiTensor(_trace.core_call(_core.view_select, b, view, int(dim), 0, loc))
        return self._derive(_core.view_select, int(dim), int(index))

    def permute(self, *dims):
        order = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return self._derive(_core.view_permute, [int(d) for d in order])

    def broadcast(self, dim, size):
        return self._derive(_core.view_broadcast, int(dim), int(size))

    def expand_dim(self, dim):
        return self._derive(_core.view_expand_dim, int(dim))

    def squeeze_dim(self, dim):
        return self._derive(_core.view_squeeze_dim, int(dim))

    def reshape(self, *shape):
        sizes = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return self._derive(_core.view_reshape, [int(s) for s in sizes])

    def reshape_dim(self, dim, shape):
        return self._derive(_core.view_reshape_dim, int(dim), [int(s) for s in shape])

    def flatten_dims(self, start_dim, end_dim):
        return self._derive(_core.view_flatten_dims, int(start_dim), int(end_dim))

    def view(self, dtype):
        return self._derive(_core.view_bitcast, str(to_dtype(dtype)))

    reinterpret_cast = view

    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0, dtype=None):
        """A raw access pattern over the tensor's storage. scalar_offset (an int, a register, an
        NkiScalar or a 1x1 int tensor) moves the start along pattern dim `indirect_dim`;
        vector_offset (an int32/uint32 SBUF tensor, one entry per index of that dim) makes the
        dim indirect: its i-th index becomes vector_offset's i-th element (DMA gather/scatter)."""
        loc = user_location()
        b = _trace.current().builder
        pattern = [list(p) for p in pattern]
        d = None if dtype is None else str(to_dtype(dtype))
        dim = int(indirect_dim)
        runtime = None
        if scalar_offset is not None:
            if isinstance(scalar_offset, NkiTensor):
                scalar_offset = load_scalar(scalar_offset, loc)
            expr = RegExpr.of(scalar_offset)
            needs_value(expr)  # a rolled loop's index: unrolled (an ap offset has no bounds to check here)
            if not 0 <= dim < len(pattern):
                raise user_error("view-ap", f"indirect_dim {dim} is not a dim of the {len(pattern)}-D pattern", loc)
            if expr.const:
                base = offset if offset is not None else self._view.offset
                offset = base + expr.const * pattern[dim][0]
            runtime = RegExpr(0, expr.terms)
        view = _trace.core_call(_core.view_ap, b, self._view, pattern, offset, d, loc)
        if runtime is not None:
            view = _with_runtime_offset(b, view, dim, runtime, loc)
        if vector_offset is not None:
            if not isinstance(vector_offset, NkiTensor):
                raise user_error("indirect", "vector_offset must be a tensor of row indices (int32/uint32, in SBUF)",
                                 loc)
            view = _trace.core_call(_core.view_indirect, b, view, dim, vector_offset._view, loc)
        return NkiTensor(view)

    def is_indirect(self):
        return self._view.is_indirect

    def indirect(self, index, num_elem=None):
        """NC-v4 compute indirection: a (P, num_elem) view of this SBUF/PSUM tensor whose column i
        of partition p is the column at free offset index[g*G + i % G, i // G] (g = p // G; G = 16,
        or 32 on the Tensor Engine). As an input it gathers, as dst it scatters (docs/language.md,
        "Indirection"). index: an SBUF (P, K) uint16/uint32/int32 tile; num_elem defaults to its size."""
        loc = user_location()
        if not isinstance(index, NkiTensor):
            raise user_error("indirect", "index must be an SBUF tile of uint16, uint32 or int32 offsets", loc)
        n = None if num_elem is None else int(num_elem)
        b = _trace.current().builder
        return NkiTensor(_trace.core_call(_core.view_column_indirect, b, self._view, index._view, n, loc))

    def vector_select(self, dim, vector_offset):
        """Rows of an HBM tensor picked by an SBUF index tile (P, 1): the result has P partitions,
        row p being self[vector_offset[p]] (a DMA gather / scatter operand)."""
        loc = user_location()
        if int(dim) != 0:
            raise user_error("indirect", "vector_select works on dim 0 only", loc)
        if not isinstance(vector_offset, NkiTensor):
            raise user_error("indirect", "vector_offset must be an int32/uint32 SBUF tensor of row indices", loc)
        b = _trace.current().builder
        pattern = [list(p) for p in self._view.pattern]
        pattern[0][1] = vector_offset.size
        view = _trace.core_call(_core.view_ap, b, self._view, pattern, None, None, loc)
        return NkiTensor(_trace.core_call(_core.view_indirect, b, view, 0, vector_offset._view, loc))

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None):
        """einops-style: src_pattern names each dim (a tuple groups dims that are split), e.g.
        ``(('b', ('h', 'w')), ('b', 'w', 'h'), {'h': 4})``. Lowers to reshape + permute + reshape."""
        loc = user_location()
        fixed = dict(fixed_sizes or {})
        names, split_shape = [], []
        for dim_size, entry in zip(self.shape, src_pattern):
            group = list(entry) if isinstance(entry, (tuple, list)) else [entry]
            known = 1
            for n in group:
                known *= fixed.get(n, 1)
            unknown = [n for n in group if n not in fixed]
            if len(unknown) > 1:
                raise user_error("view-rearrange", f"rearrange cannot infer the sizes of {unknown}", loc)
            for n in group:
                size = fixed[n] if n in fixed else dim_size // known
                fixed.setdefault(n, size)
                names.append(n)
                split_shape.append(size)
        if len(src_pattern) != self.ndim:
            raise user_error("view-rearrange", f"src_pattern names {len(src_pattern)} dims, tensor has {self.ndim}",
                             loc)
        t = self._derive_at(loc, _core.view_reshape, split_shape)
        flat_dst = [n for e in dst_pattern for n in (e if isinstance(e, (tuple, list)) else [e])]
        if sorted(flat_dst) != sorted(names):
            raise user_error("view-rearrange", "dst_pattern must use exactly the names of src_pattern", loc)
        t = t._derive_at(loc, _core.view_permute, [names.index(n) for n in flat_dst])
        out_shape = []
        for e in dst_pattern:
            dst_group = e if isinstance(e, (tuple, list)) else [e]
            size = 1
            for n in dst_group:
                size *= fixed[n]
            out_shape.append(size)
        return t._derive_at(loc, _core.view_reshape, out_shape)

    # Arithmetic operators: the element-wise nl.* calls (the legacy facade overrides _binary).
    def _binary(self, other, name, reverse=False):
        return binary(OPS[name], other, self) if reverse else binary(OPS[name], self, other)

    def __add__(self, o): return self._binary(o, "add")
    def __radd__(self, o): return self._binary(o, "add", True)
    def __sub__(self, o): return self._binary(o, "subtract")
    def __rsub__(self, o): return self._binary(o, "subtract", True)
    def __mul__(self, o): return self._binary(o, "multiply")
    def __rmul__(self, o): return self._binary(o, "multiply", True)
    def __truediv__(self, o): return self._binary(o, "divide")
    def __rtruediv__(self, o): return self._binary(o, "divide", True)
    def __pow__(self, o): return self._binary(o, "power")
    def __rpow__(self, o): return self._binary(o, "power", True)
    def __mod__(self, o): return self._binary(o, "mod")
    def __lshift__(self, o): return self._binary(o, "left_shift")
    def __rshift__(self, o): return self._binary(o, "right_shift")
    def __lt__(self, o): return self._binary(o, "less")
    def __le__(self, o): return self._binary(o, "less_equal")
    def __gt__(self, o): return self._binary(o, "greater")
    def __ge__(self, o): return self._binary(o, "greater_equal")
    def __and__(self, o): return self._binary(o, "bitwise_and")
    def __or__(self, o): return self._binary(o, "bitwise_or")
    def __xor__(self, o): return self._binary(o, "bitwise_xor")

    def __neg__(self):
        return scalar_unary("negative", self, "multiply", -1.0)

    def __invert__(self):
        return scalar_unary("invert", self, "invert", None)

    def __bool__(self):
        raise TypeError(
            "the truth value of an NkiTensor depends on runtime data; Python control flow cannot branch "
            "on tensor values (compute a mask with nl.* comparisons and use nl.where / nisa.select_reduce)"
        )


# A tensor's indexing and view methods are API too: bad arguments are Knit errors at the kernel's line.
for _method, _label in (("__getitem__", "tensor[...]"), ("__setitem__", "tensor[...] ="), ("ap", "ap"),
                        ("broadcast", "broadcast"), ("expand_dim", "expand_dim"), ("flatten_dims", "flatten_dims"),
                        ("permute", "permute"), ("rearrange", "rearrange"), ("reshape", "reshape"),
                        ("reshape_dim", "reshape_dim"), ("select", "select"), ("slice", "slice"),
                        ("squeeze_dim", "squeeze_dim"), ("view", "view"), ("reinterpret_cast", "view"),
                        ("vector_select", "vector_select")):
    _label = _label if _label.startswith("tensor") else f"NkiTensor.{_label}"
    setattr(NkiTensor, _method, argument_boundary(_label)(getattr(NkiTensor, _method)))


# ---- element-wise arithmetic (nki-api.md §2.5, G2 rules) ---------------------------------------


def new_tile(shape, dtype, name, buffer=sbuf):
    """A new (uninitialized) on-chip tile, SBUF unless `buffer` says otherwise."""
    return new_tensor(tuple(shape), dtype, buffer, name, None, user_location())


def is_number(v):
    return isinstance(v, (numbers.Number, np.bool_)) and not isinstance(v, complex)


def is_column(c, partitions):
    """c is a [P, 1] tile (every free dim 1) with `partitions` partitions."""
    return (isinstance(c, NkiTensor) and c.ndim >= 2 and c.shape[0] == partitions
            and all(s == 1 for s in c.shape[1:]))


def dtype_of(v):
    """A tile's dtype, or a scalar's by the weak-scalar rule (_promotion.scalar_dtype)."""
    return v.dtype if isinstance(v, NkiTensor) else scalar_dtype(v)


def binary(op, x, y, dtype=None):
    """nl.<op>(x, y): equal shapes -> tensor_tensor; a number or a [P, 1] column on either side ->
    tensor_scalar (reverse0 when it is the left operand); anything else is an error. The result
    is a new SBUF tile of the promoted dtype unless `dtype` is given."""
    loc = user_location()
    for v, what in ((x, "x"), (y, "y")):
        if not isinstance(v, NkiTensor) and not is_number(v):
            raise user_error("operand", f"nl.{op.name}: {what} must be a tensor or a number, got "
                             f"{type(v).__name__}", loc)
    if not isinstance(x, NkiTensor) and not isinstance(y, NkiTensor):
        raise user_error("operand", f"nl.{op.name} needs at least one tensor operand", loc)
    out_dtype = promote(dtype_of(x), dtype_of(y)) if dtype is None else to_dtype(dtype)
    if isinstance(x, NkiTensor) and isinstance(y, NkiTensor) and x.shape == y.shape:
        out = new_tile(x.shape, out_dtype, op.name)
        _append("tensor_tensor", {"dst": out._view, "data1": x._view, "data2": y._view, "op": op.alu}, loc)
        return out
    if isinstance(x, NkiTensor) and (is_number(y) or is_column(y, x.shape[0])):
        data, operand, reverse = x, y, False
    elif isinstance(y, NkiTensor) and (is_number(x) or is_column(x, y.shape[0])):
        data, operand, reverse = y, x, True
    else:
        raise user_error("broadcast", f"nl.{op.name}: operand shapes {x.shape} and {y.shape} do not match; "
                         "element-wise operands need equal shapes, or one may be a number or a [P, 1] column "
                         "(broadcast other size-1 free dims explicitly with nl.broadcast_to)", loc)
    out = new_tile(data.shape, out_dtype, op.name)
    operand = operand._view if isinstance(operand, NkiTensor) else float(operand)
    _append("tensor_scalar", {"dst": out._view, "data": data._view, "op0": op.alu, "operand0": operand,
                              "reverse0": reverse}, loc)
    return out


def scalar_unary(name, x, alu, operand, dtype=None):
    """nl.<name>(x) as one tensor_scalar `x alu operand` into a new tile (x's dtype unless given)."""
    loc = user_location()
    if not isinstance(x, NkiTensor):
        raise user_error("operand", f"nl.{name} needs a tensor, got {type(x).__name__}", loc)
    out = new_tile(x.shape, x.dtype if dtype is None else to_dtype(dtype), name)
    _append("tensor_scalar", {"dst": out._view, "data": x._view, "op0": alu, "operand0": operand}, loc)
    return out
