"""NKI's operator objects (nl.add, nl.exp, ...): the table of their names, which ALU op and / or
activation function each one is, at the bottom of the import order so that knit.isa (which takes
them as op=), the nl.* wrappers and the legacy facade all read the same table.

An operator is also the element-wise nl.* function of the same name (``nl.add(x, y)``): the API
modules build their operator objects with ``operator_table(functions)``, each one holding its
function from construction on."""
from typing import Any, Callable, Dict, Mapping, Optional

from ._source import user_location
from .errors import user_error

# Operators that are ALU ops only, both an ALU op and an activation function, activation only.
_ALU_ONLY = [
    "bypass", "invert", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "add",
    "subtract", "multiply", "divide", "maximum", "minimum", "equal", "not_equal", "greater_equal", "greater",
    "less_equal", "less", "logical_and", "logical_or", "logical_xor", "power", "abs_max", "abs_min", "fmod",
    "mod", "average",
]
_BOTH = ["abs", "square", "relu", "rsqrt", "reciprocal"]
_ACT_ONLY = [
    "copy", "sigmoid", "prelu", "gelu", "gelu_dx", "gelu_apprx_tanh", "gelu_apprx_sigmoid",
    "gelu_apprx_sigmoid_dx", "silu", "silu_dx", "tanh", "softplus", "mish", "erf", "erf_dx", "exp", "sign",
    "log", "sin", "arctan", "sqrt",
]
# name -> (ALU op name or None, activation function name or None)
KINDS: Dict[str, tuple] = {
    **{n: (n, None) for n in _ALU_ONLY}, **{n: (n, n) for n in _BOTH}, **{n: (None, n) for n in _ACT_ONLY}}


class Op:
    """An NKI operator object: usable as `op=` of ISA instructions (an ALU op and/or an
    activation function) and, when it has one, callable as its element-wise function."""

    __slots__ = ("name", "alu", "act", "fn")

    def __init__(self, name: str, alu: Optional[str] = None, act: Optional[str] = None,
                 fn: Optional[Callable[..., Any]] = None) -> None:
        self.name, self.alu, self.act, self.fn = name, alu, act, fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            raise user_error("unsupported", f"nl.{self.name}(...) as a function is not supported yet", user_location())
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"nl.{self.name}"


def operator_table(functions: Mapping[str, Callable[..., Any]]) -> Dict[str, Op]:
    """One Op per operator name, each with its function from `functions` (None if absent)."""
    return {name: Op(name, alu, act, functions.get(name)) for name, (alu, act) in KINDS.items()}


# The operators without functions: what Knit's own code passes as op= to knit.isa.
OPS = operator_table({})
