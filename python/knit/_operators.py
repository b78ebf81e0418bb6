"""NKI's operator objects (nl.add, nl.exp, ...): the table of their names, which ALU op and / or
activation function each one is, at the bottom of the import order so that knit.isa (which takes
them as op=), the nl.* wrappers and the legacy facade all read the same table.

An operator is also the element-wise nl.* function of the same name (``nl.add(x, y)``): the API
modules build their operator objects with ``operator_table(functions)``, each one holding its
function from construction on."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from . import _core
from ._source import user_location
from .errors import user_error

# The C++ tables (KNIT_ALU_OPS, KNIT_ACT_FUNCS in ir/types.h): each ALU operator with its class,
# each activation function. A new operator added there is an nl.* object here with no edit.
ALU_OPS: dict[str, _core.AluOpRow] = {row["name"]: row for row in _core.alu_ops()}
ACT_FUNCS: tuple[str, ...] = tuple(_core.act_funcs())

# name -> (ALU op name or None, activation function name or None). NKI names every operator as
# the IR does, so an operator is an ALU op, an activation function or both under one name.
KINDS: dict[str, tuple[str | None, str | None]] = {
    name: (name if name in ALU_OPS else None, name if name in ACT_FUNCS else None)
    for name in [*ALU_OPS, *(f for f in ACT_FUNCS if f not in ALU_OPS)]}

# ---- Python-only facts: NKI's API, which the C++ tables do not describe --------------------------
# Operators NKI offers only as op= values, never as nl.* element-wise calls (prelu needs its alpha;
# bypass and average are instruction modes).
OPERATOR_ONLY = frozenset({"bypass", "average", "prelu"})
# The two-input ALU operators that are also nl.* element-wise calls (nl.add(x, y), ...).
BINARY: tuple[str, ...] = tuple(name for name, row in ALU_OPS.items()
                                if not row["unary"] and name not in OPERATOR_ONLY)
# NumPy functions the legacy API accepts as op= (np.add, np.amax, ...) -> the operator they mean
# (None: a NumPy function with no single-instruction operator). NumPy's own spellings, so no table
# in C++ knows them.
NUMPY_NAMES: dict[str, str | None] = {
    **{name: name for name in ("add", "subtract", "multiply", "maximum", "minimum", "square", "exp", "tanh",
                               "sqrt", "abs", "equal", "not_equal", "greater", "greater_equal", "less",
                               "less_equal", "bitwise_and", "bitwise_or", "bitwise_xor", "power", "log", "sin",
                               "reciprocal", "logical_and", "logical_or", "logical_xor", "sign", "arctan")},
    "amax": "maximum", "amin": "minimum", "max": "maximum", "min": "minimum", "absolute": "abs",
    "sum": "add", "prod": "multiply", "negative": None}


class Op:
    """An NKI operator object: usable as `op=` of ISA instructions (an ALU op and/or an
    activation function) and, when it has one, callable as its element-wise function."""

    __slots__ = ("act", "alu", "fn", "name")

    def __init__(self, name: str, alu: str | None = None, act: str | None = None,
                 fn: Callable[..., Any] | None = None) -> None:
        self.name, self.alu, self.act, self.fn = name, alu, act, fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            raise user_error("unsupported", f"nl.{self.name}(...) as a function is not supported yet", user_location())
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"nl.{self.name}"


def operator_table(functions: Mapping[str, Callable[..., Any]]) -> dict[str, Op]:
    """One Op per operator name, each with its function from `functions` (None if absent)."""
    return {name: Op(name, alu, act, functions.get(name)) for name, (alu, act) in KINDS.items()}


# The operators without functions: what Knit's own code passes as op= to knit.isa.
OPS = operator_table({})
