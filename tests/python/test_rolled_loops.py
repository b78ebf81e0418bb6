"""Rolled loops (knit/_rolled.py): an affine_range body traced once and expanded in C++ gives the
same IR as the unrolled trace, and every way a body can depend on its index's Python value (or
carry Python state to the next iteration) falls back to unrolling, with NumPy's answer."""
import os

import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl
from test_codegen import CASES, compiled_case, load_example


def _compile(fn, *args, roll="1", monkeypatch=None):
    """fn traced with KNIT_ROLL=roll (no disk cache: each trace is fresh)."""
    monkeypatch.setenv("KNIT_ROLL", roll)
    return knit.jit(fn).compile(*args)


def _both(fn, monkeypatch, *args):
    """(rolled Compiled, unrolled Compiled) of fn on args."""
    rolled = _compile(fn, *args, monkeypatch=monkeypatch)
    unrolled = _compile(fn, *args, roll="0", monkeypatch=monkeypatch)
    return rolled, unrolled


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("KNIT_CACHE_DIR", str(tmp_path))


# ---- rolled: the same IR as unrolled ---------------------------------------------------------
@pytest.mark.parametrize("case", [c for c in CASES if not c.startswith("legacy")])
def test_examples_trace_the_same_ir_rolled_and_unrolled(case, monkeypatch):
    """At the examples' test shapes (a ragged last row tile: those loops unroll)."""
    monkeypatch.setenv("KNIT_ROLL", "check")  # _kernel raises when the two IRs differ
    compiled_case.cache_clear()
    try:
        compiled_case(case, CASES[case][3][0])
    finally:
        compiled_case.cache_clear()


@pytest.mark.parametrize("name,nargs", [("tensor_add", 2), ("softmax", 1), ("rmsnorm", 1), ("layernorm", 1)])
def test_row_tiled_examples_roll_when_every_tile_is_full(name, nargs, monkeypatch):
    """`size = min(P, rows - i * P)` is P in every iteration when rows is a multiple of 128, so
    the comparison is decided while tracing and the loop stays rolled."""
    monkeypatch.setenv("KNIT_ROLL", "check")
    module = load_example(f"{name}.py")
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((1024, 256)).astype(np.float32) for _ in range(nargs)]
    args += [rng.standard_normal(256).astype(np.float32) for _ in range({"rmsnorm": 1, "layernorm": 2}.get(name, 0))]
    compiled = knit.compile(getattr(module, f"{name}_kernel"), *args)
    assert compiled.trace_info == {"rolled_loops": 1, "unrolled_loops": [], "traces": 1}
    want = module.reference(*[a.astype(np.float64) for a in args])
    np.testing.assert_allclose(compiled(*args), want, rtol=1e-5, atol=1e-5)


def tiled_copy(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        for j in nl.affine_range(a.shape[1] // 64):
            t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, nl.ds(j * 64, 64)])
            nisa.activation(dst=t, op=nl.exp, data=t)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64], src=t)
    return out


def test_nested_loops_roll_and_match_numpy(monkeypatch):
    a = np.random.default_rng(0).standard_normal((512, 256)).astype(np.float32)
    rolled, unrolled = _both(tiled_copy, monkeypatch, a)
    assert rolled.trace_info == {"rolled_loops": 2, "unrolled_loops": [], "traces": 1}
    assert rolled.core.text == unrolled.core.text
    np.testing.assert_array_equal(rolled(a), unrolled(a))
    np.testing.assert_allclose(rolled(a), np.exp(a), rtol=1e-6)


