"""knit.isa (``import knit.isa as nisa``): NKI's nki.isa, current (dst-first) API. Each call appends
one instruction to the kernel being traced; it is verified at once by the C++ verifier, so a
broken rule is reported at the calling line. Semantics live in C++ (docs/architecture.md)."""
from __future__ import annotations

import enum
import numbers
import os
from typing import TYPE_CHECKING as _TYPE_CHECKING

from . import _schedule, _trace, _types as _t
from ._keywords import checked as _checked_by
from ._operators import NUMPY_NAMES as _NUMPY_NAMES, OPS as _OPS, Op as _Op
from ._register import NkiScalar, RegExpr, VirtualRegister, int_operand, new_register  # noqa: F401
from ._schedule import NkiInstruction
from ._source import user_location
from ._tensor import NkiTensor
from .errors import NkiValidationError, user_error  # noqa: F401  (nisa.NkiValidationError)

if _TYPE_CHECKING:  # typing's names are not part of the module's API
    from collections.abc import Sequence

_checked = _checked_by("nisa")  # unknown keyword arguments are errors (knit/_keywords.py)


class engine(enum.IntEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


tensor_engine, scalar_engine, gpsimd_engine = engine.tensor, engine.scalar, engine.gpsimd
vector_engine, unknown_engine = engine.vector, engine.unknown


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.IntEnum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(enum.IntEnum):
    error = 0
    skip = 1


class matmul_perf_mode(enum.Enum):
    none = "none"
    double_row = "double_row"


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


# Types of the parameters: the enums under other names (parameters named engine=, oob_mode=, ...
# shadow the classes inside the functions).
_Engine = engine
_OobMode = oob_mode
_DgeMode = dge_mode
_ReduceCmd = reduce_cmd
_PerfMode = matmul_perf_mode

_TARGETS = {"trn1": "trn1", "inf2": "trn1", "gen2": "trn1", "trn2": "trn2", "gen3": "trn2", "trn3": "trn3",
            "gen4": "trn3"}


@_checked
def target_from_env(default: str = "trn2") -> str:
    """The target named by NEURON_PLATFORM_TARGET_OVERRIDE (read at call time), else `default`."""
    value = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "").strip().lower()
    return _TARGETS.get(value, default)


@_checked
def get_nc_version() -> nc_version:
    target = _trace.current().target if _trace.active() else target_from_env()
    return nc_version({"trn1": 2, "trn2": 3, "trn3": 4}[target])


@_checked
def get_nc_sub_version() -> int:
    return 0


# ---- operand conversion -----------------------------------------------------------------------
def _enum_name(value, cls, what, loc):
    if isinstance(value, cls):
        return value.name
    if isinstance(value, enum.Enum) and value.name in cls.__members__:
        return value.name
    raise user_error("operand", f"{what} must be a nisa.{cls.__name__} member, got {value!r}", loc)


def _op_name(op, kind, what, loc):
    """ALU op or activation function name of an nl.* operator (or a NumPy ufunc, legacy style)."""
    if op is None:
        return "bypass" if kind == "alu" else "copy"
    given = op
    if not isinstance(op, _Op):
        numpy_name = _NUMPY_NAMES.get(str(getattr(op, "__name__", "")))
        op = _OPS.get(numpy_name) if numpy_name else None
    name = getattr(op, kind, None) if op is not None else None
    if name is None:
        op = given
        expected = ("an ALU operator (nl.add, nl.maximum, ...)" if kind == "alu"
                    else "an activation function (nl.exp, ...)")
        raise user_error("alu-op" if kind == "alu" else "activation-op", f"{what}={op!r} is not {expected}", loc)
    return name


def _value(v, loc, what):
    if isinstance(v, NkiTensor):
        return v._view
    if v is None or isinstance(v, (bool, numbers.Number)):
        return v
    raise user_error("operand", f"{what} must be a tensor or a number, got {type(v).__name__}", loc)


def _emit_at(loc, opname, label=None, /, **fields):
    """Appends instruction `opname` with operand `fields` (NKI names) at the user's `loc`; returns
    its handle (for depends_on)."""
    trace = _trace.current()
    converted = {k: (_value(v, loc, k) if not isinstance(v, (str, list, tuple)) else v) for k, v in fields.items()}
    if label is not None and not isinstance(label, str):
        raise user_error("operand", f"name= must be a string, got {type(label).__name__}", loc)
    index = _trace.core_call(trace.builder.append, opname, converted, loc, label or "")
    return _schedule.issued(trace, index, label)


