"""NKI's scheduling APIs (nki-0.6-additions.md §4): instruction names, ``kernel.with_schedule``,
``nl.no_reorder`` and ``NkiInstruction.depends_on``.

Each adds "consumer runs after producer" edges to the traced kernel (``Instruction::after`` in
the IR, printed as ``after=[...]``). Data dependences are unaffected: the codegen turns an edge
between instructions on different engine queues of one region into a semaphore wait, so the
timing model honours it; on one queue (in order) or across a barrier it already holds.

DESIGN CHOICE (the docs leave the checks open): an unknown name and a cycle are errors, a name
labelling several instructions a warning (each consumer then follows the latest such producer
issued before it, or else the first issued after it). A with_schedule edge may name a producer
issued *after* its consumer (NKI's scheduler would reorder them): the functional run keeps
program order, and the engine program makes the consumer's queue wait for the producer. Lowering
accepts it only when the two run on different engine queues of one region and the producer does
not depend on the consumer (through data, queue order or other edges, transitively), so the two
are independent and the results equal program order's; otherwise it is a ``schedule`` error
naming both lines (codegen's add_backward_edges). ``depends_on`` handles still need a producer
issued first.
"""
from __future__ import annotations

import contextlib
import difflib
import warnings
from collections.abc import Iterator, Sequence

from . import _trace
from ._source import user_location
from .errors import user_error

Edges = tuple[tuple[str, tuple[str, ...]], ...]  # (consumer, producers) pairs, normalized


class ScheduleWarning(UserWarning):
    """A schedule that is accepted but probably not what was meant (a duplicated name)."""


class NkiInstruction:
    """The handle a knit.isa call returns (NKI's tracer frontend): ``c.depends_on(a, b)`` makes
    instruction c run after a and b (chainable: it returns c)."""

    __slots__ = ("_trace", "index", "name", "_blocks", "_rolled")

    def __init__(self, trace: _trace.Trace, index: int, name: str, blocks: tuple[int, ...]) -> None:
        self._trace = trace
        self.index = index  # body index in the traced kernel
        self.name = name
        self._blocks = blocks  # open device blocks (loops / branches) when it was issued
        self._rolled = tuple(trace.rolled_open)  # rolled loops it was issued in (knit/_rolled.py)

    def depends_on(self, *producers: NkiInstruction) -> NkiInstruction:
        loc = user_location()
        for handle in (self, *producers):
            closed = [s for s in getattr(handle, "_rolled", ()) if s not in self._trace.rolled_open]
            if closed:  # a rolled loop's traced iteration: later code means its last iteration
                raise _trace.cannot_roll(closed)
        for p in producers:
            if not isinstance(p, NkiInstruction):
                raise user_error("schedule", f"depends_on takes instruction handles (what a nisa call returns), got "
                                 f"{type(p).__name__}", loc)
            if p._trace is not self._trace:
                raise user_error("schedule", "depends_on links instructions of one kernel trace only", loc)
            if p._blocks != self._blocks[:len(p._blocks)]:
                raise user_error("schedule", "depends_on: the producer must be issued at the consumer's loop / branch "
                                 "nesting or in a block enclosing it (NKI's rule); it is inside a block the consumer "
                                 "is not in", loc)
            if p.index >= self.index:
                raise user_error("schedule", f"depends_on: {p!r} is issued after {self!r}; an instruction can only "
                                 "depend on one issued before it", loc)
            _trace.core_call(self._trace.builder.add_order, self.index, p.index, loc)
        return self

    def __repr__(self) -> str:
        label = f" name={self.name!r}" if self.name else ""
        return f"<NkiInstruction #{self.index}{label}>"


def issued(trace: _trace.Trace, index: int, name: str | None) -> NkiInstruction:
    """The handle of the instruction just appended at body `index`."""
    return NkiInstruction(trace, index, name or "", tuple(trace.blocks))


