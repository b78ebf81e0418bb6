"""knit.language (``import knit.language as nl``): NKI's nki.language — buffers, dtypes, tensor
creation, tile sizes, loops, SPMD ids, operators and the nl.* convenience wrappers."""
from __future__ import annotations

import contextlib
import numbers
import warnings
from typing import TYPE_CHECKING as _TYPE_CHECKING

import numpy as np

from . import _core, _rolled, _schedule, _trace, _types as _t, _wrappers, isa
from ._buffers import (  # noqa: F401  (nl.hbm, ...)
    Buffer as _Buffer,  # noqa: F401
    buffer_named,
    hbm,
    psum,
    sbuf,
    shared_hbm,
)
from ._dtypes import ALL as _ALL_DTYPES, dtype as dtype, to_dtype
from ._keywords import checked as _checked_by
from ._operators import Op as Op, operator_table
from ._random import dropout, rand, random_seed  # noqa: F401  (nl.rand, ...)
from ._register import NkiScalar, RegExpr, VirtualRegister, int_operand, is_runtime, new_register  # noqa: F401
from ._source import user_frame, user_location
from ._tensor import NkiTensor, ds as ds, new_tensor
from ._wrappers import (  # noqa: F401  (the nl.* convenience wrappers)
    all,
    broadcast_to,
    ceil,
    cos,
    expand_dims,
    floor,
    gather_flattened,
    load,
    load_transpose2d,
    logical_not,
    matmul,
    max,
    mean,
    min,
    negative,
    prod,
    rms_norm,
    softmax,
    store,
    sum,
    tan,
    transpose,
    trunc,
    var,
    where,
)
from .errors import user_error

if _TYPE_CHECKING:  # typing's names are not part of the module's API
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import Any

_checked = _checked_by("nl")  # unknown keyword arguments are errors (knit/_keywords.py)

# ---- dtypes -----------------------------------------------------------------------------------
bool_ = _ALL_DTYPES["bool"]
int8, int16, int32 = _ALL_DTYPES["int8"], _ALL_DTYPES["int16"], _ALL_DTYPES["int32"]
uint8, uint16, uint32 = _ALL_DTYPES["uint8"], _ALL_DTYPES["uint16"], _ALL_DTYPES["uint32"]
float16, bfloat16, float32 = _ALL_DTYPES["float16"], _ALL_DTYPES["bfloat16"], _ALL_DTYPES["float32"]
tfloat32 = _ALL_DTYPES["tfloat32"]
float8_e4m3, float8_e5m2 = _ALL_DTYPES["float8_e4m3"], _ALL_DTYPES["float8_e5m2"]
# trn3: OCP fp8, the MX scale type and the packed MX words (four sub-elements per 32-bit word).
float8_e4m3fn, float8_e8m0fnu = _ALL_DTYPES["float8_e4m3fn"], _ALL_DTYPES["float8_e8m0fnu"]
float8_e5m2_x4, float8_e4m3fn_x4 = _ALL_DTYPES["float8_e5m2_x4"], _ALL_DTYPES["float8_e4m3fn_x4"]
float4_e2m1fn_x4 = _ALL_DTYPES["float4_e2m1fn_x4"]


# ---- buffers ----------------------------------------------------------------------------------
private_hbm = hbm


class MemoryRegion:
    """NKI's enum of memory regions; its members are the buffer objects themselves, so
    ``buffer=nl.MemoryRegion.sbuf`` and ``buffer=nl.sbuf`` are the same thing."""

    sbuf = sbuf
    psum = psum
    private_hbm = hbm
    shared_hbm = shared_hbm


@_checked
def is_hbm(b: object) -> bool:
    return b in (hbm, shared_hbm)


@_checked
def is_sbuf(b: object) -> bool:
    return b is sbuf


@_checked
def is_psum(b: object) -> bool:
    return b is psum


@_checked
def is_on_chip(b: object) -> bool:
    return b in (sbuf, psum)


class _TargetSizes(type):
    """The nl.tile_size fields that depend on the target (SBUF size per generation): read when
    used, for the kernel being traced (else NEURON_PLATFORM_TARGET_OVERRIDE, else trn2)."""

    def __getattr__(cls, name: str) -> int:
        if name not in _SBUF_FIELDS:
            raise AttributeError(f"nl.tile_size has no field {name!r}")
        target = _trace.current().target if _trace.active() else isa.target_from_env()
        return _SBUF_FIELDS[name](_core.target_info(target))