def _tensor(t, what, loc):
    if not isinstance(t, NkiTensor):
        raise user_error("operand", f"{what} must be a tensor (NkiTensor), got {type(t).__name__}", loc)
    return t


# ---- instructions (nki-api.md §3) --------------------------------------------------------------
@_checked
def dma_copy(dst: NkiTensor, src: NkiTensor, priority: int | None = None, oob_mode: _OobMode = oob_mode.error,
             dge_mode: _DgeMode = dge_mode.unknown, engine: _Engine = engine.unknown,
             name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "dma_copy", name, dst=_tensor(dst, "dst", loc), src=_tensor(src, "src", loc),
                    oob_mode=_enum_name(oob_mode, globals()["oob_mode"], "oob_mode", loc),
                    dge_mode=_enum_name(dge_mode, globals()["dge_mode"], "dge_mode", loc),
                    engine=_enum_name(engine, globals()["engine"], "engine", loc))


@_checked
def dma_transpose(dst: NkiTensor, src: NkiTensor, axes: Sequence[int] | None = None, priority: int | None = None,
                  dge_mode: _DgeMode = dge_mode.unknown, oob_mode: _OobMode = oob_mode.error,
                  name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "dma_transpose", name, dst=_tensor(dst, "dst", loc), src=_tensor(src, "src", loc),
                    axes=[int(a) for a in (axes or [])],
                    dge_mode=_enum_name(dge_mode, globals()["dge_mode"], "dge_mode", loc),
                    oob_mode=_enum_name(oob_mode, globals()["oob_mode"], "oob_mode", loc))


