"""Rolled loops: ``for i in nl.affine_range(n)`` traced once, expanded into n iterations in C++.

A loop over ``affine_range`` (and ``sequential_range`` / ``static_range``) with two or more
iterations runs its body once, with ``i`` a *symbol*: a register expression (knit/_register.py)
whose register is the loop's symbol id, never a device register. Index arithmetic on it stays
affine (``i * 128 + 64``) and views take it as a register offset term, so the body's
instructions are traced once; the builder's ``end_rolled`` then writes out every iteration in
C++, the same tensors, registers and instructions, in the same order, as a trace that ran the
body n times (frontend/builder.h). docs/architecture.md ("Rolled loops") has the design.

A body may instead depend on i's Python value, or leave Python state behind for the next
iteration. Then the body is not the same for every iteration, and the kernel is traced again
with that loop unrolled (Python's range: i is an int). The rules, each checked:

* i's value is asked for (``int(i)``, ``if i == 0``, ``tiles[i]``, ``range(i)``, ``i % 2``,
  ``f"{i}"``, ...), or a view subscript built from it leaves the view's bounds for some
  iteration: the symbol raises ``RetraceUnrolled`` (a BaseException, so a kernel's
  ``except Exception`` cannot hide it). A comparison that has the same result in every
  iteration is answered instead (``min(128, rows - i * 128)`` with rows a multiple of 128).
* The body raises any other error: the innermost open rolled loop is unrolled and the trace
  repeated, so a real mistake is reported by the unrolled trace, with its own values.
* After the body, a local or global variable of the loop's function that existed before it is
  bound to something else (``acc = acc + x``, ``k0 += 128``) or a list / dict / set it holds
  changed (``tiles.append(t)``); only a variable rebound to a tensor of the same shape, dtype and
  buffer that the body never reads keeps the loop rolled. The trace's own tables (device prints,
  constants, shared tensors, G1 deferred results) also must not change, nor the Python-side
  state of an object that has some (``_rolled_state()``: a G1 PSUM tile's accumulation mode).
* Later code uses a tensor, register or instruction handle the traced iteration made (it would
  mean the last iteration's), or the symbol itself: the builder reports it (rule
  ``_core.ROLLED_ESCAPE_RULE``; knit/_trace.py's core_call turns it into RetraceUnrolled).
* The loop is not the iterable of a ``for`` statement (``enumerate(nl.affine_range(n))``,
  ``list(...)``, a comprehension): it is not rolled at all.

What is not checked: state mutated through object attributes or in other modules. KNIT_ROLL=0
turns rolling off.
"""
from __future__ import annotations

import ast
import functools
import linecache
import os
import sys
import types
from collections.abc import Iterator
from typing import Any

from . import _core, _trace
from ._register import RegExpr
from ._tensor import NkiTensor
from ._trace import cannot_roll

SYMBOL_BASE = _core.ROLLED_SYMBOL_BASE


def enabled() -> bool:
    return os.environ.get("KNIT_ROLL", "1") != "0"


def checking() -> bool:
    """KNIT_ROLL=check: every kernel with a rolled loop is traced unrolled too, and the two must
    be the same IR (a test lane: tests/python/test_rolled_loops.py runs the examples so)."""
    return os.environ.get("KNIT_ROLL") == "check"


def summary(trace: _trace.Trace, traces: int) -> dict[str, Any]:
    """What Compiled.trace_info tells: how many loops were rolled, which call sites of
    affine_range had to be unrolled (file, line), and how many traces that took."""
    def where(site: tuple[types.CodeType, int]) -> tuple[str, int]:
        span = _call_span(*site)
        return site[0].co_filename, span[0] if span else site[0].co_firstlineno

    return {"rolled_loops": len(trace.rolled_sites), "unrolled_loops": sorted(map(where, trace.unroll)),
            "traces": traces}


def check_same(rolled: Any, unrolled: Any) -> None:
    """Raises when a rolled trace's IR differs from the unrolled trace's (a Knit bug)."""
    a, b = rolled.text.splitlines(), unrolled.text.splitlines()
    if a == b:
        return
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    first = a[at] if at < len(a) else "<end>"
    second = b[at] if at < len(b) else "<end>"
    raise AssertionError(f"knit: the rolled trace of kernel '{rolled.name}' differs from its unrolled trace at "
                         f"line {at + 1} of the IR:\n  rolled:   {first}\n  unrolled: {second}")


# ---- which loops roll -----------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _for_iter_spans(filename: str) -> frozenset[tuple[int, int, int, int]]:
    """(line, col, end line, end col) of every call that is the iterable of a `for` statement."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return frozenset()
    return frozenset((n.iter.lineno, n.iter.col_offset, n.iter.end_lineno or 0, n.iter.end_col_offset or 0)
                     for n in ast.walk(tree) if isinstance(n, ast.For) and isinstance(n.iter, ast.Call))


@functools.lru_cache(maxsize=4096)
def _call_span(code: types.CodeType, lasti: int) -> tuple[int, int, int, int] | None:
    line, end_line, col, end_col = list(code.co_positions())[lasti // 2]
    if line is None or col is None:
        return None
    return line, col, end_line or 0, end_col or 0


def _is_for_iterable(frame: types.FrameType) -> bool:
    """Whether the call the frame is making (to affine_range) is a `for` statement's iterable."""
    span = _call_span(frame.f_code, frame.f_lasti)
    return span is not None and span in _for_iter_spans(frame.f_code.co_filename)


