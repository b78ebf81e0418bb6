"""Runtime integers: NKI's VirtualRegister (G2) and NkiScalar (G3).

A register's value exists only on the device, so while tracing it is a symbol. Knit keeps
integer arithmetic on registers *affine* where it can (``i * 128 + 64`` is the expression
64 + 128·r_i, no instruction): an affine expression can offset a view directly (a dynamic term of
the view, ir.h). Anything else (a product of two registers, ``//``, ``%``, comparisons, bit
operations) emits a ``register_alu`` instruction into a fresh register. Python control flow on a
register (``if r:``, ``while r:``, ``range(r)``, ``int(r)``) is a TypeError, as in NKI's tracer:
use ``nl.if_else``, ``nl.while_loop``, ``nl.dynamic_range`` / ``nl.fori_loop``.
"""
import numbers

from . import _core, _trace
from ._source import user_location

_RUNTIME_HINT = ("its value exists only on the device, so Python control flow cannot use it; use "
                 "nl.if_else / nl.while_loop / nl.dynamic_range (nl.fori_loop) instead")


def _symbol_loops(*values):
    """Rolled loops (knit/_rolled.py) whose symbols appear in `values`."""
    return [r - _core.ROLLED_SYMBOL_BASE for v in values if isinstance(v, RegExpr)
            for r in v.terms if r >= _core.ROLLED_SYMBOL_BASE]


def needs_value(*values):
    """Called where a register expression's value would be needed while tracing: when it holds a
    rolled loop's index, that loop is traced again unrolled (the index is then a Python int)."""
    loops = _symbol_loops(*values)
    if loops:
        raise _trace.cannot_roll(loops)


def _symbol_range(expr):
    """(lowest, highest) value of `expr` over its rolled loops' iterations, or None when it holds
    a device register too (its value is then unknown while tracing)."""
    loops = _symbol_loops(expr)
    if len(loops) != len(expr.terms):
        return None
    ranges = _trace.current().symbol_ranges
    lo = hi = expr.const
    for reg, coeff in expr.terms.items():
        first, last = ranges[reg]
        lo += coeff * (first if coeff > 0 else last)
        hi += coeff * (last if coeff > 0 else first)
    return lo, hi


def check_subscript(expr, dim_size, extent):
    """A subscript starting at `expr` (symbols and a constant) and `extent` long must lie inside a
    dim of `dim_size` for every iteration, as the unrolled trace's static check would require;
    otherwise the unrolled trace decides (an error, or Python's from-the-end rule)."""
    loops = _symbol_loops(expr)
    if not loops:
        return
    bounds = _symbol_range(expr)
    if bounds is None or bounds[0] < 0 or bounds[1] + extent > dim_size:
        raise _trace.cannot_roll(loops)


_COMPARE = {"less": lambda lo, hi: (hi < 0, lo >= 0), "less_equal": lambda lo, hi: (hi <= 0, lo > 0),
            "greater": lambda lo, hi: (lo > 0, hi <= 0), "greater_equal": lambda lo, hi: (lo >= 0, hi < 0),
            "equal": lambda lo, hi: (lo == hi == 0, lo > 0 or hi < 0)}


def _same_for_every_iteration(op, a, b):
    """a `op` b (op a key of _COMPARE) for a rolled loop's index: the Python bool when it is the
    same in every iteration (``min(128, rows - i * 128)`` with rows a multiple of 128), else the
    loop is unrolled and the comparison made on ints."""
    diff = RegExpr.of(a) - b
    bounds = _symbol_range(diff)
    if bounds is not None:
        always, never = _COMPARE[op](*bounds)
        if always or never:
            return always
    raise _trace.cannot_roll(_symbol_loops(a, b))


def new_register():
    return _trace.current().builder.new_register()  # numbered by the builder, as for C++ kernels


def _emit(opname, **fields):
    trace = _trace.current()
    _trace.core_call(trace.builder.append, opname, fields, user_location(), "")