@_checked
def nc_matmul(dst: NkiTensor, stationary: NkiTensor, moving: NkiTensor, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False, accumulate: bool | None = None,
              tile_position: Sequence[int] | None = (), tile_size: Sequence[int] | None = (),
              perf_mode: _PerfMode = matmul_perf_mode.none, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    acc = "auto" if accumulate is None else ("on" if accumulate else "off")
    return _emit_at(loc, "nc_matmul", name,
                    dst=_tensor(dst, "dst", loc), stationary=_tensor(stationary, "stationary", loc),
             moving=_tensor(moving, "moving", loc), is_stationary_onezero=bool(is_stationary_onezero),
             is_moving_onezero=bool(is_moving_onezero), is_transpose=bool(is_transpose), accumulate=acc,
             tile_position=[int(x) for x in tile_position or ()], tile_size=[int(x) for x in tile_size or ()],
             perf_mode=str(getattr(perf_mode, "value", perf_mode)).replace("double_row_gen3", "double_row"))


@_checked
def nc_transpose(dst: NkiTensor, data: NkiTensor, engine: _Engine = engine.unknown,
                 name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "nc_transpose", name, dst=_tensor(dst, "dst", loc), data=_tensor(data, "data", loc),
                    engine=_enum_name(engine, globals()["engine"], "engine", loc))


@_checked
def activation(dst: NkiTensor, op: _t.OpLike, data: NkiTensor, bias: _t.Operand = None,
               scale: NkiTensor | float = 1.0, reduce_op: _t.OpLike | None = None,
               reduce_res: NkiTensor | None = None, reduce_cmd: _ReduceCmd = reduce_cmd.idle,
               name: str | None = None, *, alpha: float = 0.0) -> NkiInstruction:
    """dst = op(data * scale + bias); `alpha` (a Knit extension) is nl.prelu's slope."""
    loc = user_location()
    return _emit_at(loc, "activation", name, dst=_tensor(dst, "dst", loc), op=_op_name(op, "act", "op", loc),
                    data=_tensor(data, "data", loc), bias=bias, scale=scale,
                    reduce_op=_op_name(reduce_op, "alu", "reduce_op", loc), reduce_res=reduce_res,
                    reduce_cmd=_enum_name(reduce_cmd, globals()["reduce_cmd"], "reduce_cmd", loc),
                    alpha=float(alpha))


@_checked
def activation_reduce(dst: NkiTensor, op: _t.OpLike, data: NkiTensor, reduce_op: _t.OpLike | None,
                      reduce_res: NkiTensor | None, bias: _t.Operand = None, scale: NkiTensor | float = 1.0,
                      name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "activation_reduce", name, dst=_tensor(dst, "dst", loc), op=_op_name(op, "act", "op", loc),
                    data=_tensor(data, "data", loc), reduce_op=_op_name(reduce_op, "alu", "reduce_op", loc),
                    reduce_res=_tensor(reduce_res, "reduce_res", loc), bias=bias, scale=scale)


@_checked
def tensor_tensor(dst: NkiTensor, data1: NkiTensor, data2: NkiTensor, op: _t.OpLike, engine: _Engine = engine.unknown,
                  name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "tensor_tensor", name, dst=_tensor(dst, "dst", loc), data1=_tensor(data1, "data1", loc),
                    data2=_tensor(data2, "data2", loc), op=_op_name(op, "alu", "op", loc),
                    engine=_enum_name(engine, globals()["engine"], "engine", loc))


@_checked
def tensor_scalar(dst: NkiTensor, data: NkiTensor, op0: _t.OpLike, operand0: _t.Operand, reverse0: bool = False,
                  op1: _t.OpLike | None = None, operand1: _t.Operand = None, reverse1: bool = False,
                  engine: _Engine = engine.unknown, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "tensor_scalar", name, dst=_tensor(dst, "dst", loc), data=_tensor(data, "data", loc),
                    op0=_op_name(op0, "alu", "op0", loc), operand0=operand0, reverse0=bool(reverse0),
                    op1=_op_name(op1, "alu", "op1", loc), operand1=operand1, reverse1=bool(reverse1),
                    engine=_enum_name(engine, globals()["engine"], "engine", loc))


@_checked
def scalar_tensor_tensor(dst: NkiTensor, data: NkiTensor, op0: _t.OpLike, operand0: _t.Operand,
                         op1: _t.OpLike | None, operand1: NkiTensor, reverse0: bool = False, reverse1: bool = False,
                         name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "scalar_tensor_tensor", name, dst=_tensor(dst, "dst", loc), data=_tensor(data, "data", loc),
                    op0=_op_name(op0, "alu", "op0", loc), operand0=operand0, op1=_op_name(op1, "alu", "op1", loc),
                    operand1=_tensor(operand1, "operand1", loc), reverse0=bool(reverse0), reverse1=bool(reverse1))


def _axes(axis):
    return [int(a) for a in (axis if isinstance(axis, (tuple, list)) else [axis])]


@_checked
def tensor_reduce(dst: NkiTensor, op: _t.OpLike, data: NkiTensor, axis: int | Sequence[int], negate: bool = False,
                  keepdims: bool = False, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "tensor_reduce", name, dst=_tensor(dst, "dst", loc), op=_op_name(op, "alu", "op", loc),
                    data=_tensor(data, "data", loc), axis=_axes(axis), negate=bool(negate), keepdims=bool(keepdims))


@_checked
def tensor_partition_reduce(dst: NkiTensor, op: _t.OpLike, data: NkiTensor, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "tensor_partition_reduce", name,
                    dst=_tensor(dst, "dst", loc), op=_op_name(op, "alu", "op", loc),
             data=_tensor(data, "data", loc))


@_checked
def tensor_copy(dst: NkiTensor, src: NkiTensor, engine: _Engine = engine.unknown,
                name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "tensor_copy", name, dst=_tensor(dst, "dst", loc), src=_tensor(src, "src", loc),
                    engine=_enum_name(engine, globals()["engine"], "engine", loc))


@_checked
def tensor_copy_predicated(dst: NkiTensor, src: NkiTensor | float, predicate: NkiTensor,
                           reverse_pred: bool = False, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "tensor_copy_predicated", name, dst=_tensor(dst, "dst", loc), src=src,
                    predicate=_tensor(predicate, "predicate", loc), reverse_pred=bool(reverse_pred))


@_checked
def memset(dst: NkiTensor, value: float, engine: _Engine = engine.unknown, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "memset", name, dst=_tensor(dst, "dst", loc), value=float(value),
                    engine=_enum_name(engine, globals()["engine"], "engine", loc))


def _pattern(pattern):
    return [[int(step), int(num)] for step, num in pattern]


@_checked
def iota(dst: NkiTensor, pattern: Sequence[Sequence[int]], offset: int = 0, channel_multiplier: int = 0,
         name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "iota", name, dst=_tensor(dst, "dst", loc), pattern=_pattern(pattern), offset=int(offset),
                    channel_multiplier=int(channel_multiplier))


@_checked
def affine_select(dst: NkiTensor, pattern: Sequence[Sequence[int]], channel_multiplier: int, on_true_tile: NkiTensor,
                  on_false_value: float, cmp_op: _t.OpLike | None = None, *, offset: int = 0,
                  name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "affine_select", name, dst=_tensor(dst, "dst", loc), pattern=_pattern(pattern),
                    channel_multiplier=int(channel_multiplier), on_true_tile=_tensor(on_true_tile, "on_true_tile", loc),
                    on_false_value=float(on_false_value),
                    cmp_op=_op_name(cmp_op, "alu", "cmp_op", loc) if cmp_op is not None else "equal",
                    offset=int(offset))


@_checked
def select_reduce(dst: NkiTensor, predicate: NkiTensor, on_true: NkiTensor, on_false: _t.Operand,
                  reduce_res: NkiTensor | None = None, reduce_cmd: _ReduceCmd = reduce_cmd.idle,
                  reduce_op: _t.OpLike | None = None, reverse_pred: bool = False,
                  name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "select_reduce", name,
                    dst=_tensor(dst, "dst", loc), predicate=_tensor(predicate, "predicate", loc),
             on_true=_tensor(on_true, "on_true", loc), on_false=on_false, reduce_res=reduce_res,
             reduce_cmd=_enum_name(reduce_cmd, globals()["reduce_cmd"], "reduce_cmd", loc),
             reduce_op=_op_name(reduce_op, "alu", "reduce_op", loc) if reduce_op is not None else "maximum",
             reverse_pred=bool(reverse_pred))


@_checked
def range_select(dst: NkiTensor, on_true_tile: NkiTensor, comp_op0: _t.OpLike, comp_op1: _t.OpLike, bound0: NkiTensor,
                 bound1: NkiTensor, reduce_cmd: _ReduceCmd = reduce_cmd.reset_reduce,
                 reduce_res: NkiTensor | None = None, reduce_op: _t.OpLike | None = None, range_start: float = 0,
                 on_false_value: float = -3.4028234663852886e38, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "range_select", name, dst=_tensor(dst, "dst", loc),
                    on_true_tile=_tensor(on_true_tile, "on_true_tile", loc),
                    comp_op0=_op_name(comp_op0, "alu", "comp_op0", loc),
                    comp_op1=_op_name(comp_op1, "alu", "comp_op1", loc), bound0=_tensor(bound0, "bound0", loc),
                    bound1=_tensor(bound1, "bound1", loc),
                    reduce_cmd=_enum_name(reduce_cmd, globals()["reduce_cmd"], "reduce_cmd", loc),
                    reduce_res=reduce_res,
                    reduce_op=_op_name(reduce_op, "alu", "reduce_op", loc) if reduce_op is not None else "maximum",
                    range_start=float(range_start), on_false_value=float(on_false_value))


@_checked
def reciprocal(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "reciprocal", name, dst=_tensor(dst, "dst", loc), data=_tensor(data, "data", loc))


@_checked
def tensor_tensor_scan(dst: NkiTensor, data0: NkiTensor, data1: NkiTensor, initial: _t.Operand, op0: _t.OpLike,
                       op1: _t.OpLike | None, reverse0: bool = False, reverse1: bool = False,
                       name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "tensor_tensor_scan", name, dst=_tensor(dst, "dst", loc), data0=_tensor(data0, "data0", loc),
                    data1=_tensor(data1, "data1", loc), initial=initial, op0=_op_name(op0, "alu", "op0", loc),
                    op1=_op_name(op1, "alu", "op1", loc), reverse0=bool(reverse0), reverse1=bool(reverse1))


@_checked
def tensor_scalar_reduce(dst: NkiTensor, data: NkiTensor, op0: _t.OpLike, operand0: _t.Operand,
                         reduce_op: _t.OpLike | None, reduce_res: NkiTensor | None = None, reverse0: bool = False,
                         reduce_cmd: _ReduceCmd = reduce_cmd.reset_reduce, reduce_init: _t.Operand = None,
                         reduce_res_negate: bool = False, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "tensor_scalar_reduce", name, dst=_tensor(dst, "dst", loc), data=_tensor(data, "data", loc),
                    op0=_op_name(op0, "alu", "op0", loc), operand0=operand0,
                    reduce_op=_op_name(reduce_op, "alu", "reduce_op", loc), reduce_res=reduce_res,
                    reverse0=bool(reverse0),
                    reduce_cmd=_enum_name(reduce_cmd, globals()["reduce_cmd"], "reduce_cmd", loc),
                    reduce_init=reduce_init,
                    reduce_res_negate=bool(reduce_res_negate))


@_checked
def exponential(dst: NkiTensor, src: NkiTensor, max_value: _t.Operand = 0.0, reduce_res: NkiTensor | None = None,
                reduce_cmd: _ReduceCmd = reduce_cmd.idle, reduce_init: _t.Operand = 0.0,
                name: str | None = None) -> NkiInstruction:
    """dst = exp(src - max_value) on the Vector Engine (trn3), optionally summing each row into the
    Vector Engine accumulators (reduce_cmd) and reading them into reduce_res."""
    loc = user_location()
    return _emit_at(loc, "exponential", name, dst=_tensor(dst, "dst", loc), src=_tensor(src, "src", loc),
                    max_value=max_value, reduce_res=reduce_res,
                    reduce_cmd=_enum_name(reduce_cmd, globals()["reduce_cmd"], "reduce_cmd", loc),
                    reduce_init=reduce_init)


@_checked
def tensor_scalar_cumulative(dst: NkiTensor, src: NkiTensor, op0: _t.OpLike, op1: _t.OpLike, imm0: _t.Operand,
                             imm1: _t.Operand = None, reduce_cmd: _ReduceCmd = reduce_cmd.reset_reduce,
                             name: str | None = None) -> NkiInstruction:
    """Inclusive scan of each partition's row on the Vector Engine: reg = op1(op0(src, imm0), reg),
    dst = reg; reg starts at op1's identity (reset_reduce), the accumulator (reduce) or imm1
    (load_reduce), and ends in the Vector Engine accumulator."""
    loc = user_location()
    return _emit_at(loc, "tensor_scalar_cumulative", name, dst=_tensor(dst, "dst", loc), src=_tensor(src, "src", loc),
                    op0=_op_name(op0, "alu", "op0", loc), op1=_op_name(op1, "alu", "op1", loc), imm0=imm0, imm1=imm1,
                    reduce_cmd=_enum_name(reduce_cmd, globals()["reduce_cmd"], "reduce_cmd", loc))


@_checked
def nc_match_replace8(dst: NkiTensor, data: NkiTensor, vals: NkiTensor, imm: float,
                      dst_idx: NkiTensor | None = None, name: str | None = None) -> NkiInstruction:
    """vals' 8 slots, last first, each claim the first unclaimed position of data holding their
    value: dst = data with those positions set to imm; dst_idx = the positions (all ones if absent)."""
    loc = user_location()
    return _emit_at(loc, "nc_match_replace8", name, dst=_tensor(dst, "dst", loc), data=_tensor(data, "data", loc),
                    vals=_tensor(vals, "vals", loc), imm=float(imm),
                    dst_idx=None if dst_idx is None else _tensor(dst_idx, "dst_idx", loc))


@_checked
def nonzero_with_count(dst: NkiTensor, src: NkiTensor, index_offset: int = 0, padding_val: int = -1,
                       name: str | None = None) -> NkiInstruction:
    """GpSimd (trn2+): in partitions 0, 16, .., 112, the positions of src's nonzero elements
    (+ index_offset), then padding_val, then their count in dst's last column."""
    loc = user_location()
    return _emit_at(loc, "nonzero_with_count", name, dst=_tensor(dst, "dst", loc), src=_tensor(src, "src", loc),
                    index_offset=int(index_offset), padding_val=int(padding_val))


@_checked
def sequence_bounds(dst: NkiTensor, segment_ids: NkiTensor, name: str | None = None) -> NkiInstruction:
    """GpSimd: dst[0, 0, :] / dst[0, 1, :] = the start / exclusive end of each element's run of equal
    segment ids (n and -1 for the padding id 0)."""
    loc = user_location()
    return _emit_at(loc, "sequence_bounds", name, dst=_tensor(dst, "dst", loc),
                    segment_ids=_tensor(segment_ids, "segment_ids", loc))


@_checked
def topk(val_dst: NkiTensor, idx_dst: NkiTensor, src: NkiTensor, n: int, name: str | None = None) -> NkiInstruction:
    """GpSimd: per 16-partition group, the K = val_dst.shape[1] largest of the n bf16 values snaked
    over the group (position s at partition s % 16, column s // 16), ascending, and their positions."""
    loc = user_location()
    return _emit_at(loc, "topk", name, val_dst=_tensor(val_dst, "val_dst", loc),
                    idx_dst=_tensor(idx_dst, "idx_dst", loc),
                    src=_tensor(src, "src", loc), n=int(n))


@_checked
def activate2(dst: NkiTensor, op: _t.OpLike, data: NkiTensor, imm0: _t.Operand, imm1: _t.Operand,
              op0: _t.OpLike | None, op1: _t.OpLike | None, relu_param: _t.Operand = 0.0, reverse0: bool = False,
              reverse1: bool = False, reduce_op: _t.OpLike | None = None, reduce_res: NkiTensor | None = None,
              reduce_cmd: _ReduceCmd = reduce_cmd.idle, name: str | None = None) -> NkiInstruction:
    """Scalar Engine (trn3): dst = op(op1(op0(data, imm0), imm1)) (nl.bypass or None skips a stage;
    relu_param is nl.prelu's slope), rows optionally folded with reduce_op into the ScalarE
    accumulators (reduce_cmd) and read into reduce_res."""
    loc = user_location()
    return _emit_at(loc, "activate2", name, dst=_tensor(dst, "dst", loc), op=_op_name(op, "act", "op", loc),
                    data=_tensor(data, "data", loc), imm0=imm0, imm1=imm1, op0=_op_name(op0, "alu", "op0", loc),
                    op1=_op_name(op1, "alu", "op1", loc), relu_param=relu_param, reverse0=bool(reverse0),
                    reverse1=bool(reverse1), reduce_op=_op_name(reduce_op, "alu", "reduce_op", loc),
                    reduce_res=reduce_res,
                    reduce_cmd=_enum_name(reduce_cmd, globals()["reduce_cmd"], "reduce_cmd", loc))


@_checked
def bn_stats(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "bn_stats", name, dst=_tensor(dst, "dst", loc), data=_tensor(data, "data", loc))


@_checked
def bn_aggr(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "bn_aggr", name, dst=_tensor(dst, "dst", loc), data=_tensor(data, "data", loc))


@_checked
def max8(dst: NkiTensor, src: NkiTensor, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "max8", name, dst=_tensor(dst, "dst", loc), src=_tensor(src, "src", loc))


@_checked
def nc_find_index8(dst: NkiTensor, data: NkiTensor, vals: NkiTensor, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "nc_find_index8", name, dst=_tensor(dst, "dst", loc), data=_tensor(data, "data", loc),
                    vals=_tensor(vals, "vals", loc))


@_checked
def local_gather(dst: NkiTensor, src_buffer: NkiTensor, index: NkiTensor, num_elem_per_idx: int = 1,
                 num_valid_indices: int | None = None, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "local_gather", name,
                    dst=_tensor(dst, "dst", loc), src_buffer=_tensor(src_buffer, "src_buffer", loc),
             index=_tensor(index, "index", loc), num_elem_per_idx=int(num_elem_per_idx),
             num_valid_indices=-1 if num_valid_indices is None else int(num_valid_indices))


@_checked
def nc_n_gather(dst: NkiTensor, data: NkiTensor, indices: NkiTensor, name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "nc_n_gather", name, dst=_tensor(dst, "dst", loc), data=_tensor(data, "data", loc),
                    indices=_tensor(indices, "indices", loc))


@_checked
def nc_stream_shuffle(dst: NkiTensor, src: NkiTensor, shuffle_mask: Sequence[int],
                      name: str | None = None) -> NkiInstruction:
    loc = user_location()
    return _emit_at(loc, "nc_stream_shuffle", name, dst=_tensor(dst, "dst", loc), src=_tensor(src, "src", loc),
                    shuffle_mask=[int(m) for m in shuffle_mask])


# ---- random numbers (nki-0.6-additions.md §1.2, §1.6-§1.11; generator: docs/architecture.md) ------
@_checked
def rng(dst: NkiTensor, engine: _Engine = engine.vector, name: str | None = None) -> NkiInstruction:
    """dst = the low bits of one 32-bit draw per element from `engine`'s generator (integer dst)."""
    loc = user_location()
    return _emit_at(loc, "rng", name, dst=_tensor(dst, "dst", loc),
                    engine=_enum_name(engine, globals()["engine"], "engine", loc))


@_checked
def set_rng_seed(src_seeds: NkiTensor, name: str | None = None) -> NkiInstruction:
    """Seeds the Vector Engine generator of every lane from the 32-bit value of a [1, 1] tile."""
    loc = user_location()
    return _emit_at(loc, "set_rng_seed", name, src_seeds=_tensor(src_seeds, "src_seeds", loc))


@_checked
def rand_set_state(src_seeds: NkiTensor, engine: _Engine = engine.gpsimd, name: str | None = None) -> NkiInstruction:
    """Row p of src_seeds (uint32, 6 words; 24 for the trn3 Vector Engine) becomes lane p's state."""
    loc = user_location()
    return _emit_at(loc, "rand_set_state", name, src_seeds=_tensor(src_seeds, "src_seeds", loc),
                    engine=_enum_name(engine, globals()["engine"], "engine", loc))


@_checked
def rand_get_state(dst: NkiTensor, engine: _Engine = engine.gpsimd, name: str | None = None) -> NkiInstruction:
    """Row p of dst (uint32) receives lane p's generator state."""
    loc = user_location()
    return _emit_at(loc, "rand_get_state", name, dst=_tensor(dst, "dst", loc),
                    engine=_enum_name(engine, globals()["engine"], "engine", loc))


@_checked
def rand2(dst: NkiTensor, min: _t.Operand, max: _t.Operand, name: str | None = None) -> NkiInstruction:  # noqa: A002
    """dst = uniform samples in [min, max] (fp32 scalars or [P, 1] columns) on the Vector Engine (trn3)."""
    loc = user_location()
    return _emit_at(loc, "rand2", name, dst=_tensor(dst, "dst", loc), min=min, max=max)


@_checked
def dropout(dst: NkiTensor, data: NkiTensor, prob: _t.Operand, name: str | None = None) -> NkiInstruction:
    """dst = data with each element zeroed with probability prob (a scalar or [P, 1] tile); no rescaling."""
    loc = user_location()
    return _emit_at(loc, "dropout", name, dst=_tensor(dst, "dst", loc), data=_tensor(data, "data", loc), prob=prob)


# ---- DMA compute (nki-api.md §3.6) --------------------------------------------------------------
@_checked
def dma_compute(dst: NkiTensor, srcs: Sequence[NkiTensor], reduce_op: _t.OpLike | None = None,
                scales: Sequence[float] | None = None, unique_indices: bool = True,
                oob_mode: _OobMode = oob_mode.error, name: str | None = None) -> NkiInstruction:
    """dst = sum(srcs) in fp32 on a DMA queue. An indirect dst (and srcs[0] the same rows) makes it a
    scatter-add. NKI 0.2's argument order (dst, srcs, scales, reduce_op) is accepted too."""
    loc = user_location()
    if isinstance(reduce_op, (list, tuple)) or (reduce_op is None and scales is not None and
                                                 not isinstance(scales, (list, tuple))):
        reduce_op, scales = scales, reduce_op  # 0.2 order
    if not isinstance(srcs, (list, tuple)) or not srcs:
        raise user_error("operand", "srcs must be a non-empty list of tensors", loc)
    views = [_tensor(s, f"srcs[{k}]", loc)._view for k, s in enumerate(srcs)]
    return _emit_at(loc, "dma_compute", name, dst=_tensor(dst, "dst", loc), srcs=views,
                    reduce_op=_op_name(reduce_op if reduce_op is not None else _OPS["add"], "alu", "reduce_op", loc),
                    scales=[float(x) for x in (scales or [])], unique_indices=bool(unique_indices),
                    oob_mode=_enum_name(oob_mode, globals()["oob_mode"], "oob_mode", loc))


# ---- registers (nki-api.md §3.7) ----------------------------------------------------------------
@_checked
def register_alloc(x: _t.IntLike | None = None, name: str | None = None) -> VirtualRegister:
    """A new 32-bit register, set to `x` (an int or a register) when given."""
    loc = user_location()
    reg = VirtualRegister(new_register())
    if x is not None:
        _emit_at(loc, "register_move", name, dst=("reg", reg.id), src=int_operand(x, "x", loc))
    return reg


def _register(r, what, loc):
    if not isinstance(r, VirtualRegister):
        raise user_error("operand", f"{what} must be a register (nisa.register_alloc()), got {type(r).__name__}", loc)
    return ("reg", r.id)


@_checked
def register_move(dst: VirtualRegister, src: _t.IntLike | None = None, imm: _t.IntLike | None = None,
                  name: str | None = None) -> NkiInstruction:
    """dst = src (an int or a register); NKI 0.2 spelled the immediate `imm=`."""
    loc = user_location()
    value = imm if src is None else src
    return _emit_at(loc, "register_move", name, dst=_register(dst, "dst", loc), src=int_operand(value, "src", loc))


@_checked
def register_load(dst: VirtualRegister, src: NkiTensor, name: str | None = None) -> NkiInstruction:
    """dst = the single element of tensor `src` (int32)."""
    loc = user_location()
    return _emit_at(loc, "register_load", name, dst=_register(dst, "dst", loc), src=_tensor(src, "src", loc))


@_checked
def register_store(dst: NkiTensor, src: int | RegExpr, name: str | None = None) -> NkiInstruction:
    """The single element of tensor `dst` = register `src`."""
    loc = user_location()
    value = src if isinstance(src, VirtualRegister) else None
    if value is None:  # an expression or an int: materialize it first
        value = VirtualRegister(RegExpr.of(src).register()) if isinstance(src, RegExpr) else register_alloc(src)
    return _emit_at(loc, "register_store", name, dst=_tensor(dst, "dst", loc), src=("reg", value.id))


@_checked
def scalar_load(src: NkiTensor, name: str | None = None) -> VirtualRegister:
    """G3: an NkiScalar holding the single element of `src`."""
    reg = VirtualRegister(new_register())
    register_load(reg, src, name=name)
    return reg


@_checked
def scalar_store(dst: NkiTensor, value: int | RegExpr, name: str | None = None) -> NkiInstruction:
    """G3: writes an NkiScalar (or int) into the single element of `dst`."""
    return register_store(dst, value, name=name)
@_checked
def quantize_mx(dst: NkiTensor, src: NkiTensor, dst_scale: NkiTensor, name: str | None = None) -> NkiInstruction:
    """trn3: src [P, F] fp16/bf16 -> dst [P, F/4] fp8 x4 words + dst_scale [P/8, F/4] e8m0 scales."""
    loc = user_location()
    return _emit_at(loc, "quantize_mx", name, dst=_tensor(dst, "dst", loc), src=_tensor(src, "src", loc),
                    dst_scale=_tensor(dst_scale, "dst_scale", loc))


@_checked
def nc_matmul_mx(dst: NkiTensor, stationary: NkiTensor, moving: NkiTensor, stationary_scale: NkiTensor,
                 moving_scale: NkiTensor, tile_position: Sequence[int] | None = None,
                 tile_size: Sequence[int] | None = None, accumulate: bool | None = None,
                 name: str | None = None) -> NkiInstruction:
    """trn3: dst[M, N] (+)= dequantized stationary [P, M].T @ moving [P, N], contracting 4P values."""
    loc = user_location()
    acc = "auto" if accumulate is None else ("on" if accumulate else "off")
    return _emit_at(loc, "nc_matmul_mx", name,
                    dst=_tensor(dst, "dst", loc), stationary=_tensor(stationary, "stationary", loc),
             moving=_tensor(moving, "moving", loc),
             stationary_scale=_tensor(stationary_scale, "stationary_scale", loc),
             moving_scale=_tensor(moving_scale, "moving_scale", loc),
             tile_position=[int(x) for x in tile_position or ()], tile_size=[int(x) for x in tile_size or ()],
             accumulate=acc)


# ---- multi-core (LNC2, nki-api.md §3.7; nki.lnc from 0.8) ---------------------------------------
class dma_engine(enum.IntEnum):
    dma = 1
    gpsimd_dma = 2


_DmaEngine = dma_engine


@_checked
def core_barrier(data: NkiTensor, cores: Sequence[int], engine: _Engine = engine.gpsimd,
                 name: str | None = None) -> NkiInstruction:
    """Waits until every core in `cores` (e.g. (0, 1)) reaches its core_barrier. Cores are the
    instances of a kernel launched on a grid (kernel[2](...)); rank = nl.program_id(0)."""
    loc = user_location()
    return _emit_at(loc, "core_barrier", name, data=_tensor(data, "data", loc), cores=[int(c) for c in cores],
                    engine=_enum_name(engine, globals()["engine"], "engine", loc))


@_checked
def sendrecv(src: NkiTensor, dst: NkiTensor, send_to_rank: int, recv_from_rank: int, pipe_id: int,
             dma_engine: _DmaEngine = dma_engine.dma, name: str | None = None) -> NkiInstruction:
    """Sends this core's SBUF `src` to core send_to_rank and receives core recv_from_rank's src
    into `dst`; the partner core calls sendrecv with the ranks swapped and the same pipe_id."""
    loc = user_location()
    return _emit_at(loc, "sendrecv", name, dst=_tensor(dst, "dst", loc), src=_tensor(src, "src", loc),
                    send_to_rank=int(send_to_rank), recv_from_rank=int(recv_from_rank), pipe_id=int(pipe_id))


# ---- names NKI removed ----------------------------------------------------------------------------
_REMOVED = {
    "tensor_copy_dynamic_src": "nisa.tensor_copy(dst, src.ap(pattern, scalar_offset=reg)) (a register offset on src)",
    "tensor_copy_dynamic_dst": "nisa.tensor_copy(dst.ap(pattern, scalar_offset=reg), src) (a register offset on dst)",
}


class RemovedNameError(AttributeError):
    """A nki.isa name NKI removed (AttributeError, so hasattr() is False as in NKI 0.6)."""


def __getattr__(name: str) -> object:
    if name in _REMOVED:
        raise RemovedNameError(f"nisa.{name} was removed in NKI 0.4; use {_REMOVED[name]} instead")
    raise AttributeError(f"module 'knit.isa' has no attribute {name!r}")
