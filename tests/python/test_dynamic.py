"""Registers, device loops and branches, register-offset views, indirect DMA and dma_compute
(docs/language.md, "Device loops" and "Runtime offsets"), checked against NumPy / plain Python."""
import pathlib
import re

import numpy as np
import pytest

import knit as nki
import knit.isa as nisa
import knit.language as nl
from kernel_test_util import sum_first_n_tiles
from knit.errors import KnitError


def _count(kernel, opname, *args):
    return sum(1 for line in nki.compile(kernel, *args).ir.splitlines() if line.strip().startswith(opname + " "))


@nki.jit
def add_one_by_tiles(a):
    """A device loop over 128-row tiles: the body is traced once, the offset moves with i."""
    n, f = a.shape
    out = nl.ndarray((n, f), a.dtype, buffer=nl.shared_hbm)
    for i in nl.dynamic_range(n // 128):
        t = nl.ndarray((128, f), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[nl.ds(i * 128, 128), :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out


def test_dynamic_range_runs_on_device_and_matches_numpy():
    a = np.random.default_rng(0).random((512, 64), dtype=np.float32)
    np.testing.assert_array_equal(add_one_by_tiles(a), a + 1)
    assert _count(add_one_by_tiles, "dma_copy", a) == 2  # traced once, not unrolled
    assert _count(add_one_by_tiles, "loop", a) == 1


@pytest.mark.parametrize("n", [0, 1, 3])
def test_fori_loop_with_a_runtime_trip_count(n):
    a = np.random.default_rng(1).standard_normal((512, 8)).astype(np.float32)
    want = np.zeros((128, 8), np.float32)
    for i in range(n):  # same fp32 order as the kernel
        want = want + a[i * 128:(i + 1) * 128]
    np.testing.assert_array_equal(sum_first_n_tiles(a, np.array([[n]], np.int32)), want)


@nki.jit
def register_math(x):
    """Register arithmetic stored back: floor division, modulo, comparisons, products of registers."""
    xs = nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    a, b = nisa.scalar_load(xs[0:1, 0:1]), nisa.scalar_load(xs[0:1, 1:2])
    results = [a // b, a % b, a * b + 3 * a - 7, a < b, (a ^ b) << 2, -a]
    out_s = nl.ndarray((1, len(results)), nl.int32, buffer=nl.sbuf)
    for k, r in enumerate(results):
        nisa.scalar_store(out_s[0:1, k:k + 1], r)
    out = nl.ndarray((1, len(results)), nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_s)
    return out


@pytest.mark.parametrize("a,b", [(17, 5), (-17, 5), (17, -5), (3, 3)])
def test_register_arithmetic_matches_python(a, b):
    got = register_math(np.array([[a, b]], np.int32))[0].tolist()
    assert got == [a // b, a % b, a * b + 3 * a - 7, int(a < b), (a ^ b) << 2, -a]


@nki.jit
def collatz_steps(x):
    """while_loop + if_else: the number of Collatz steps from x to 1."""
    xs = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    v = nisa.register_alloc()
    nisa.register_load(v, xs)
    steps = nisa.register_alloc(0)

    def body(cond):
        nl.if_else(v % 2, lambda: nisa.register_move(v, v * 3 + 1), lambda: nisa.register_move(v, v // 2))
        nisa.register_move(steps, steps + 1)
        return v > 1

    nl.while_loop(v > 1, body)
    out_s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.register_store(out_s, steps)
    out = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_s)
    return out


@pytest.mark.parametrize("start", [1, 6, 27])
def test_while_loop_and_if_else(start):
    n, steps = start, 0
    while n > 1:
        n = 3 * n + 1 if n % 2 else n // 2
        steps += 1
    assert collatz_steps(np.array([[start]], np.int32))[0, 0] == steps


def test_python_control_flow_on_a_register_is_a_type_error():
    def kernel_with(body):
        @nki.jit
        def k(a):
            r = nisa.register_alloc(3)
            body(r)
            out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=a)
            return out

        return k

    a = np.zeros((1, 1), np.float32)
    for body in (lambda r: bool(r), lambda r: range(r), lambda r: int(r), lambda r: [x for x in r]):
        with pytest.raises(TypeError, match="exists only on the device"):
            kernel_with(body)(a)


@nki.jit
def gather_rows(table, idx, oob_skip):
    n, f = idx.shape[0], table.shape[1]
    it = nl.ndarray((n, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    t = nl.ndarray((n, f), table.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=-1.0)
    mode = nisa.oob_mode.skip if oob_skip else nisa.oob_mode.error
    nisa.dma_copy(dst=t, src=table.ap([[f, n], [1, f]], offset=0, vector_offset=it, indirect_dim=0), oob_mode=mode)
    out = nl.ndarray((n, f), table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_indirect_gather_matches_numpy_take():
    rng = np.random.default_rng(2)
    table = rng.standard_normal((100, 32)).astype(np.float32)
    idx = rng.integers(0, 100, size=(128, 1)).astype(np.int32)
    np.testing.assert_array_equal(gather_rows(table, idx, False), table[idx[:, 0]])


def test_indirect_out_of_range_row_is_an_error_or_skipped():
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    idx = np.array([[3], [10], [0], [-2]], np.int32)
    with pytest.raises(KnitError, match=r"index 10 \(entry 1.*oob_mode") as info:
        gather_rows(table, idx, False)
    assert info.value.file.endswith("test_dynamic.py")
    want = np.full((4, 4), -1.0, np.float32)
    want[0], want[2] = table[3], table[0]
    np.testing.assert_array_equal(gather_rows(table, idx, True), want)


@nki.jit
def scatter_add(dst, idx, vals, unique):
    n, f = vals.shape
    it = nl.ndarray((n, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    v = nl.ndarray((n, f), vals.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=vals)
    rows = dst.ap([[f, n], [1, f]], offset=0, vector_offset=it, indirect_dim=0)
    nisa.dma_compute(dst=rows, srcs=[rows, v], reduce_op=nl.add, unique_indices=unique)


def test_dma_compute_scatter_add_matches_np_add_at():
    rng = np.random.default_rng(3)
    base = rng.standard_normal((16, 8)).astype(np.float32)
    idx = rng.integers(0, 16, size=(32, 1)).astype(np.int32)
    vals = rng.standard_normal((32, 8)).astype(np.float32)
    got = base.copy()
    scatter_add(got, idx, vals, False)  # written back in place
    want = base.copy()
    np.add.at(want, idx[:, 0], vals)  # same order of fp32 adds
    np.testing.assert_array_equal(got, want)
    with pytest.raises(KnitError, match="unique_indices=True"):
        scatter_add(base.copy(), idx, vals, True)


@nki.jit
def sum3(a, b, c):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    nisa.dma_compute(out, [a, b, c], nl.add)
    return out


def test_dma_compute_sums_in_fp32():
    rng = np.random.default_rng(4)
    a, b, c = (rng.standard_normal((4, 64)).astype(np.float32) for _ in range(3))
    np.testing.assert_array_equal(sum3(a, b, c), (a + b) + c)


@nki.jit
def window_at(a, start):
    """.ap(scalar_offset=tensor): a runtime start row read from a 1x1 tensor."""
    s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=start)
    f = a.shape[1]
    t = nl.ndarray((4, f), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap([[f, 4], [1, f]], offset=0, scalar_offset=s, indirect_dim=0))
    out = nl.ndarray((4, f), a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_scalar_offset_and_its_runtime_bounds_check():
    a = np.arange(80, dtype=np.float32).reshape(10, 8)
    np.testing.assert_array_equal(window_at(a, np.array([[5]], np.int32)), a[5:9])
    with pytest.raises(KnitError, match="outside tensor") as info:
        window_at(a, np.array([[7]], np.int32))
    assert "r" in info.value.message and "= 7" in info.value.message


def test_register_index_on_the_partition_dim_is_rejected():
    @nki.jit
    def bad(a):
        t = nl.ndarray((128, 4), a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        for i in nl.dynamic_range(2):
            nisa.memset(dst=t[nl.ds(i, 1), :], value=1.0)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    with pytest.raises(KnitError, match="partition dim") as info:
        bad(np.zeros((128, 4), np.float32))
    assert info.value.rule == "dynamic-partition"
    assert info.value.file.endswith("test_dynamic.py")


@nki.jit
def gather_by_vector_select(table, idx):
    n = idx.shape[0]
    it = nl.ndarray((n, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    rows = table.vector_select(0, it)
    assert rows.is_indirect() and not table.is_indirect()
    t = nl.ndarray((n, table.shape[1]), table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=rows)
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_vector_select_gathers_more_rows_than_the_table_has():
    table = np.random.default_rng(5).standard_normal((6, 16)).astype(np.float32)
    idx = np.random.default_rng(6).integers(0, 6, size=(64, 1)).astype(np.int32)
    np.testing.assert_array_equal(gather_by_vector_select(table, idx), table[idx[:, 0]])


@nki.jit
def select_row_at(a, where):
    w = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=where)
    t = nl.ndarray((1, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.select(0, w))  # a 1x1 tensor as a runtime index
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_select_with_a_tensor_index():
    a = np.arange(40, dtype=np.float32).reshape(5, 8)
    np.testing.assert_array_equal(select_row_at(a, np.array([[3]], np.int32)), a[3:4])


@nki.jit
def shift_rows_up(a):
    """out[i - 1] = a[i] for i in 1..n-1: a negative constant in a register index is an offset
    (not Python's from-the-end index)."""
    n, f = a.shape
    out = nl.ndarray((n, f), a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[n - 1:n, :], src=a[0:1, :])
    for i in nl.dynamic_range(1, n):
        nisa.dma_copy(dst=out[i - 1, :], src=a[nl.ds(i, 1), :])
    return out


def test_negative_constant_in_a_register_index_is_an_offset():
    a = np.arange(24, dtype=np.float32).reshape(6, 4)
    np.testing.assert_array_equal(shift_rows_up(a), np.concatenate([a[1:], a[:1]]))

def test_ir_text_matches_the_golden_shared_with_the_cpp_kernels():
    """tests/golden holds these kernels' IR without source locations; test_dsl_dynamic.cpp checks
    that the same kernels written in C++ trace to the same text."""
    golden = pathlib.Path(__file__).resolve().parents[1] / "golden"
    cases = [("add_one_by_tiles", add_one_by_tiles, np.zeros((512, 64), np.float32)),
             ("collatz_steps", collatz_steps, np.array([[6]], np.int32))]
    for name, kernel, arg in cases:
        text = re.sub(r' @ "[^"]*":\d+(:\d+)?$', "", nki.compile(kernel, arg).ir, flags=re.M)
        assert text == (golden / f"{name}.tir").read_text()