# Per-partition SBUF bytes are the whole partition (24 / 28 / 32 MiB over 128 partitions on
# trn1 / trn2 / trn3): Knit's allocator may use all of it. The alignments are the ones its
# allocator gives tensors (NKI leaves the values unstated). total_available_sbuf_size is NKI's
# deprecated name for the per-partition size (despite its name).
_SBUF_FIELDS = {
    "sbuf_fmax_bytes": lambda info: info["sbuf_partition_bytes"],
    "sbuf_fmax": lambda info: info["sbuf_partition_bytes"] // 4,
    "sbuf_size_bytes": lambda info: info["sbuf_partition_bytes"] * 128,
    "total_available_sbuf_size": lambda info: info["sbuf_partition_bytes"],
    "sbuf_min_align": lambda info: info["sbuf_align"],
    "psum_min_align": lambda info: info["psum_bank_bytes"],
}


class tile_size(metaclass=_TargetSizes):
    """Hardware tile limits as plain ints (NKI's nl.tile_size), the C++ core's values
    (knit._core.tile_size(); ir::tile_size in C++); the SBUF fields depend on the target."""

    pmax: int
    psum_fmax: int
    psum_bank_fmax: int
    psum_bank_fmax_bytes: int
    psum_num_banks: int
    gemm_stationary_fmax: int
    gemm_moving_fmax: int
    bn_stats_fmax: int


for _limit, _value in _core.tile_size().items():
    setattr(tile_size, _limit, _value)
del _limit, _value


# ---- tensor creation --------------------------------------------------------------------------
@_checked
def ndarray(shape: _t.ShapeLike, dtype: _t.DTypeLike, buffer: _Buffer = sbuf, name: str = "",
            address: Sequence[int] | None = None) -> NkiTensor:
    """An uninitialized tensor (fresh contents are NaN / 4 in the simulator)."""
    return new_tensor(shape, dtype, buffer, name, address, user_location())


def _filled(shape, dtype_, buffer, name, value, loc):
    t = new_tensor(shape, dtype_, buffer, name, None, loc)
    if not t.buffer.on_chip:
        raise user_error("buffer", "nl.zeros/ones/full create on-chip tiles; fill HBM tensors with dma_copy", loc)
    # The tensor's name labels the instruction that fills it, so kernel.with_schedule can name it
    # (NKI: tensor names are "used in scheduling"; how is unspecified, nki-0.6-additions.md §4.1).
    isa.memset(t, value, name=name or None)
    return t


@_checked
def zeros(shape: _t.ShapeLike, dtype: _t.DTypeLike, buffer: _Buffer = sbuf, name: str = "") -> NkiTensor:
    return _filled(shape, dtype, buffer, name, 0, user_location())


@_checked
def ones(shape: _t.ShapeLike, dtype: _t.DTypeLike, buffer: _Buffer = sbuf, name: str = "") -> NkiTensor:
    return _filled(shape, dtype, buffer, name, 1, user_location())


@_checked
def full(shape: _t.ShapeLike, fill_value: float, dtype: _t.DTypeLike, buffer: _Buffer = sbuf,
         name: str = "") -> NkiTensor:
    return _filled(shape, dtype, buffer, name, fill_value, user_location())


@_checked
def zeros_like(x: NkiTensor, dtype: _t.DTypeLike | None = None, buffer: _Buffer | None = None,
               name: str = "") -> NkiTensor:
    return _filled(x.shape, dtype or x.dtype, buffer or x.buffer, name, 0, user_location())


@_checked
def empty_like(x: NkiTensor, dtype: _t.DTypeLike | None = None, buffer: _Buffer | None = None,
               name: str = "") -> NkiTensor:
    return new_tensor(x.shape, dtype or x.dtype, buffer or x.buffer, name, None, user_location())


