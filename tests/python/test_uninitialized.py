"""Never-written memory (issue 24, item 2; docs/simulator.md "Never-written memory").

By default a read of never-written memory is not an error: the value read (NaN / 4) is poison,
what is computed from it is poison, and poison is an error only where it matters: in a kernel
output, in a register, as an indirect index. KNIT_UNINITIALIZED=error keeps the strict check of
every read, =warn reports the same places as warnings, =off checks nothing.

Each kernel runs on the default (jit) backend and on the reference executors: same results, same
errors. Correct kernels are checked against NumPy; failing ones name the line of the first
never-written read (marked `# @first` in the kernel) and an affected output element.
"""
import re

import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl

BACKENDS = ["jit", "reference"]


@pytest.fixture(autouse=True)
def _default_mode(monkeypatch):
    monkeypatch.delenv("KNIT_UNINITIALIZED", raising=False)


def run(kernel, backend, *args):
    return knit.compile(kernel, *args).run(*args, backend=backend)


def marked_line(kernel, marker="# @first"):
    """The line of `marker` inside the kernel `kernel` of this file."""
    with open(__file__) as f:
        lines = f.read().splitlines()
    start = next(i for i, text in enumerate(lines) if text.startswith(f"def {kernel.fn.__name__}("))
    return next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith(marker)) + 1


def error_of(kernel, backend, *args):
    """The KnitRuntimeError running `kernel` on `args` raises."""
    with pytest.raises(knit.KnitRuntimeError) as info:
        run(kernel, backend, *args)
    return info.value


def first_read_line(kernel):
    return marked_line(kernel)


def check_poison_error(err, kernel, rule, element):
    """err is `rule`, located at the kernel's first never-written read, naming `element`."""
    assert isinstance(err, knit.KnitRuntimeError), repr(err)
    assert err.rule == rule, str(err)
    assert err.line == first_read_line(kernel), str(err)
    assert f"first read at {err.file}:{err.line}: " in err.message, err.message
    assert element in err.message, err.message


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- correct kernels whose never-written values never matter -------------------------------------


@knit.jit
def exp_of_partial_tile(x):
    """Rows [0, n) of a 128-row tile are loaded, exp runs on all 128, only rows [0, n) are stored."""
    n = x.shape[0]
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:n, :], src=x)
    nisa.activation(dst=t, op=nl.exp, data=t)  # @first
    nisa.dma_copy(dst=out, src=t[0:n, :])
    return out


@knit.jit
def add_of_partial_columns(x):
    """Columns [0, 6) of 8 written, added to themselves whole, columns [0, 6) stored."""
    out = nl.ndarray((128, 6), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 8), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:6], src=x)
    u = nl.ndarray((128, 8), x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=u, data1=t, data2=t, op=nl.add)  # @first
    nisa.dma_copy(dst=out, src=u[:, 0:6])
    return out


@knit.jit
def row_sums_of_written_rows(x):
    """Row sums over a tile whose rows [n, 128) were never written; only rows [0, n) stored."""
    n, f = x.shape
    out = nl.ndarray((n, 1), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, f), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:n, :], src=x)
    s = nl.ndarray((128, 1), x.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s, op=nl.add, data=t, axis=1)  # @first
    nisa.dma_copy(dst=out, src=s[0:n, :])
    return out


