"""The trace being recorded: every nl./nisa. call appends to the C++ builder of the current trace.
A kernel body runs as ordinary Python (NKI 0.7's tracer model); loops unroll."""
import contextlib
import threading

from . import _core
from ._source import user_location
from .errors import public_error, user_error

_state = threading.local()


class Trace:
    def __init__(self, name, target, program_id=0, num_programs=1, grid_ndim=0, grid=()):
        self.builder = _core.Builder(name, target)
        self.target = target
        self.program_id = program_id
        self.num_programs = num_programs
        self.grid_ndim = grid_ndim
        self.grid = tuple(grid)
        self.shared_created = 0  # shared_hbm tensors created by the current grid instance
        # Multi-rank launches (knit/_ranks.py): the rank being traced and how many there are.
        # Each rank has its own HBM: its shared_hbm tensors are its own.
        self.rank = 0
        self.num_ranks = 1
        self.constants = []  # (tensor id, numpy array) for nl.shared_constant & co.
        self.prints = []  # (prefix, tensor id) for nl.device_print
        self.shared_tensors = {}  # (name, shape, dtype) -> tensor id, shared across grid instances
        self.blocks = []  # body indices of the device blocks (loop / while / if) open now
        self.no_reorder_depth = 0  # nl.no_reorder() blocks open now
        # Rolled loops (knit/_rolled.py): whether affine loops may roll, the call sites to unroll,
        # each rolled loop's call site (by serial), the serials open now, symbol -> (first, last).
        self.rolls = False
        self.unroll = set()
        self.rolled_sites = []
        self.rolled_open = []
        self.symbol_ranges = {}


class RetraceUnrolled(BaseException):
    """A rolled loop (knit/_rolled.py) cannot stay rolled: the kernel is traced again with it
    unrolled. A BaseException, so a kernel's `except Exception` cannot swallow it."""


def cannot_roll(loop_serials):
    """Marks rolled loops (by serial) to be unrolled when the kernel is traced again; returns the
    exception to raise."""
    trace = current()
    for s in loop_serials:
        trace.unroll.add(trace.rolled_sites[s])
    return RetraceUnrolled()


def current():
    trace = getattr(_state, "trace", None)
    if trace is None:
        raise user_error(
            "no-kernel",
            "a knit.language / knit.isa call ran outside a kernel; decorate the kernel with @knit.jit "
            "and call it (or use knit.simulate(kernel)(*args))",
            user_location(),
        )
    return trace


def active():
    return getattr(_state, "trace", None) is not None


@contextlib.contextmanager
def tracing(trace):
    previous = getattr(_state, "trace", None)
    _state.trace = trace
    try:
        yield trace
    finally:
        _state.trace = previous


def core_call(fn, *args):
    """Calls into _core, re-raising Knit errors as the public exception types (NkiValidationError
    for rule violations) without the binding frames."""
    try:
        return fn(*args)
    except _core.KnitError as e:
        if getattr(e, "rule", "") == _core.ROLLED_ESCAPE_RULE:
            raise cannot_roll([int(e.message)]) from None
        raise public_error(e) from None
    except RuntimeError as e:  # pybind11's cast_error: a value the core's C++ types cannot hold
        if "Unable to cast" not in str(e):
            raise
        raise TypeError("a value is out of range or of the wrong kind for Knit's core (an int beyond 64 bits, a "
                        "tuple or string where a number belongs)") from None
