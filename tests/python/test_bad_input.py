"""Bad input handled (issue 26 item 4, docs/reliability.md "Bad input"): a device while loop that
never ends stops at the instruction budget (KNIT_MAX_INSTRUCTIONS) with an error at the loop's
line; a kernel argument that is not a tensor is a TypeError saying what was expected."""
import inspect

import numpy as np
import pytest

import knit as nki
import knit.isa as nisa
import knit.language as nl
from test_input_limits import copies


def line_of(fn, marker):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


@nki.jit
def counts_down(x):
    """Counts x[0, 0] down by `step` until it is 0: a loop that never ends when the count skips 0."""
    xs = nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    left = nisa.register_alloc()
    nisa.register_load(left, xs[0:1, 0:1])
    step = nisa.register_alloc()
    nisa.register_load(step, xs[0:1, 1:2])
    rounds = nisa.register_alloc(0)

    def body(cond):
        nisa.register_move(left, left - step)
        nisa.register_move(rounds, rounds + 1)
        return left

    nl.while_loop(left, body)  # @loop
    out_s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.register_store(out_s, rounds)
    out = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_s)
    return out


def test_a_loop_that_ends_runs_within_the_budget(monkeypatch):
    monkeypatch.setenv("KNIT_MAX_INSTRUCTIONS", "2000")
    assert counts_down(np.array([[12, 3]], np.int32))[0, 0] == 4


def test_a_runaway_while_loop_stops_at_the_budget_naming_its_line(monkeypatch):
    monkeypatch.setenv("KNIT_MAX_INSTRUCTIONS", "2000")
    with pytest.raises(nki.KnitRuntimeError, match="more than 2000 instructions") as info:
        counts_down(np.array([[12, 5]], np.int32))  # 12, 7, 2, -3, ...: never 0
    err = info.value
    assert err.rule == "instruction-limit"
    assert err.line == line_of(counts_down.fn, "# @loop") and err.file.endswith("test_bad_input.py")
    assert "while loop" in str(err) and "KNIT_MAX_INSTRUCTIONS" in str(err)


@pytest.mark.parametrize("value", ["lots", "-5", "0", "1e9"])
def test_a_budget_that_is_not_a_positive_whole_number_is_refused(monkeypatch, value):
    monkeypatch.setenv("KNIT_MAX_INSTRUCTIONS", value)
    with pytest.raises(nki.KnitError, match="KNIT_MAX_INSTRUCTIONS") as info:
        counts_down(np.array([[12, 3]], np.int32))
    assert info.value.rule == "instruction-limit"


@pytest.mark.parametrize("arg", ["a string", None, 3.5, object(), [[1.0, 2.0]], {"x": 1}])
def test_an_argument_that_is_not_a_tensor_is_a_type_error_saying_what_is_expected(arg):
    with pytest.raises(TypeError) as info:
        copies(arg)
    message = str(info.value)
    assert "copies" in message and "'x'" in message and type(arg).__name__ in message, message
    assert "array" in message  # what is expected instead


class KernelBug(ValueError):
    """An error of the kernel's own code."""


def test_an_error_of_the_users_own_callback_passes_through_unchanged():
    """The API's argument boundary converts bare errors of Knit's argument handling only: a
    ValueError raised by the user's branch function that nl.if_else calls is the user's own."""

    @nki.jit
    def branches(x):
        def then():
            raise KernelBug("the kernel's own mistake")

        nl.if_else(True, then)
        return x

    with pytest.raises(KernelBug, match="own mistake"):
        branches(np.zeros((2, 2), np.float32))


def test_a_value_knit_cannot_convert_is_an_argument_error_at_the_call():
    @nki.jit
    def shaped(x):
        t = nl.ndarray((128, float("inf")), nl.float32, buffer=nl.sbuf)  # @call
        return t

    with pytest.raises(ValueError) as info:
        shaped(np.zeros((2, 2), np.float32))
    err = info.value
    assert isinstance(err, nki.NkiValidationError) and err.rule == "argument"
    assert err.line == line_of(shaped.fn, "# @call") and "nl.ndarray()" in str(err)