def loop(r: range, frame: types.FrameType | None) -> Any:
    """The iterable of an affine_range called from `frame`: rolled when it can be, else `r`."""
    if len(r) < 2 or frame is None or not _trace.active():
        return r
    trace = _trace.current()
    site = (frame.f_code, frame.f_lasti)
    if not trace.rolls or site in trace.unroll or not _is_for_iterable(frame):
        return r
    return _rolled(trace, r, site, frame)


# ---- one rolled loop ------------------------------------------------------------------------
def _rolled(trace: _trace.Trace, r: range, site: Any, frame: types.FrameType) -> Iterator[RegExpr]:
    builder = trace.builder
    state = _State(trace, frame)
    symbol = _trace.core_call(builder.begin_rolled, r.start, r.stop, r.step)
    serial = symbol - SYMBOL_BASE
    trace.rolled_sites.append(site)
    trace.symbol_ranges[symbol] = (r[0], r[-1])
    trace.rolled_open.append(serial)
    first = builder.num_instructions
    yield RegExpr(0, {symbol: 1})
    if not trace.rolled_open or trace.rolled_open[-1] != serial or sys._getframe(1) is not frame:
        raise cannot_roll([serial, *trace.rolled_open])  # loops interleaved (never by a plain for)
    trace.rolled_open.pop()
    if not state.unchanged(symbol, first):
        raise cannot_roll([serial])
    _trace.core_call(builder.end_rolled)


def _trace_tables(trace: _trace.Trace) -> tuple[Any, ...]:
    pending = trace.__dict__.get("_legacy_pending") or ()  # G1 results not emitted yet
    return (len(trace.constants), len(trace.prints), len(trace.shared_tensors), trace.shared_created,
            len(trace.blocks), trace.no_reorder_depth, [id(p) for p in pending])


def _contents(value: Any, depth: int = 2) -> Any:
    """What a container holds, by identity, `depth` levels down; for an object with Python-side
    trace state (a G1 PSUM tile's accumulation state), that state; None for other objects."""
    state = getattr(value, "_rolled_state", None)
    if state is not None:
        return state()
    if depth == 0 or not isinstance(value, (list, dict, set, tuple, bytearray)):
        return None
    if isinstance(value, dict):
        return [(id(k), id(v), _contents(v, depth - 1)) for k, v in value.items()]
    if isinstance(value, (set, bytearray)):
        return sorted(map(id, value)) if isinstance(value, set) else bytes(value)
    return [(id(v), _contents(v, depth - 1)) for v in value]


class _State:
    """The Python state a loop body could carry into the next iteration, taken before the body."""

    def __init__(self, trace: _trace.Trace, frame: types.FrameType) -> None:
        self.trace = trace
        self.frame = frame
        self.tables = _trace_tables(trace)
        self.locals = dict(frame.f_locals)
        self.globals = {n: frame.f_globals[n] for n in frame.f_code.co_names if n in frame.f_globals}
        self.contents = {(scope, n): _contents(v) for scope, values in (("l", self.locals), ("g", self.globals))
                         for n, v in values.items()}

    def unchanged(self, symbol: int, first: int) -> bool:
        if _trace_tables(self.trace) != self.tables:
            return False
        frame = self.frame
        now_globals = {n: frame.f_globals.get(n) for n in self.globals}
        for scope, before, now in (("l", self.locals, frame.f_locals), ("g", self.globals, now_globals)):
            for name, old in before.items():
                new = now.get(name, _MISSING)
                if new is not old and not self._harmless(old, new, symbol, first):
                    return False
                if _contents(new) != self.contents[(scope, name)]:
                    return False
        return True

    def _harmless(self, old: Any, new: Any, symbol: int, first: int) -> bool:
        """Whether rebinding a variable from `old` to `new` in the body leaves the next iteration
        as it was: the loop's own index, a dead index of an earlier loop, or a tensor the body
        never read replaced by one that looks the same to Python code."""
        if isinstance(new, RegExpr) and new.terms == {symbol: 1} and new.const == 0:
            return True  # the loop variable
        if isinstance(old, RegExpr) and old.terms and all(r >= SYMBOL_BASE and r - SYMBOL_BASE not in
                                                          self.trace.rolled_open for r in old.terms):
            return True  # an earlier loop's index, dead since that loop closed
        if isinstance(old, NkiTensor) and isinstance(new, NkiTensor):
            same_look = (old.shape, old.dtype, old._info[1]) == (new.shape, new.dtype, new._info[1])
            return same_look and not self.trace.builder.uses_tensor_since(first, old._view.tensor)
        return False


_MISSING = object()