@_checked
def shared_constant(constant: np.ndarray | str, dtype: _t.DTypeLike | None = None) -> NkiTensor:
    """A constant baked into the kernel (a NumPy array or the path of a .npy file). Knit passes it
    to the kernel as a hidden read-only HBM argument."""
    loc = user_location()
    try:
        array = np.load(constant, allow_pickle=False) if isinstance(constant, str) else np.asarray(constant)
    except (OSError, ValueError) as e:
        raise user_error("shared-constant", f"cannot read the constant file {constant!r}: {e}; give a NumPy array "
                         "or the path of a .npy file", loc) from None
    if dtype is not None:
        array = array.astype(to_dtype(dtype).numpy)
    trace = _trace.current()
    name = f"constant{len(trace.constants)}"
    tid = _trace.core_call(trace.builder.add_param, name, str(to_dtype(array.dtype)), list(array.shape), loc)
    trace.constants.append((tid, np.ascontiguousarray(array)))
    return NkiTensor(trace.builder.full_view(tid))


@_checked
def shared_identity_matrix(n: int, dtype: _t.DTypeLike = uint8, dst: object = None) -> NkiTensor:
    dt = to_dtype(dtype)
    if not isinstance(n, numbers.Integral) or isinstance(n, bool) or not 0 < n * n * dt.itemsize <= _MAX_CONSTANT_BYTES:
        raise user_error("shared-constant", f"n = {n!r}: the identity matrix's size must be a positive int, of at "
                         f"most {_MAX_CONSTANT_BYTES >> 20} MiB", user_location())
    return shared_constant(np.eye(int(n), dtype=dt.numpy))


_MAX_CONSTANT_BYTES = 1 << 30  # an identity matrix Knit builds on the host


# ---- loops and SPMD ---------------------------------------------------------------------------
@_checked
def affine_range(start: int, stop: int | None = None, step: int = 1) -> Iterable[Any]:
    """A host loop: Python's range (NKI 0.7: a deprecated alias of range). As the iterable of a
    `for` statement it is traced once and expanded in C++ when it can be (knit/_rolled.py), with
    the loop index a symbol; otherwise (or with KNIT_ROLL=0) it unrolls in Python."""
    r = range(start) if stop is None else range(start, stop, step)
    return _rolled.loop(r, user_frame())  # plain `r` unless the trace rolls loops (KNIT_ROLL)


sequential_range = static_range = affine_range


def _block(opname, label=None, **fields):
    """Opens a device block (loop / while / if) at the user's line; returns a closer."""
    loc = user_location()
    trace = _trace.current()
    if opname in ("loop", "while"):
        _schedule.check_loop_allowed(trace, "nl.while_loop" if opname == "while" else "a device loop (nl.fori_loop / "
                                     "nl.dynamic_range)", loc)
    index = _trace.core_call(trace.builder.append, opname, fields, loc, label or "")
    trace.blocks.append(index)

    def close(kind="end"):
        _trace.core_call(trace.builder.append, kind, {}, loc, "")
        if kind == "end":
            trace.blocks.pop()

    return close


@_checked
def dynamic_range(start: _t.IntLike, stop: _t.IntLike | None = None, step: int = 1) -> Iterator[VirtualRegister]:
    """An on-device loop: the body is traced once and runs on the device; the loop variable is a
    register. start / stop may be ints or registers; step is a positive int. Deprecated in NKI 0.6
    (a DeprecationWarning, as NKI warns): use nl.fori_loop."""
    warnings.warn(DeprecationWarning("nl.dynamic_range is deprecated since NKI 0.6; use nl.fori_loop(lower, upper, "
                                     "body_fun) instead"), stacklevel=3)  # past the keyword-check wrapper
    return _device_loop(start, stop, step, user_location())


def _device_loop(start, stop, step, loc):
    """The loop of dynamic_range and fori_loop (a generator: the body runs between its yield)."""
    if stop is None:
        start, stop = 0, start
    if not isinstance(step, numbers.Integral) or isinstance(step, bool) or step < 1:
        raise user_error("loop-step", f"dynamic_range step must be a positive Python int, got {step!r}", loc)
    iv = VirtualRegister(new_register())
    close = _block("loop", iv=("reg", iv.id), start=int_operand(start, "start", loc),
                   stop=int_operand(stop, "stop", loc), step=int(step))
    yield iv
    close()  # not reached after `break` / an error: the verifier then reports the open loop