def test_the_body_runs_once_whatever_the_trip_count(monkeypatch):
    calls = []

    def body(a, out, i):
        calls.append(1)
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(a.shape[0] // 128):
            body(a, out, i)
        return out

    a = np.arange(4096 * 64, dtype=np.float32).reshape(4096, 64)
    compiled = _compile(kernel, a, monkeypatch=monkeypatch)
    assert len(calls) == 1 and compiled.core.num_instructions == 2 * 32
    np.testing.assert_array_equal(compiled(a), a)


# ---- falls back to unrolling, with the right answer -------------------------------------------
def first_iteration_special(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        if i == 0:
            nisa.memset(dst=t, value=7.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out


def python_list_by_index(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    scales = [1.0, 2.0, 3.0, 4.0]
    for i in nl.affine_range(4):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scales[i])
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out


def running_sum_by_rebinding(a):
    """acc = acc + x: Python state carried from one iteration to the next (prefix sums)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in nl.affine_range(a.shape[0] // 128):
        x = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[i * 128:(i + 1) * 128, :])
        new = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=new, data1=acc, data2=x, op=nl.add)
        acc = new
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=acc)
    return out


def tiles_collected_in_a_list(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tiles = []
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        tiles.append(t)
    for i, t in enumerate(reversed(tiles)):
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out


def last_tile_used_after_the_loop(a):
    out = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
    nisa.dma_copy(dst=out, src=t)
    return out


def enumerated(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for n, i in enumerate(nl.affine_range(a.shape[0] // 128)):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[n * 128:(n + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out


def stops_early(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=-1.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
        break
    return out


def previous_row_block(a):
    """a[(i - 1) * 128 ...] reaches before the tensor at i = 0 (Python's from-the-end rule there)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i - 1, :].reshape((1, a.shape[1])).broadcast(0, 128))
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out


def partition_blocks(a):
    """A symbol on an SBUF partition dim (which a register offset cannot index)."""
    out = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        nisa.dma_copy(dst=t[i * 32:(i + 1) * 32, :], src=a[i * 32:(i + 1) * 32, :])
    nisa.dma_copy(dst=out, src=t)
    return out


def named_by_index(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf, name=f"row{i}")
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out


def _numpy(name, a):
    blocks = a.reshape(-1, 128, a.shape[1])
    if name == "first_iteration_special":
        out = a.copy()
        out[:128] = 7.0
        return out
    if name == "python_list_by_index":
        return (blocks * np.array([1.0, 2.0, 3.0, 4.0], np.float32)[:, None, None]).reshape(a.shape)
    if name == "running_sum_by_rebinding":
        return np.cumsum(blocks, axis=0, dtype=np.float32).reshape(a.shape)
    if name == "tiles_collected_in_a_list":
        return blocks[::-1].reshape(a.shape)
    if name == "last_tile_used_after_the_loop":
        return blocks[-1]
    if name == "stops_early":
        out = a.copy()
        out[:128] = -1.0
        return out
    if name == "previous_row_block":
        rows = a[[(i * 1 - 1) % a.shape[0] for i in range(a.shape[0] // 128)]]
        return np.repeat(rows, 128, axis=0)
    if name == "partition_blocks":
        return a[:128]
    return a


FALLBACKS = [first_iteration_special, python_list_by_index, running_sum_by_rebinding, tiles_collected_in_a_list,
             last_tile_used_after_the_loop, enumerated, stops_early, previous_row_block, partition_blocks,
             named_by_index]


@pytest.mark.parametrize("fn", FALLBACKS, ids=lambda f: f.__name__)
def test_a_body_that_depends_on_python_values_is_unrolled(fn, monkeypatch):
    a = np.random.default_rng(1).standard_normal((512, 64)).astype(np.float32)
    rolled, unrolled = _both(fn, monkeypatch, a)
    assert rolled.core.text == unrolled.core.text
    np.testing.assert_array_equal(rolled(a), _numpy(fn.__name__, a))
    info = rolled.trace_info
    if fn is not enumerated:  # enumerate(...) is not a for statement's own iterable: never rolled
        assert info["unrolled_loops"] and info["traces"] >= 2, info
    assert all(os.path.samefile(f, __file__) for f, _ in info["unrolled_loops"])


def test_a_rebound_name_the_body_never_reads_keeps_the_loop_rolled(monkeypatch):
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        for i in nl.affine_range(a.shape[0] // 128):
            t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)  # t from before is dead
            nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
        return out

    a = np.random.default_rng(2).standard_normal((512, 64)).astype(np.float32)
    rolled, unrolled = _both(kernel, monkeypatch, a)
    assert rolled.trace_info["unrolled_loops"] == [] and rolled.core.text == unrolled.core.text


def out_of_bounds_at_the_last_iteration(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128 + 1):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out


def shape_mismatch_in_the_body(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, 32), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
    return out


@pytest.mark.parametrize("fn", [out_of_bounds_at_the_last_iteration, shape_mismatch_in_the_body],
                         ids=lambda f: f.__name__)
def test_a_mistake_in_a_rolled_body_is_reported_as_the_unrolled_trace_reports_it(fn, monkeypatch):
    a = np.zeros((512, 64), np.float32)
    errors = []
    for roll in ("1", "0"):
        with pytest.raises(knit.NkiValidationError) as e:
            _compile(fn, a, roll=roll, monkeypatch=monkeypatch)
        errors.append((str(e.value), e.value.line))
    assert errors[0] == errors[1]
    assert errors[0][1] > 0 and "rolled-loop" not in errors[0][0]


# ---- the G1 facade ------------------------------------------------------------------------------
def test_legacy_matmul_rolls_every_loop(monkeypatch):
    """`k * TILE_K + i_k` index expressions, `psum += nisa.nc_matmul(...)`: all three loops of the
    G1 tiled matmul stay rolled, with the unrolled trace's IR."""
    monkeypatch.setenv("KNIT_ROLL", "check")
    module = load_example("legacy/matmul.py")
    rng = np.random.default_rng(4)
    lhsT, rhs = rng.standard_normal((512, 256)).astype(np.float32), rng.standard_normal((512, 1024)).astype(np.float32)
    compiled = module.matmul_kernel.compile(lhsT, rhs)
    assert compiled.trace_info == {"rolled_loops": 3, "unrolled_loops": [], "traces": 1}
    np.testing.assert_allclose(compiled(lhsT, rhs), module.reference(lhsT, rhs), rtol=1e-4, atol=1e-4)


def test_legacy_psum_read_inside_the_body_unrolls(monkeypatch):
    """Reading a G1 PSUM accumulator inside the loop turns its later `+=` into accumulation onto
    real contents: the body is not the same in every iteration (prefix sums of products)."""
    import knit.legacy as lnki
    import knit.legacy.isa as lisa
    import knit.legacy.language as lnl

    def prefix_products(lhsT, rhs):
        out = lnl.ndarray((4, 128, 512), dtype=lnl.float32, buffer=lnl.shared_hbm)
        i_k, i_m = lnl.mgrid[0:128, 0:128]
        i_kn, i_n = lnl.mgrid[0:128, 0:512]
        i_p, i_f = lnl.mgrid[0:128, 0:512]
        acc = lnl.zeros((lnl.par_dim(128), 512), lnl.float32, buffer=lnl.psum)
        for k in lnl.affine_range(4):
            a = lnl.load(lhsT[k * 128 + i_k, i_m])
            b = lnl.load(rhs[k * 128 + i_kn, i_n])
            acc += lisa.nc_matmul(a, b)
            lnl.store(out[k, i_p, i_f], value=lnl.copy(acc))
        return out

    rng = np.random.default_rng(5)
    lhsT, rhs = rng.standard_normal((512, 128)).astype(np.float32), rng.standard_normal((512, 512)).astype(np.float32)
    monkeypatch.setenv("KNIT_ROLL", "check")
    compiled = lnki.jit(prefix_products).compile(lhsT, rhs)
    assert compiled.trace_info["unrolled_loops"], compiled.trace_info
    parts = [lhsT[k * 128:(k + 1) * 128].T.astype(np.float64) @ rhs[k * 128:(k + 1) * 128] for k in range(4)]
    np.testing.assert_allclose(compiled(lhsT, rhs), np.cumsum(parts, axis=0), rtol=1e-4, atol=1e-3)


def test_a_program_is_cached_only_when_rebuilding_it_costs_more_than_loading(monkeypatch):
    """The program disk cache writes a program only when trace + lower took longer than loading
    it would (CACHE_LOAD_SECONDS_PER_INSTRUCTION per instruction)."""
    from knit import _kernel, _program_cache

    a = np.random.default_rng(6).standard_normal((512, 64)).astype(np.float32)
    # This kernel's own entry (the folder is the session's, which pytest-xdist workers share).
    probe = knit.jit(tiled_copy)
    probe.compile(a)
    entry = os.path.join(_program_cache.directory(), probe._disk_name(next(iter(probe._cache))) + ".knp")
    for per_instruction, stored in ((1.0, False), (0.0, True)):  # loading: 1 s an instruction / free
        monkeypatch.setattr(_kernel, "CACHE_LOAD_SECONDS_PER_INSTRUCTION", per_instruction)
        if os.path.exists(entry):
            os.remove(entry)
        compiled = knit.jit(tiled_copy).compile(a)
        np.testing.assert_allclose(compiled(a), np.exp(a), rtol=1e-6)
        assert compiled.trace_seconds > 0
        assert os.path.exists(entry) == stored