@knit.jit
def overwritten_before_output(x):
    """Poison computed into a tile that a memset then overwrites: nothing undefined is left."""
    out = nl.ndarray((128, 4), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 4), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:64, :], src=x)
    u = nl.ndarray((128, 4), x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=2.0)  # @first
    nisa.memset(dst=u[64:128, :], value=1.0)
    nisa.dma_copy(dst=out, src=u)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_correct_kernels_with_never_written_lanes_run_and_match_numpy(backend):
    x = randn(100, 16)
    np.testing.assert_allclose(run(exp_of_partial_tile, backend, x), np.exp(x), rtol=1e-5)
    y = randn(128, 6, seed=1)
    np.testing.assert_array_equal(run(add_of_partial_columns, backend, y), y + y)
    z = randn(100, 32, seed=2)
    np.testing.assert_allclose(run(row_sums_of_written_rows, backend, z), z.sum(axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-5)
    w = randn(64, 4, seed=3)
    want = np.concatenate([2 * w, np.ones((64, 4), np.float32)])
    np.testing.assert_array_equal(run(overwritten_before_output, backend, w), want)


def test_device_print_of_a_partly_written_tile_warns_and_prints_the_fill(capsys):
    """NKI's simulator prints the NaN fill of never-written lanes and goes on: printing poison is a
    warning, not an error, and the kernel's real output is still checked."""
    @knit.jit
    def show_partial(x):
        n = x.shape[0]
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((4, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:n, :], src=x)
        nisa.activation(dst=t, op=nl.exp, data=t)
        nl.device_print("whole", t)
        nisa.dma_copy(dst=out, src=t[0:n, :])
        return out

    x = randn(2, 3)
    got = show_partial(x)
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-5)
    printed = capsys.readouterr().out
    assert 'warning: [uninitialized-output] nl.device_print("whole") element [2, 0]' in printed, printed
    assert "whole:" in printed and "nan" in printed


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_masked_legacy_store_of_a_partly_loaded_tile_runs(backend):
    """The legacy (G1) pattern: a masked load, math on the whole tile, a masked store."""
    import knit.legacy as lnki
    import knit.legacy.language as lnl

    @lnki.jit
    def masked(x):
        n = x.shape[0]
        out = lnl.ndarray(x.shape, dtype=x.dtype, buffer=lnl.shared_hbm)
        i_p, i_f = lnl.mgrid[0:128, 0:x.shape[1]]
        t = lnl.load(x[i_p, i_f], mask=(i_p < n))
        e = lnl.exp(t)
        lnl.store(out[i_p, i_f], value=e, mask=(i_p < n))
        return out

    x = randn(72, 8, seed=4)
    got = knit.compile(masked, x).run(x, backend=backend)
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-5)


# ---- real bugs: poison reaches an output ---------------------------------------------------------


@knit.jit
def stores_partial_tile_whole(x):
    """Bug: rows [n, 128) of t are never written but the whole of exp(t) is stored."""
    out = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:x.shape[0], :], src=x)
    nisa.activation(dst=t, op=nl.exp, data=t)  # @first
    nisa.dma_copy(dst=out, src=t)
    return out