@_checked
def fori_loop(lower: _t.IntLike, upper: _t.IntLike, body_fun: Callable[[Any], Any], step: int = 1,
              unroll: bool = False) -> None:
    """Runs body_fun(i) for i in [lower, upper) by step on the device (body traced once, i a
    register). unroll=True with int bounds unrolls at trace time instead (i a Python int)."""
    if unroll:
        for b in (lower, upper):
            if is_runtime(b):
                raise user_error("unsupported", "fori_loop(unroll=True) needs Python int bounds", user_location())
        for i in range(lower, upper, step):
            body_fun(i)
        return
    for reg in _device_loop(lower, upper, step, user_location()):
        body_fun(reg)


@_checked
def while_loop(init: _t.IntLike, body_fun: Callable[[Any], Any]) -> VirtualRegister:
    """Runs body_fun(cond) while the condition register is non-zero (checked before each
    iteration); body_fun returns the next condition (a register or an int). Returns the register."""
    loc = user_location()
    cond = VirtualRegister(new_register())
    trace = _trace.current()
    _trace.core_call(trace.builder.append, "register_move", {"dst": ("reg", cond.id),
                                                             "src": int_operand(init, "init", loc)}, loc, "")
    close = _block("while", cond=("reg", cond.id))
    nxt = body_fun(cond)
    if nxt is None:
        raise user_error("while-loop", "the while_loop body must return the next condition (a register or int)", loc)
    _trace.core_call(trace.builder.append, "register_move", {"dst": ("reg", cond.id),
                                                             "src": int_operand(nxt, "body result", loc)}, loc, "")
    close()
    return cond


@_checked
def if_else(cond: _t.IntLike, then_fn: Callable[[], Any], else_fn: Callable[[], Any] | None = None) -> Any:
    """A runtime branch on a register (non-zero = true). A Python bool/int is decided while
    tracing, as NKI does."""
    if not isinstance(cond, RegExpr):  # decided while tracing
        if cond:
            return then_fn()
        return else_fn() if else_fn is not None else None
    reg = cond.register() if not isinstance(cond, VirtualRegister) else cond.id
    close = _block("if", cond=("reg", reg))
    then_fn()
    if else_fn is not None:
        close("else")
        else_fn()
    close()
    return None


@_checked
def no_reorder() -> contextlib.AbstractContextManager[None]:
    """Instructions issued inside the block (dynamically scoped: helper functions' too) run in
    program order; the engine program chains them with semaphore waits (knit/_schedule.py).
    Device loops may not open inside it."""
    return _schedule.no_reorder()


class NKIObject:
    """Base class of kernel configuration objects (plain Python objects while tracing)."""


@_checked
def program_id(axis: int = 0) -> int:
    """This instance's index along grid dim `axis` (instances are numbered row-major)."""
    trace = _trace.current()
    grid = trace.grid or (trace.num_programs,)
    index = trace.program_id
    for g in reversed(grid[int(axis) + 1:]):
        index //= g
    return index % grid[int(axis)]


@_checked
def num_programs(axes: int | Sequence[int] | None = 0) -> int:
    """Instances along grid dim `axes` (an int), or their product over a tuple of dims / None."""
    trace = _trace.current()
    grid = trace.grid or (trace.num_programs,)
    dims = range(len(grid)) if axes is None else (axes if isinstance(axes, (tuple, list)) else (axes,))
    n = 1
    for d in dims:
        n *= grid[int(d)]
    return n


@_checked
def program_ndim() -> int:
    return _trace.current().grid_ndim


@_checked
def device_print(print_prefix: str, tensor: NkiTensor) -> None:
    """Prints `tensor`'s values at this point of the kernel when the simulation finishes: the
    values are copied into a hidden output here and printed, with the prefix, after the run."""
    trace = _trace.current()
    loc = user_location()
    src = tensor
    if tensor.buffer is psum:
        src = new_tensor(tensor.shape, tensor.dtype, sbuf, "device_print_tile", None, loc)
        isa.tensor_copy(src, tensor)
    out = new_tensor(tensor.shape, tensor.dtype, shared_hbm, f"device_print:{print_prefix}", None, loc)
    isa.dma_copy(out, src)
    trace.prints.append((str(print_prefix), out._view.tensor))


# ---- operators --------------------------------------------------------------------------------
# Every operator object (usable as op= of knit.isa calls), each callable as its element-wise
# function when it has one (knit/_operators.py, knit/_wrappers.py).
OPS = operator_table(_wrappers.FUNCTIONS)
globals().update(OPS)

