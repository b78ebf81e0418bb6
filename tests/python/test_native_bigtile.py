"""The native path's big-tile fast paths (issue 25 item 3; docs/jit.md, docs/performance.md).

At big shapes the JIT backend skips work the reference interpreter does: a fresh HBM tensor's NaN
fill is owed and written only into bytes still unwritten when something may see them (a read on
the reference executors, or the output leaving), an output leaves as the run's own memory without
a copy, and every large instruction is split into parts the threads take as they come free. Each
must leave the bytes, warnings and errors of the reference interpreter (`Compiled.reference`),
which has none of them; reads of never-written memory must still be caught.
"""
import gc
import os
import runpy

import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl
from kernel_test_util import errors_of_both

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "kernels", "python")


def example(name):
    return runpy.run_path(os.path.join(EXAMPLES, f"{name}.py"))[f"{name}_kernel"]


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def same_bytes(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.fixture(autouse=True)
def _default_mode(monkeypatch):
    monkeypatch.delenv("KNIT_UNINITIALIZED", raising=False)


# ---- the example kernels at tiles big enough to split ------------------------------------------

# 128 x 1024 fp32 elements per instruction: above the 2^16 at which an instruction is split into
# parts over the threads; 512 rows: four tiles, so pooled blocks are reused between tiles too.
ROWS, COLS = 512, 1024


def row_kernel_cases():
    x, y, w, b = randn(ROWS, COLS), randn(ROWS, COLS, seed=1), randn(COLS, seed=2), randn(COLS, seed=3)
    return [("tensor_add", (x, y)), ("softmax", (x,)), ("rmsnorm", (x, w)), ("layernorm", (x, w, b))]


@pytest.mark.parametrize("name,args", row_kernel_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_row_kernels_at_big_tiles_give_the_reference_bytes(name, args):
    c = knit.compile(example(name), *args)
    ref = c.reference(*args)
    for _ in range(2):  # the second run reuses the first run's pooled memory
        out = c.run(*args, backend="jit-strict")
        assert c.last_run["native"] > 0 and c.last_run["interpreted"] == 0, c.last_run
        assert same_bytes(out, ref)


# ---- instructions whose walk has a single row ----------------------------------------------------

# An HBM operand, or a tile of one partition, walks as [1, ..., columns]: such an instruction
# splits along its outermost dim of more than one index instead of its (single) row, down to the
# innermost dim. 80000 bf16 elements: above the 2^16 split size, within one partition.
WIDE = 80000


@knit.jit
def single_row_kernel(x, cube):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    cube_out = nl.ndarray(cube.shape, dtype=cube.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=cube_out, src=cube)  # HBM -> HBM, [1, 1, 1, all] after merging
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)  # one tile: two would not fit
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3.0)
    # value = column - WIDE / 2: the second half keeps t, the first half becomes -1.
    nisa.affine_select(dst=t, pattern=[[1, WIDE]], channel_multiplier=0, on_true_tile=t,
                       on_false_value=-1.0, cmp_op=nl.greater_equal, offset=-WIDE // 2)
    nisa.dma_copy(dst=out, src=t)
    return out, cube_out


def test_single_row_instructions_split_along_their_columns_give_the_reference_bytes():
    import ml_dtypes

    x = randn(1, WIDE).astype(ml_dtypes.bfloat16)
    cube = randn(3, 4, 20000, seed=1)
    c = knit.compile(single_row_kernel, x, cube)
    ref = c.reference(x, cube)
    out = c.run(x, cube, backend="jit-strict")
    assert c.last_run["native"] > 0 and c.last_run["interpreted"] == 0, c.last_run
    assert all(same_bytes(o, r) for o, r in zip(out, ref))
    assert np.array_equal(out[1], cube)
    columns = np.arange(WIDE)[None, :]
    expected = np.where(columns >= WIDE // 2, (x.astype(np.float32) * 3).astype(ml_dtypes.bfloat16), -1)
    assert np.array_equal(out[0].astype(np.float32), expected.astype(np.float32))


# ---- row folds and bn_stats, several partitions side by side -----------------------------------

# The native bodies fold 8 partitions' rows side by side (each row still one chain in element
# order), then the partitions left over one at a time: 21 partitions = two blocks of 8 and 5 alone.
# A bf16 input widens the values' range of rounding, and 3 x 700 free elements cross the 256-element
# chunks and take the outer-dims path for the [P, 3, 700] view.
@knit.jit
def folds_kernel(x):
    sums = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    stats = nl.ndarray((x.shape[0], 6), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=e, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=s)
    nisa.dma_copy(dst=sums, src=s)
    st = nl.ndarray((x.shape[0], 6), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(dst=st, data=t[:, 0, 0:500])
    nisa.dma_copy(dst=stats, src=st)
    return sums, stats


def test_row_folds_and_bn_stats_of_several_partitions_give_the_reference_bytes():
    import ml_dtypes

    x = randn(21, 3, 700).astype(ml_dtypes.bfloat16)
    c = knit.compile(folds_kernel, x)
    ref = c.reference(x)
    out = c.run(x, backend="jit-strict")
    assert c.last_run["native"] > 0 and c.last_run["interpreted"] == 0, c.last_run
    assert all(same_bytes(o, r) for o, r in zip(out, ref))
    sums, stats = out
    xf = x.astype(np.float64)
    np.testing.assert_allclose(sums[:, 0], np.exp(xf).reshape(21, -1).sum(axis=1), rtol=1e-5)
    even, odd = xf[:, 0, 0:500:2], xf[:, 0, 1:500:2]
    np.testing.assert_allclose(stats[:, 1], even.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats[:, 5], odd.var(axis=1) * 250, rtol=1e-4)


@knit.jit
def in_place_maps_kernel(x):
    """Element-wise maps without a row fold, in place and not, over rows longer than the native
    bodies' 256-value chunk (700 = 2 chunks and a 188-value tail): exp, a scaled tanh, an add."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.activation(dst=t, op=nl.exp, data=t, scale=0.5)  # in place: dst is the input
    u = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=u, op=nl.tanh, data=t, scale=-1.0)
    nisa.tensor_tensor(dst=u, data1=u, data2=t, op=nl.add)  # in place again, two inputs
    nisa.dma_copy(dst=out, src=u)
    return out


def test_element_wise_maps_in_place_across_value_chunks_give_the_reference_bytes():
    x = randn(96, 700)
    c = knit.compile(in_place_maps_kernel, x)
    ref = c.reference(x)
    out = c.run(x, backend="jit-strict")
    assert c.last_run["native"] > 0 and c.last_run["interpreted"] == 0, c.last_run
    assert same_bytes(out, ref)
    e = np.exp(0.5 * x.astype(np.float64))
    np.testing.assert_allclose(out, np.tanh(-e) + e, rtol=1e-5, atol=1e-6)


# Inputs at which the native bodies' fast exp (exp_guess, alu.cpp) cannot tell exp_of's bits and
# its own differ: the bodies must compute their stretch again with exp_of (map_guessed).
EXP_GUESS_MISSES = [
    "-0x1.dc659ap+3", "-0x1.14f882p+3", "-0x1.d126fp+2", "-0x1.ea1a08p+1", "-0x1.34003ap+1",
    "-0x1.3247aap+1", "-0x1.b75242p+0", "-0x1.0eb044p+0", "-0x1.08abe2p+0", "-0x1.03d5bep+0",
]


@knit.jit
def exp_activations_kernel(x):
    """exp without and with a row fold, and silu (whose sigmoid takes exp(-x))."""
    rows, cols = x.shape
    out = nl.ndarray((3, rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    sums = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for k, op in enumerate((nl.exp, nl.silu)):
        u = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=u, op=op, data=t, scale=1.0 - 2.0 * k)  # silu of -x
        nisa.dma_copy(dst=out[k], src=u)
    e = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=e, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=s)
    nisa.dma_copy(dst=out[2], src=e)
    nisa.dma_copy(dst=sums, src=s)
    return out, sums


def test_exp_activations_where_the_fast_exp_is_unsure_give_the_reference_bytes():
    x = randn(20, 600) * 4
    misses = np.array([float.fromhex(h) for h in EXP_GUESS_MISSES], dtype=np.float32)
    x[np.arange(20) % 10 == 3, 17] = misses[:2]  # in fold_rows' first block of 8 rows
    x[19, 300:310] = misses  # in the partitions folded alone, the second chunk
    x[5, 590:600] = misses  # the tail chunk, no fold
    c = knit.compile(exp_activations_kernel, x)
    ref = c.reference(x)
    out = c.run(x, backend="jit-strict")
    assert c.last_run["native"] > 0 and c.last_run["interpreted"] == 0, c.last_run
    assert all(same_bytes(o, r) for o, r in zip(out, ref))
    xd = x.astype(np.float64)
    np.testing.assert_allclose(out[0][0], np.exp(xd), rtol=1e-6)
    np.testing.assert_allclose(out[0][1], xd / (1 + np.exp(xd)) * -1, rtol=1e-5, atol=1e-30)
    np.testing.assert_allclose(out[1][:, 0], np.exp(xd).sum(axis=1), rtol=1e-5)


# ---- outputs handed over without a copy --------------------------------------------------------


def test_an_output_is_the_callers_own_array_after_later_runs():
    """The returned array wraps the run's memory: a later run (which reuses pooled blocks of the same
    size) must not write into it, and it outlives the compiled kernel."""
    kernel = example("tensor_add")
    a, b = randn(256, 1024), randn(256, 1024, seed=1)
    c = knit.compile(kernel, a, b)
    first = c.run(a, b, backend="jit-strict")
    kept = first.copy()
    del c
    gc.collect()
    c = knit.compile(kernel, a, b)
    for seed in range(3):
        x, y = randn(256, 1024, seed=10 + seed), randn(256, 1024, seed=20 + seed)
        assert np.array_equal(c.run(x, y, backend="jit-strict"), x + y)
    assert np.array_equal(first, kept) and np.array_equal(first, a + b)
    assert first.flags.writeable
    first[0, 0] = 7.0  # the caller's to change; no later result sees it
    assert np.array_equal(c.run(a, b, backend="jit-strict"), a + b)


@knit.jit
def same_output_twice(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out, out


def test_an_output_returned_twice_gives_two_independent_arrays():
    x = randn(128, 2048)
    c = knit.compile(same_output_twice, x)
    first, second = c.run(x, backend="jit-strict")
    assert np.array_equal(first, x) and np.array_equal(second, x)
    first[0, 0] = 1.5
    assert second[0, 0] == x[0, 0]


# ---- the owed NaN fill of fresh HBM tensors ----------------------------------------------------


@knit.jit
def half_written_output(x):
    """Writes the first half of the rows of a [rows, cols] output; the rest stays never written."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((rows // 2, cols), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:rows // 2, :])
    nisa.dma_copy(dst=out[0:rows // 2, :], src=t)
    return out


@pytest.mark.parametrize("mode", ["", "warn", "error", "off"])
def test_never_written_output_bytes_are_the_fill_in_every_mode(mode, monkeypatch, capsys):
    monkeypatch.setenv("KNIT_UNINITIALIZED", mode)
    x = randn(256, 2048)
    c = knit.compile(half_written_output, x)
    ref = c.reference(x)
    ref_printed = capsys.readouterr().out
    out = c.run(x, backend="jit-strict")
    assert same_bytes(out, ref)
    assert np.array_equal(out[:128], x[:128]) and np.isnan(out[128:]).all()
    assert "unwritten-output" in capsys.readouterr().out and "unwritten-output" in ref_printed


@knit.jit
def reads_back_a_half_written_output(x):
    """Writes rows [0, 64) of the output, reads rows [0, 128) back (64 never written) and stores
    them, doubled, as rows [128, 256): a read of never-written HBM through big tiles."""
    cols = x.shape[1]
    out = nl.ndarray((256, cols), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((64, cols), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:64, :])
    nisa.dma_copy(dst=out[0:64, :], src=t)
    back = nl.ndarray((128, cols), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=back, src=out[0:128, :])  # @read
    doubled = nl.ndarray((128, cols), x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=doubled, data1=back, data2=back, op=nl.add)
    nisa.dma_copy(dst=out[128:256, :], src=doubled)
    nisa.dma_copy(dst=out[64:128, :], src=t)
    return out


def read_line():
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith("# @read"))


@pytest.mark.parametrize("mode", ["", "error"])
def test_a_read_of_never_written_hbm_is_still_caught(mode, monkeypatch):
    monkeypatch.setenv("KNIT_UNINITIALIZED", mode)
    x = randn(64, 2048)
    ref, jit = errors_of_both(knit.compile(reads_back_a_half_written_output, x), x)
    assert (jit.rule, jit.line, jit.message) == (ref.rule, ref.line, ref.message)
    assert f"{os.path.basename(__file__)}:{read_line()}" in str(jit)


def test_a_read_of_never_written_hbm_reads_the_fill_when_unchecked(monkeypatch):
    monkeypatch.setenv("KNIT_UNINITIALIZED", "off")
    x = randn(64, 2048)
    c = knit.compile(reads_back_a_half_written_output, x)
    ref = c.reference(x)
    out = c.run(x, backend="jit-strict")
    assert same_bytes(out, ref)
    assert np.array_equal(out[0:64], x) and np.array_equal(out[64:128], x)
    assert np.array_equal(out[128:192], x + x) and np.isnan(out[192:256]).all()


# ---- tiles written in pieces (ir::written_whole_before_read) -----------------------------------


def stale_then_halves(write_second_half):
    """A tile `u` written whole, negated and stored, then a tile `t` written in column halves (or
    only its first half) and stored whole: `t` may lie at `u`'s freed address, whose stale bytes
    and written-flags must never pass as `t`'s."""

    @knit.jit
    def kernel(x):
        rows, cols = x.shape
        half = cols // 2
        out = nl.ndarray((2 * rows, cols), x.dtype, buffer=nl.shared_hbm)
        u = nl.ndarray((rows, cols), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=u, src=x)
        nisa.tensor_scalar(dst=u, data=u, op0=nl.multiply, operand0=-1.0)
        nisa.dma_copy(dst=out[0:rows, :], src=u)
        t = nl.ndarray((rows, cols), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[:, 0:half], src=x[:, 0:half])
        if write_second_half:
            nisa.dma_copy(dst=t[:, half:cols], src=x[:, half:cols])
        nisa.dma_copy(dst=out[rows:2 * rows, :], src=t)  # @half-read
        return out

    return kernel


tile_in_halves, tile_half_written = stale_then_halves(True), stale_then_halves(False)


@knit.jit
def tile_half_read_between(x):
    rows, cols = x.shape
    half = cols // 2
    out = nl.ndarray((2 * rows, cols), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:half], src=x[:, 0:half])
    nisa.dma_copy(dst=out[0:rows, 0:half], src=t[:, 0:half])  # reads the written half only
    nisa.dma_copy(dst=t[:, half:cols], src=x[:, half:cols])
    nisa.dma_copy(dst=out[rows:2 * rows, :], src=t)
    nisa.dma_copy(dst=out[0:rows, half:cols], src=t[:, half:cols])
    return out


@pytest.mark.parametrize("backend", ["reference", "jit-strict"])
def test_a_tile_written_in_halves_before_its_read_holds_its_data(backend):
    x = randn(128, 40960)  # the two tiles at the same address, as below
    out = knit.compile(tile_in_halves, x).run(x, backend=backend)
    assert np.array_equal(out[:128], -x) and np.array_equal(out[128:], x)
    out = knit.compile(tile_half_read_between, x).run(x, backend=backend)
    assert np.array_equal(out[:128], x) and np.array_equal(out[128:], x)


@pytest.mark.parametrize("backend", ["reference", "jit-strict"])
def test_a_tile_read_with_a_never_written_half_is_still_caught(backend, monkeypatch):
    """The first tile's bytes and written-flags lie where the second is placed (160 KiB a
    partition each: they cannot both fit in SBUF): the half never written must be reported, not
    read as the first tile's stale data."""
    monkeypatch.delenv("KNIT_UNINITIALIZED", raising=False)
    x = randn(128, 40960)
    c = knit.compile(tile_half_written, x)
    first, second = c.memory_map().tensors
    assert (first.partition, first.offset) == (second.partition, second.offset)
    with pytest.raises(knit.KnitRuntimeError) as info:
        c.run(x, backend=backend)
    with open(__file__) as f:
        line = next(i for i, text in enumerate(f, 1) if text.rstrip().endswith("# @half-read"))
    assert f"{os.path.basename(__file__)}:{line}" in str(info.value)


@knit.jit
def stores_of_every_alignment(x):
    """DMAs into HBM of 4 KiB rows and more (the native path streams them past the caches):
    16-byte aligned, 4 bytes off alignment, and 4100-byte rows (not a multiple of 16)."""
    rows, cols = x.shape
    out = nl.ndarray((3, rows, cols + 1), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((rows, cols), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out[0, :, 0:cols], src=t)
    nisa.dma_copy(dst=out[0, :, cols:cols + 1], src=t[:, 0:1])
    nisa.dma_copy(dst=out[1, :, 1:cols + 1], src=t)
    nisa.dma_copy(dst=out[1, :, 0:1], src=t[:, 1:2])
    w = nl.ndarray((rows, cols + 1), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w[:, 0:cols], src=t)
    nisa.dma_copy(dst=w[:, cols:cols + 1], src=t[:, 2:3])
    nisa.dma_copy(dst=out[2], src=w)
    return out


def test_dma_stores_into_hbm_of_any_alignment_hold_the_data():
    x = randn(128, 1024)
    c = knit.compile(stores_of_every_alignment, x)
    out = c.run(x, backend="jit-strict")
    assert c.last_run["interpreted"] == 0, c.last_run
    assert same_bytes(out, c.reference(x))
    assert np.array_equal(out[0], np.concatenate([x, x[:, 0:1]], axis=1))
    assert np.array_equal(out[1], np.concatenate([x[:, 1:2], x], axis=1))
    assert np.array_equal(out[2], np.concatenate([x, x[:, 2:3]], axis=1))