@knit.jit
def matmul_over_partial_stationary(a, b):
    """Bug: column 5 of the stationary operand (K x M) is never written; it reaches dst row 5."""
    k, m = a.shape
    out = nl.ndarray((m, b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    st = nl.ndarray((k, m), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=st[:, 0:5], src=a[:, 0:5])
    nisa.dma_copy(dst=st[:, 6:m], src=a[:, 6:m])
    mv = nl.ndarray(b.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv, src=b)
    ps = nl.ndarray((m, b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=st, moving=mv)  # @first
    res = nl.ndarray((m, b.shape[1]), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=out, src=res)
    return out


@knit.jit
def matmul_rows_without_the_poisoned_one(a, b):
    """As above, but only dst rows [0, 5) are stored: the poisoned row 5 never reaches the output."""
    k, m = a.shape
    out = nl.ndarray((5, b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    st = nl.ndarray((k, m), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=st[:, 0:5], src=a[:, 0:5])
    mv = nl.ndarray(b.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv, src=b)
    ps = nl.ndarray((m, b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=st, moving=mv)  # @first
    res = nl.ndarray((m, b.shape[1]), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=out, src=res[0:5, :])
    return out


@knit.jit
def sums_rows_with_a_hole(x):
    """Bug: element (3, 7) of t is never written; the reduction carries it into row 3's sum."""
    out = nl.ndarray((x.shape[0], 1), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:3, :], src=x[0:3, :])
    nisa.dma_copy(dst=t[3:4, 0:7], src=x[3:4, 0:7])
    nisa.dma_copy(dst=t[4:x.shape[0], :], src=x[4:x.shape[0], :])
    s = nl.ndarray((x.shape[0], 1), x.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s, op=nl.add, data=t, axis=1)  # @first
    nisa.dma_copy(dst=out, src=s)
    return out


@knit.jit
def partition_sums_with_a_hole(x, keep_column_3):
    """Column 3 of partitions [64, 128) is never written; partition_reduce sums down each column,
    so only column 3 of the result is poison. Stored with or without it."""
    p, f = x.shape
    t = nl.ndarray((p, f), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:3], src=x[:, 0:3])
    nisa.dma_copy(dst=t[0:64, 3:4], src=x[0:64, 3:4])
    nisa.dma_copy(dst=t[:, 4:f], src=x[:, 4:f])
    s = nl.ndarray((1, f), x.dtype, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=s, op=nl.add, data=t)  # @first
    if keep_column_3:
        out = nl.ndarray((1, f), x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=s)
    else:
        out = nl.ndarray((1, f - 1), x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[:, 0:3], src=s[:, 0:3])
        nisa.dma_copy(dst=out[:, 3:f - 1], src=s[:, 4:f])
    return out


@knit.jit
def harmless_garbage_then_a_bug(x):
    """A harmless never-written read (its poison never stored), then the bug the error must name."""
    n = x.shape[0]
    out = nl.ndarray((n, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:n, :], src=x)
    nisa.activation(dst=t, op=nl.exp, data=t)  # @harmless
    u = nl.ndarray((n, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u[:, 0:2], src=x[:, 0:2])
    v = nl.ndarray((n, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=v, data1=t[0:n, :], data2=u, op=nl.add)  # @first
    nisa.dma_copy(dst=out, src=v)
    return out


@knit.jit
def accumulates_into_never_initialized(x):
    """Bug: acc is never initialized, every output element depends on it."""
    out = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)  # @first
    nisa.dma_copy(dst=out, src=acc)
    return out


@knit.jit
def matmul_accumulates_into_fresh_psum(a, b):
    """Bug: accumulate=True into PSUM no matmul wrote: every element of the result is undefined."""
    out = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    st = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=st, src=a)
    mv = nl.ndarray(b.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv, src=b)
    ps = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=st, moving=mv, accumulate=True)  # @first
    res = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_poison_in_an_output_via_an_elementwise_op_is_an_error(backend):
    err = error_of(stores_partial_tile_whole, backend, randn(100, 8))
    # The first output element computed from a never-written one: row 100, column 0.
    check_poison_error(err, stores_partial_tile_whole, "uninitialized-output", "element [100, 0]")
    assert "activation reads data element [100, 0]" in err.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_poison_in_an_output_via_matmul_contraction_is_an_error(backend):
    a, b = randn(32, 16, seed=5), randn(32, 24, seed=6)
    err = error_of(matmul_over_partial_stationary, backend, a, b)
    # Stationary column 5 reaches dst row 5 (all of it) and no other row.
    check_poison_error(err, matmul_over_partial_stationary, "uninitialized-output", "element [5, 0]")
    got = run(matmul_rows_without_the_poisoned_one, backend, a, b)
    np.testing.assert_allclose(got, (a.T @ b)[0:5], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_poison_in_an_output_via_a_reduction_is_an_error(backend):
    err = error_of(sums_rows_with_a_hole, backend, randn(16, 8, seed=7))
    check_poison_error(err, sums_rows_with_a_hole, "uninitialized-output", "element [3, 0]")


@pytest.mark.parametrize("backend", BACKENDS)
def test_poison_across_partitions_stays_in_its_column(backend):
    x = randn(128, 6, seed=12)
    got = run(partition_sums_with_a_hole, backend, x, False)
    np.testing.assert_allclose(got, np.delete(x.sum(axis=0, keepdims=True), 3, axis=1), rtol=1e-4, atol=1e-4)
    err = error_of(partition_sums_with_a_hole, backend, x, True)
    check_poison_error(err, partition_sums_with_a_hole, "uninitialized-output", "element [0, 3]")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_error_names_the_read_the_poison_comes_from(backend):
    """Not merely the run's first never-written read: the one whose poison reached the output."""
    err = error_of(harmless_garbage_then_a_bug, backend, randn(100, 4, seed=13))
    check_poison_error(err, harmless_garbage_then_a_bug, "uninitialized-output", "element [0, 2]")
    assert f":{marked_line(harmless_garbage_then_a_bug, '# @harmless')}:" not in err.message
    assert "tensor_tensor reads data2 element [0, 2]" in err.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_accumulating_into_a_never_initialized_tile_fails_loudly(backend):
    err = error_of(accumulates_into_never_initialized, backend, randn(256, 4, seed=8))
    check_poison_error(err, accumulates_into_never_initialized, "uninitialized-output", "element [0, 0]")


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmul_accumulating_into_fresh_psum_fails(backend):
    a, b = randn(8, 4, seed=9), randn(8, 4, seed=10)
    err = error_of(matmul_accumulates_into_fresh_psum, backend, a, b)
    check_poison_error(err, matmul_accumulates_into_fresh_psum, "uninitialized-output", "element [0, 0]")


# ---- real bugs: poison used as a register, a loop bound, an index --------------------------------


@knit.jit
def loop_bound_from_never_written(x):
    """Bug: the trip count is loaded from a tile element that was never written."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    counts = nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=counts[:, 0:1], value=1)
    count = nisa.register_alloc()
    nisa.register_load(count, counts[:, 1:2])  # @first
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)

    def body(i):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)

    nl.fori_loop(0, count, body)
    nisa.dma_copy(dst=out, src=t)
    return out


@knit.jit
def register_from_poisoned_value(x):
    """Bug: the register is loaded from a value computed from a never-written element."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    raw = nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=raw[:, 0:1], value=3)
    doubled = nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=doubled, data=raw, op0=nl.multiply, operand0=2)  # @first
    r = nisa.register_alloc()
    nisa.register_load(r, doubled[:, 1:2])  # @use
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


@knit.jit
def gathers_with_poisoned_indices(table, idx):
    """Bug: index rows [4, 8) were never written; the indirect DMA uses them as row numbers."""
    n, f = 8, table.shape[1]
    it = nl.ndarray((n, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it[0:4, :], src=idx)
    t = nl.ndarray((n, f), table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=table.ap([[f, n], [1, f]], offset=0, vector_offset=it, indirect_dim=0))  # @first
    out = nl.ndarray((n, f), table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_bound_from_never_written_memory_is_an_error(backend):
    err = error_of(loop_bound_from_never_written, backend, randn(4, 4))
    check_poison_error(err, loop_bound_from_never_written, "uninitialized-use", "src element [0, 0]")
    assert "into a register" in err.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_register_loaded_from_poison_is_an_error_at_the_load(backend):
    err = error_of(register_from_poisoned_value, backend, randn(4, 4))
    assert err.rule == "uninitialized-use"
    assert err.line == marked_line(register_from_poisoned_value, "# @use")
    assert f"first read at {err.file}:{first_read_line(register_from_poisoned_value)}: " in err.message
    assert "computed from never-written memory" in err.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_read_from_never_written_memory_is_an_error(backend):
    table, idx = randn(16, 4, seed=11), np.arange(4, dtype=np.int32).reshape(4, 1)
    err = error_of(gathers_with_poisoned_indices, backend, table, idx)
    check_poison_error(err, gathers_with_poisoned_indices, "uninitialized-use", "vector_offset element [4, 0]")
    assert "as an index" in err.message


# ---- KNIT_UNINITIALIZED ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_error_mode_is_the_strict_check_of_every_read(backend, monkeypatch):
    monkeypatch.setenv("KNIT_UNINITIALIZED", "error")
    err = error_of(exp_of_partial_tile, backend, randn(100, 16))
    assert err.rule == "uninitialized-read" and err.line == first_read_line(exp_of_partial_tile)
    assert "element [100, 0]" in err.message and "never written" in err.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_warn_mode_reports_the_same_places_as_warnings(backend, monkeypatch, capsys):
    monkeypatch.setenv("KNIT_UNINITIALIZED", "warn")
    x = randn(100, 8)
    got = run(stores_partial_tile_whole, backend, x)
    printed = capsys.readouterr().out
    assert re.search(r"warning: \[uninitialized-output\] kernel output '\w+' element \[100, 0\]", printed), printed
    np.testing.assert_allclose(got[:100], np.exp(x), rtol=1e-5)
    assert np.isnan(got[100:]).all()  # exp(NaN): the fresh-memory value, as NKI's simulator computes
    # A correct kernel warns about nothing.
    run(exp_of_partial_tile, backend, x)
    assert "uninitialized" not in capsys.readouterr().out


@pytest.mark.parametrize("backend", BACKENDS)
def test_off_mode_checks_nothing(backend, monkeypatch, capsys):
    monkeypatch.setenv("KNIT_UNINITIALIZED", "off")
    x = randn(100, 8)
    got = run(stores_partial_tile_whole, backend, x)
    assert "uninitialized" not in capsys.readouterr().out
    np.testing.assert_allclose(got[:100], np.exp(x), rtol=1e-5)
    assert np.isnan(got[100:]).all()


def test_an_unknown_mode_is_refused(monkeypatch):
    monkeypatch.setenv("KNIT_UNINITIALIZED", "loud")
    with pytest.raises(ValueError, match="KNIT_UNINITIALIZED must be"):
        run(exp_of_partial_tile, "reference", randn(100, 16))
