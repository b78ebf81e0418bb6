"""NKI's scheduling APIs (nki-0.6-additions.md §4; knit/_schedule.py): name= on every nki.isa
call and on tensor creation, kernel.with_schedule, nl.no_reorder and NkiInstruction.depends_on.

The edges must reach the engine program: two independent instructions on different engines
overlap in the timing model, and an edge between them becomes a semaphore wait that serializes
them. Results never change (data dependences are untouched): every kernel is also checked
against NumPy."""
import contextlib
import inspect
import re
import warnings

import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl
from knit import NkiValidationError
from knit._schedule import NkiInstruction, ScheduleWarning

P, F = 128, 2048
S = 16  # columns stored: small, so the DMA does not hide the compute engines' timing


def double_right_half(rb, t):
    """A helper issuing the VectorE instruction (named: left open, the engine assignment could put
    it on ScalarE): no_reorder's scope covers what helpers issue."""
    return nisa.tensor_scalar(rb, t[:, 1, :], nl.multiply, 2.0, engine=nisa.engine.vector, name="vec")


def two_engines(ab, order=None):
    """exp(ab[:, 0]) on ScalarE and 2*ab[:, 1] on VectorE: independent, so they overlap unless
    ordered (both halves arrive in one DMA, so both can start at once). `order`: None, or
    "no_reorder" / "depends_on" to order them by that API."""
    out_a = nl.ndarray((P, S), nl.float32, buffer=nl.shared_hbm)
    out_b = nl.ndarray((P, S), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((P, 2, F), nl.float32)
    load = nisa.dma_copy(t, ab)
    ra = nl.ndarray((P, F), nl.float32)
    rb = nl.ndarray((P, F), nl.float32)
    with nl.no_reorder() if order == "no_reorder" else contextlib.nullcontext():
        first = nisa.activation(ra, nl.exp, t[:, 0, :], name="act")
        second = double_right_half(rb, t)
    if order == "depends_on":
        assert isinstance(first, NkiInstruction) and first.name == "act"
        assert second.depends_on(first).depends_on(load) is second
    nisa.dma_copy(out_a, ra[:, 0:S])
    nisa.dma_copy(out_b, rb[:, 0:S])
    return out_a, out_b


def inputs():
    return np.random.default_rng(0).standard_normal((P, 2, F)).astype(np.float32)


def body_lines(ir_text):
    """The IR text's instruction lines, one per body index."""
    lines = [line.strip() for line in ir_text.splitlines()]
    return [line for line in lines if line and line.split(" ")[0] not in ("kernel", "param", "tensor", "return", "}")]


def timeline_by_name(profile):
    """{name: (start_ns, end_ns)} of the named instructions in a profile's timeline."""
    labels = [re.search(r'name="([^"]*)"', line) for line in body_lines(profile._program.text)]
    return {labels[ir].group(1): (start, end) for _, ir, _, start, end, *_ in profile._timeline if labels[ir]}


def check_two_engines(result, ab):
    np.testing.assert_allclose(result[0], np.exp(ab[:, 0, 0:S]), rtol=1e-5)
    np.testing.assert_array_equal(result[1], 2 * ab[:, 1, 0:S])


def test_with_schedule_turns_an_edge_into_a_wait_that_the_timing_model_honours():
    ab = inputs()
    kernel = knit.jit(two_engines)
    scheduled = kernel.with_schedule([("vec", "act")])
    base = knit.profile(kernel, ab)
    after = knit.profile(scheduled, ab)
    check_two_engines(base.outputs, ab)
    check_two_engines(after.outputs, ab)
    t0, t1 = timeline_by_name(base), timeline_by_name(after)
    assert t0["vec"][0] < t0["act"][1], "without the edge the two engines overlap"
    assert t1["vec"][0] >= t1["act"][1], "with the edge VectorE starts after ScalarE finished"
    # Both start when the load ends; the compute ends with the longer of the two without the edge,
    # after both with it: serializing them costs the shorter one (plus one semaphore hop). (The
    # kernel's end also waits for the two stores, which run in order on the store queue.)
    shorter = min(t0["act"][1] - t0["act"][0], t0["vec"][1] - t0["vec"][0])
    delta = max(t1["act"][1], t1["vec"][1]) - max(t0["act"][1], t0["vec"][1])
    assert shorter <= delta < 1.1 * shorter + 100
    assert after.total_ns > base.total_ns
    # The engine program shows the wait: the VectorE instruction waits for the ScalarE queue.
    vec_line = next(line for line in scheduled.compile(ab).asm.splitlines() if 'name="vec"' in line)
    assert re.search(r"wait .*act>=1", vec_line), vec_line
    base_vec = next(line for line in kernel.compile(ab).asm.splitlines() if 'name="vec"' in line)
    assert "act>=" not in base_vec
    assert kernel.compile(ab) is not scheduled.compile(ab)  # the original kernel is unchanged


def test_with_schedule_records_the_edge_in_the_ir_text():
    ab = inputs()
    body = body_lines(knit.jit(two_engines).with_schedule([("vec", ["act"])]).compile(ab).ir)
    act = next(i for i, line in enumerate(body) if 'name="act"' in line)
    vec = next(line for line in body if 'name="vec"' in line)
    assert f"after=[{act}]" in vec


def test_with_schedule_errors_and_warnings():
    ab = inputs()
    kernel = knit.jit(two_engines)
    with pytest.raises(NkiValidationError, match=r"'veq'.*did you mean 'vec'"):
        kernel.with_schedule([("veq", "act")]).compile(ab)
    with pytest.raises(NkiValidationError, match="cycle"):
        kernel.with_schedule([("vec", "act"), ("act", "vec")]).compile(ab)
    with pytest.raises(NkiValidationError, match="cycle") as e:
        kernel.with_schedule([("vec", "act"), ("act", "vec")]).compile(ab)
    assert e.value.file == __file__  # the with_schedule call's line
    with pytest.raises(TypeError, match="pairs"):
        kernel.with_schedule("vec")
    with pytest.raises(TypeError, match="producers"):
        kernel.with_schedule([("vec", [])])


def test_with_schedule_warns_on_a_duplicated_name_and_uses_the_latest_earlier_producer():
    def k(a):
        out = nl.ndarray((P, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((P, 8), nl.float32)
        nisa.dma_copy(t, a[:, 0:8])
        u = nl.ndarray((P, 8), nl.float32)
        for i in range(2):
            nisa.activation(u, nl.exp, t, name="step")
            nisa.tensor_scalar(t, t, nl.add, 1.0, name="next")
        nisa.dma_copy(out, u)
        return out

    a = inputs()[:, 0, :]
    with pytest.warns(ScheduleWarning, match="'step' labels 2"):
        compiled = knit.jit(k).with_schedule([("next", "step")]).compile(a)
    lines = body_lines(compiled.ir)
    steps = [i for i, line in enumerate(lines) if line.startswith("activation")]
    nexts = [line for line in lines if line.startswith("tensor_scalar")]
    assert f"after=[{steps[0]}]" in nexts[0] and f"after=[{steps[1]}]" in nexts[1]
    np.testing.assert_allclose(compiled(a), np.exp(a[:, 0:8] + 1), rtol=1e-5)


@pytest.mark.parametrize("order", ["no_reorder", "depends_on"])
def test_no_reorder_and_depends_on_order_the_engines(order):
    ab = inputs()
    prof = knit.profile(knit.jit(two_engines), ab, order)
    check_two_engines(prof.outputs, ab)
    t = timeline_by_name(prof)
    assert t["vec"][0] >= t["act"][1]
    vec_line = next(line for line in knit.compile(two_engines, ab, order).asm.splitlines() if 'name="vec"' in line)
    assert "act>=1" in vec_line


@pytest.mark.parametrize("loop", ["fori_loop", "while_loop", "dynamic_range"])
def test_no_reorder_rejects_device_loops(loop):
    def k(a):
        out = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
        t = nl.zeros((1, 1), nl.int32)
        with nl.no_reorder():
            if loop == "fori_loop":
                nl.fori_loop(0, 2, lambda i: None)
            elif loop == "while_loop":
                nl.while_loop(nisa.register_alloc(0), lambda r: r)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    for _ in nl.dynamic_range(2):
                        pass
        nisa.dma_copy(out, t)
        return out

    with pytest.raises(NkiValidationError, match="no_reorder"):
        knit.compile(k, np.zeros((1, 1), np.int32))


def test_no_reorder_allows_static_loops():
    def k(a):
        out = nl.ndarray((P, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((P, 8), nl.float32)
        nisa.dma_copy(t, a[:, 0:8])
        with nl.no_reorder():
            for _ in nl.affine_range(3):
                nisa.tensor_scalar(t, t, nl.add, 1.0)
        nisa.dma_copy(out, t)
        return out

    a = inputs()[:, 0, :]
    want = a[:, 0:8]
    for _ in range(3):
        want = want + np.float32(1)  # fp32 adds, one per iteration
    np.testing.assert_array_equal(knit.jit(k)(a), want)


def test_depends_on_rules():
    def k(a, case):
        out = nl.ndarray((P, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((P, 8), nl.float32)
        first = nisa.dma_copy(t, a[:, 0:8])
        second = nisa.tensor_scalar(t, t, nl.add, 1.0)
        if case == "backward":
            first.depends_on(second)
        elif case == "not a handle":
            second.depends_on(t)
        elif case == "inner block":
            handles = []
            nl.fori_loop(0, 2, lambda i: handles.append(nisa.tensor_scalar(t, t, nl.add, 1.0)))
            nisa.dma_copy(out, t).depends_on(handles[0])
        nisa.dma_copy(out, t)
        return out

    a = inputs()[:, 0, :]
    for case, msg in [("backward", "issued after"), ("not a handle", "instruction handles"),
                      ("inner block", "enclosing")]:
        with pytest.raises(NkiValidationError, match=msg):
            knit.compile(k, a, case)


def test_every_isa_instruction_takes_name_and_records_it():
    from knit._keywords import checked  # noqa: F401  (the wrapper keeps the signature)

    for fname in dir(nisa):
        fn = getattr(nisa, fname)
        if fname.startswith("_") or not inspect.isfunction(fn):
            continue
        params = inspect.signature(fn).parameters
        if any(p in params for p in ("dst", "src", "data", "dst_idx", "x", "src_seeds")) or fname.startswith(
                ("register_", "scalar_", "core_barrier", "sendrecv", "nc_", "dma_")):
            assert "name" in params, f"nisa.{fname} has no name= parameter"

    def k(a):
        out = nl.ndarray((P, 8), nl.float32, buffer=nl.shared_hbm)
        t = nl.zeros((P, 8), nl.float32, name="zeros_t")
        nisa.tensor_tensor(t, t, t, nl.add, name=f"tt{1}")
        nisa.dma_copy(out, t, name="store")
        return out

    ir = knit.compile(k, inputs()[:, 0, :]).ir
    assert re.search(r'memset .*name="zeros_t"', ir)
    assert 'name="tt1"' in ir and 'name="store"' in ir
    with pytest.raises(NkiValidationError, match="name= must be a string"):
        knit.compile(lambda a: nisa.memset(nl.ndarray((P, 8), nl.float32), 0.0, name=3), inputs()[:, 0, :])