class RegExpr:
    """const + sum(coeff * register): an int32 value known only on the device."""

    __slots__ = ("const", "terms")
    __array_ufunc__ = None

    def __init__(self, const=0, terms=None):
        self.const = int(const)
        self.terms = {r: c for r, c in (terms or {}).items() if c != 0}

    # ---- arithmetic ---------------------------------------------------------------------------
    @staticmethod
    def of(value):
        if isinstance(value, RegExpr):
            return value
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return RegExpr(int(value))
        raise TypeError(f"register arithmetic needs ints or registers, got {type(value).__name__}")

    def _affine(self, other, sign):
        if not isinstance(other, (RegExpr, numbers.Integral)) or isinstance(other, bool):
            return NotImplemented  # e.g. a legacy index expression: its reflected operator decides
        o = RegExpr.of(other)
        terms = dict(self.terms)
        for r, c in o.terms.items():
            terms[r] = terms.get(r, 0) + sign * c
        return RegExpr(self.const + sign * o.const, terms)

    def __add__(self, other): return self._affine(other, 1)
    def __radd__(self, other): return self._affine(other, 1)
    def __sub__(self, other): return self._affine(other, -1)
    def __rsub__(self, other): return (-self)._affine(other, 1)
    def __neg__(self): return RegExpr(0)._affine(self, -1)

    def __mul__(self, other):
        if isinstance(other, numbers.Integral) and not isinstance(other, bool):
            k = int(other)
            return RegExpr(self.const * k, {r: c * k for r, c in self.terms.items()})
        return self._alu("multiply", other)

    __rmul__ = __mul__

    def _alu(self, op, other, reverse=False):
        needs_value(self, other)
        a, b = (RegExpr.of(other), self) if reverse else (self, RegExpr.of(other))
        dst = new_register()
        _emit("register_alu", dst=("reg", dst), a=a.operand(), op=op, b=b.operand())
        return VirtualRegister(dst)

    def __floordiv__(self, o): return self._alu("divide", o)
    def __rfloordiv__(self, o): return self._alu("divide", o, True)
    def __mod__(self, o): return self._alu("mod", o)
    def __rmod__(self, o): return self._alu("mod", o, True)
    def __and__(self, o): return self._alu("bitwise_and", o)
    def __rand__(self, o): return self._alu("bitwise_and", o, True)
    def __or__(self, o): return self._alu("bitwise_or", o)
    def __ror__(self, o): return self._alu("bitwise_or", o, True)
    def __xor__(self, o): return self._alu("bitwise_xor", o)
    def __rxor__(self, o): return self._alu("bitwise_xor", o, True)
    def __lshift__(self, o): return self._alu("left_shift", o)
    def __rshift__(self, o): return self._alu("right_shift", o)
    def _compare(self, op, other):
        if _symbol_loops(self, other):
            return _same_for_every_iteration(op, self, other)
        return self._alu(op, other)

    def __lt__(self, o): return self._compare("less", o)
    def __le__(self, o): return self._compare("less_equal", o)
    def __gt__(self, o): return self._compare("greater", o)
    def __ge__(self, o): return self._compare("greater_equal", o)
    # == / != stay Python identity (registers are used as dict keys by kernels' helpers); use
    # nl.equal-style helpers or (a - b) for device comparisons. A rolled loop's index compares
    # by value in the unrolled trace instead.
    def __eq__(self, other):
        if _symbol_loops(self, other):
            return _same_for_every_iteration("equal", self, other)
        return self is other

    def __ne__(self, other):
        return not self == other

    __hash__ = object.__hash__

    # ---- use as an operand --------------------------------------------------------------------
    def operand(self):
        """The value as an instruction operand: an int, or ("reg", id) (materialized if needed)."""
        if not self.terms:
            return self.const
        needs_value(self)
        return ("reg", self.register())

    def register(self):
        """A register holding this value (emits register_alu for a non-trivial expression)."""
        needs_value(self)
        if self.const == 0 and len(self.terms) == 1:
            (r, c), = self.terms.items()
            if c == 1:
                return r
        dst = new_register()
        _emit("register_move", dst=("reg", dst), src=self.const)
        for r, c in self.terms.items():
            term = r
            if c != 1:
                term = new_register()
                _emit("register_alu", dst=("reg", term), a=("reg", r), op="multiply", b=c)
            _emit("register_alu", dst=("reg", dst), a=("reg", dst), op="add", b=("reg", term))
        return dst

    # ---- what cannot be done while tracing ----------------------------------------------------
    def __bool__(self):
        if _symbol_loops(self):
            return not _same_for_every_iteration("equal", self, 0)
        raise TypeError(f"the truth value of a register is not known while tracing: {_RUNTIME_HINT}")

    def __index__(self):
        needs_value(self)
        raise TypeError(f"a register cannot be used as a Python int: {_RUNTIME_HINT}")

    __int__ = __index__

    def __float__(self):
        needs_value(self)
        raise TypeError(f"a register cannot be used as a Python float: {_RUNTIME_HINT}")

    def __format__(self, spec):
        needs_value(self)
        return format(repr(self), spec)

    def __str__(self):
        needs_value(self)
        return repr(self)

    def __iter__(self):
        needs_value(self)
        raise TypeError(f"a register is not iterable: {_RUNTIME_HINT}")

    def __repr__(self):
        parts = [f"{c}*r{r}" if c != 1 else f"r{r}" for r, c in self.terms.items()]
        if self.const or not parts:
            parts.append(str(self.const))
        return "RegExpr(" + " + ".join(parts) + ")"


class VirtualRegister(RegExpr):
    """One register (r<id>). NkiScalar is the same object in the G3 API."""

    __slots__ = ()

    def __init__(self, rid):
        super().__init__(0, {rid: 1})

    @property
    def id(self):
        return next(iter(self.terms))

    def __repr__(self):
        return f"VirtualRegister(r{self.id})"


NkiScalar = VirtualRegister


def is_runtime(value):
    return isinstance(value, RegExpr)


def int_operand(value, what, loc):
    """A loop bound / move source: a Python int, or a register expression."""
    from .errors import user_error

    if isinstance(value, RegExpr):
        return value.operand()
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if not -(2**31) <= int(value) < 2**31:
            raise user_error("operand", f"{what} = {int(value)} does not fit a 32-bit register "
                             f"({-(2**31)} .. {2**31 - 1})", loc)
        return int(value)
    raise user_error("operand", f"{what} must be an int or a register, got {type(value).__name__}", loc)