# ---- nl.no_reorder ------------------------------------------------------------------------------
@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Chains every instruction issued inside the block (by the kernel or any function it calls)
    in program order. Device loops (fori_loop, while_loop, dynamic_range) may not be opened
    inside it: put the block inside the loop body instead."""
    trace = _trace.current()
    loc = user_location()
    first = trace.builder.num_instructions
    trace.no_reorder_depth += 1
    try:
        yield
    finally:
        trace.no_reorder_depth -= 1
    for i in range(first + 1, trace.builder.num_instructions):
        _trace.core_call(trace.builder.add_order, i, i - 1, loc)


def check_loop_allowed(trace: _trace.Trace, what: str, loc: object) -> None:
    """Raises when a device loop `what` opens inside nl.no_reorder()."""
    if trace.no_reorder_depth:
        raise user_error("schedule", f"{what} cannot run inside nl.no_reorder(): a device loop's iterations cannot be "
                         "chained in program order; put the no_reorder block inside the loop body instead", loc)


# ---- kernel.with_schedule -----------------------------------------------------------------------
def normalize(edges: object) -> Edges:
    """`edges` ([(consumer, producer or [producers]), ...]) as a hashable tuple; TypeError if malformed."""
    if isinstance(edges, (str, bytes)) or not isinstance(edges, Sequence):
        raise TypeError(f"with_schedule takes a list of (consumer, producers) pairs, got {type(edges).__name__}")
    out = []
    for pair in edges:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not isinstance(pair[0], str):
            raise TypeError("with_schedule: each edge is (consumer name, producer name or list of names), "
                            f"got {pair!r}")
        producers = (pair[1],) if isinstance(pair[1], str) else tuple(pair[1])
        if not producers or not all(isinstance(p, str) for p in producers):
            raise TypeError(f"with_schedule: producers of {pair[0]!r} must be a name or a non-empty list of names, "
                            f"got {pair[1]!r}")
        out.append((pair[0], producers))
    return tuple(out)


def _find_cycle(edges: Edges) -> list[str] | None:
    """A cycle of names (consumer -> producer -> ...) in the edges, or None."""
    after: dict[str, list[str]] = {}
    for consumer, producers in edges:
        after.setdefault(consumer, []).extend(producers)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        path.append(n)
        for p in after.get(n, ()):
            if state.get(p) == 1:
                return path[path.index(p):] + [p]
            if p not in state and (found := visit(p)):
                return found
        path.pop()
        state[n] = 2
        return None

    for n in list(after):
        if n not in state and (found := visit(n)):
            return found
    return None


def apply(trace: _trace.Trace, edges: Edges, loc: object) -> None:
    """Adds the with_schedule `edges` to the traced kernel (at its end); errors point at `loc`,
    the with_schedule call."""
    if not edges:
        return
    if cycle := _find_cycle(edges):
        raise user_error("schedule", "with_schedule edges form a cycle: " + " after ".join(repr(n) for n in cycle), loc)
    where: dict[str, list[int]] = {}
    for i, name in enumerate(trace.builder.instruction_names()):
        if name:
            where.setdefault(name, []).append(i)
    used = {n for consumer, producers in edges for n in (consumer, *producers)}
    for name in sorted(used):
        if name not in where:
            close = difflib.get_close_matches(name, sorted(where), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (named: {', '.join(sorted(where)) or 'none'})"
            raise user_error("schedule", f"with_schedule names {name!r}, but no instruction has name={name!r}{hint}",
                             loc)
        if len(where[name]) > 1:
            message = (f"with_schedule: name {name!r} labels {len(where[name])} instructions; each consumer of that "
                       "name follows the latest producer issued before it (or else the first issued after it)")
            file, line = (loc[0], loc[1]) if isinstance(loc, tuple) else ("<unknown>", 0)
            warnings.warn_explicit(ScheduleWarning(message), ScheduleWarning, file, line)
    for consumer, producers in edges:
        for c in where[consumer]:
            for producer in producers:
                earlier = [p for p in where[producer] if p < c]
                later = [p for p in where[producer] if p > c]
                if not earlier and not later:
                    raise user_error("schedule", f"with_schedule: {consumer!r} cannot run after itself", loc)
                _trace.core_call(trace.builder.add_order, c, earlier[-1] if earlier else later[0], loc)
