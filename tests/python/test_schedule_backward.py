"""Backward with_schedule edges (knit/_schedule.py, codegen's add_backward_edges): an edge asking
an instruction to run after one issued later. Legal between independent instructions on
different engine queues: the engine program makes the earlier call's queue wait, the timing
model shows it starting after the later call ends, and the results stay program order's
(checked against NumPy under every queue interleaving of the functional simulator). Rejected,
naming both lines, on one queue (in order), across a device loop, and when the later
instruction depends on the earlier one (directly, through queue order, or through another
edge): waiting would deadlock."""
import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl
from knit import NkiValidationError
from test_schedule import P, check_two_engines, inputs, timeline_by_name, two_engines


def test_backward_edge_runs_the_earlier_call_after_the_later_one():
    ab = inputs()
    kernel = knit.jit(two_engines)
    base = timeline_by_name(knit.profile(kernel, ab))
    assert base["act"][0] < base["vec"][1]  # independent: they overlap without the edge
    scheduled = kernel.with_schedule([("act", "vec")])  # act (issued first) after vec
    prof = knit.profile(scheduled, ab)
    check_two_engines(prof.outputs, ab)
    times = timeline_by_name(prof)
    assert times["act"][0] >= times["vec"][1]
    act_line = next(line for line in knit.compile(scheduled, ab).asm.splitlines() if 'name="act"' in line)
    assert "wait" in act_line and "dve" in act_line  # ScalarE waits for VectorE's semaphore
    compiled = scheduled.compile(ab)
    for schedule, seed in [("program_order", 0), ("round_robin", 0), ("random", 1), ("random", 2)]:
        check_two_engines(compiled.run(ab, schedule=schedule, seed=seed), ab)


def pair(ab, kind):
    """A on ScalarE issued first, B issued later; with_schedule([("A", "B")]) asks A after B.
    kind: "reads_a" (B reads A's result), "same_queue" (B also on ScalarE), "via_queue" (B
    waits on VectorE behind an instruction that reads A's result), "via_edge" (B follows, by a
    forward edge, a GpSimd instruction that reads A's result)."""
    t = nl.ndarray((P, 2, 64), nl.float32)
    nisa.dma_copy(t, ab[:, :, 0:64])
    ra = nl.ndarray((P, 64), nl.float32)
    rx = nl.ndarray((P, 64), nl.float32)
    rb = nl.ndarray((P, 64), nl.float32)
    nisa.activation(ra, nl.exp, t[:, 0, :], name="A")
    if kind == "reads_a":
        nisa.tensor_scalar(rb, ra, nl.multiply, 2.0, engine=nisa.engine.vector, name="B")
    elif kind == "same_queue":
        nisa.activation(rb, nl.exp, t[:, 1, :], name="B")
    else:
        engine = nisa.engine.vector if kind == "via_queue" else nisa.engine.gpsimd
        nisa.tensor_scalar(rx, ra, nl.multiply, 3.0, engine=engine, name="X")
        nisa.tensor_scalar(rb, t[:, 1, :], nl.multiply, 2.0, engine=nisa.engine.vector, name="B")
    out = nl.ndarray((P, 64), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(out, rb)
    return out


@pytest.mark.parametrize("kind,edges,why", [
    ("reads_a", [("A", "B")], r"the second depends on the first .* deadlock"),
    ("via_queue", [("A", "B")], r"the second depends on the first .*queue order.* deadlock"),
    ("via_edge", [("B", "X"), ("A", "B")], r"the second depends on the first .*other scheduling edges.* deadlock"),
    ("same_queue", [("A", "B")], r"both run on the act queue, which executes its instructions in program order"),
])
def test_backward_edge_that_cannot_be_honoured_is_rejected(kind, edges, why):
    ab = inputs()
    kernel = knit.jit(pair).with_schedule(edges)
    with pytest.raises(NkiValidationError, match=why) as e:
        kernel(ab, kind)
    message = str(e.value)
    assert f"activation at {__file__}:{line_of(A_CALL)}" in message
    assert f"{__file__}:{line_of(B_CALLS[kind])}" in message
    assert "run after" in message


A_CALL = 't[:, 0, :], name="A"'
def test_backward_edge_across_a_device_loop_is_rejected():
    """A loop between the two drains every queue: the earlier call cannot wait past it."""
    def kernel(ab):
        t = nl.ndarray((P, 2, 64), nl.float32)
        nisa.dma_copy(t, ab[:, :, 0:64])
        ra = nl.ndarray((P, 64), nl.float32)
        rb = nl.ndarray((P, 64), nl.float32)
        nisa.activation(ra, nl.exp, t[:, 0, :], name="A")
        nl.fori_loop(0, 2, lambda i: nisa.tensor_scalar(ra, ra, nl.add, 1.0, engine=nisa.engine.gpsimd))
        nisa.tensor_scalar(rb, t[:, 1, :], nl.multiply, 2.0, engine=nisa.engine.vector, name="B")
        out = nl.ndarray((P, 64), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(out, rb)
        return out

    with pytest.raises(NkiValidationError, match=r"run after .* between them drains every engine queue"):
        knit.jit(kernel).with_schedule([("A", "B")])(inputs())


B_CALLS = {"reads_a": 'ra, nl.multiply, 2.0, engine=nisa.engine.vector, name="B"',
           "same_queue": 'nl.exp, t[:, 1, :], name="B"',
           "via_queue": 't[:, 1, :], nl.multiply, 2.0, engine=nisa.engine.vector, name="B"',
           "via_edge": 't[:, 1, :], nl.multiply, 2.0, engine=nisa.engine.vector, name="B"'}


def line_of(text):
    """The line of this file holding `text` (a call in `pair`)."""
    return next(n for n, line in enumerate(open(__file__).read().splitlines(), 1) if text in line)


def test_the_rejected_kernels_run_without_the_offending_edge():
    """The checks reject the edge, not the kernels: without it (or, for "via_edge", without the
    forward edge that links B to A's reader) each runs and matches NumPy."""
    ab = inputs()
    np.testing.assert_allclose(knit.jit(pair)(ab, "reads_a"), 2 * np.exp(ab[:, 0, 0:64]), rtol=1e-5)
    got = knit.jit(pair).with_schedule([("A", "B")])(ab, "via_edge")  # X on GpSimd: B independent of A
    np.testing.assert_array_equal(got, 2 * ab[:, 1, 0:64])
