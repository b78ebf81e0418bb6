"""Forwarded copies on the native path (forward_note in simulator/src/native/executor.h; docs/jit.md).

A dma_copy of a kernel argument into a tile whose only reader is one later element-wise
instruction moves no bytes on the JIT backend: the reader reads the argument's rows in place.
Each case checks the bytes against the reference interpreter (which always copies), and
`last_run["forwarded"]` for whether the copy was forwarded, so a case that stops forwarding
fails instead of silently testing the ordinary path.
"""
import os
import runpy

import ml_dtypes
import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl
from kernel_test_util import errors_of_both

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "kernels", "python")


def randn(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def same_bytes(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def run_both(kernel, *args):
    """(JIT output, reference output, last_run) with every body compiled (jit-strict), each run
    on its own copy of the arguments (a kernel may write one)."""
    c = knit.compile(kernel, *args)
    ref = c.reference(*(a.copy() for a in args))
    out = c.run(*(a.copy() for a in args), backend="jit-strict")
    assert c.last_run["interpreted"] == 0, c.last_run
    return out, ref, c.last_run


@pytest.fixture(autouse=True)
def _default_mode(monkeypatch):
    monkeypatch.delenv("KNIT_UNINITIALIZED", raising=False)


def test_tensor_add_example_reads_both_inputs_in_place():
    kernel = runpy.run_path(os.path.join(EXAMPLES, "tensor_add.py"))["tensor_add_kernel"]
    x, y = randn(300, 1024), randn(300, 1024, seed=1)  # three tiles, the last of 44 rows
    out, ref, last = run_both(kernel, x, y)
    assert same_bytes(out, ref)
    assert last["forwarded"] == 6, last  # both loads of every tile
    np.testing.assert_array_equal(out, x + y)


@knit.jit
def readers_of_every_kind(x, col):
    """One forwarded load per reader kind: tensor_scalar, activation (with a bias column),
    tensor_copy (casting to bf16), and tensor_tensor with the loaded tile as its second input;
    the loads take strided column blocks of x."""
    rows = x.shape[0]
    out = nl.ndarray((4, rows, 256), nl.float32, buffer=nl.shared_hbm)
    c = nl.ndarray((rows, 1), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=col)
    c2 = nl.ndarray((rows, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=c2, src=c)  # c has two readers: not forwarded
    results = []
    for k in range(4):
        t = nl.ndarray((rows, 256), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, nl.ds(256 * k, 256)])
        r = nl.ndarray((rows, 256), nl.float32 if k != 2 else nl.bfloat16, buffer=nl.sbuf)
        if k == 0:
            nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=c, op1=nl.add, operand1=0.5)
        elif k == 1:
            nisa.activation(dst=r, op=nl.exp, data=t, bias=c2, scale=0.25)
        elif k == 2:
            nisa.tensor_copy(dst=r, src=t)
        else:
            nisa.tensor_tensor(dst=r, data1=results[0], data2=t, op=nl.subtract)
        results.append(r)
    for k, r in enumerate(results):
        f = nl.ndarray((rows, 256), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=f, src=r)
        nisa.dma_copy(dst=out[k], src=f)
    return out


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["fp32", "bf16"])
def test_each_reader_kind_reads_strided_rows_in_place(dtype):
    x, col = randn(96, 1024, dtype=dtype), randn(96, 1)
    out, ref, last = run_both(readers_of_every_kind, x, col)
    assert same_bytes(out, ref)
    assert last["forwarded"] == 4, last
    xf = x.astype(np.float32)
    np.testing.assert_allclose(out[0], xf[:, 0:256] * col + 0.5, rtol=1e-6)
    np.testing.assert_allclose(out[1], np.exp(0.25 * xf[:, 256:512] + col), rtol=1e-5)
    np.testing.assert_array_equal(out[2], xf[:, 512:768].astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_allclose(out[3], out[0] - xf[:, 768:1024], rtol=1e-6, atol=1e-6)


@knit.jit
def rolled_loads(x, y):
    """A loop the tracer keeps rolled: the loads' rows move with the loop register."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // 128):
        a = nl.ndarray((128, cols), x.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, cols), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x[nl.ds(i * 128, 128), :])
        nisa.dma_copy(dst=b, src=y[nl.ds(i * 128, 128), :])
        s = nl.ndarray((128, cols), x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=a, data2=b, op=nl.maximum)
        nisa.dma_copy(dst=out[nl.ds(i * 128, 128), :], src=s)
    return out


def test_loads_in_a_rolled_loop_are_forwarded_every_iteration():
    x, y = randn(512, 640), randn(512, 640, seed=1)
    out, ref, last = run_both(rolled_loads, x, y)
    assert same_bytes(out, ref)
    assert last["forwarded"] == 8, last
    np.testing.assert_array_equal(out, np.maximum(x, y))


@knit.jit
def written_argument(x):
    """Loads x, doubles it, and stores the result back into x: x is written, so its load must
    really copy (the store would otherwise change what the reader reads)."""
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    d = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=d, data1=t, data2=t, op=nl.add)
    nisa.dma_copy(dst=x, src=d)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=d)
    return out


def test_a_load_of_an_argument_the_kernel_writes_is_not_forwarded():
    x = randn(64, 512)
    out, ref, last = run_both(written_argument, x)
    assert same_bytes(out, ref) and last["forwarded"] == 0, last
    np.testing.assert_array_equal(out, 2 * x)


@knit.jit
def two_readers(x):
    """The loaded tile has two readers, a reduction and an activation (the softmax shape)."""
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    m = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=t, axis=1)  # exp(x + max) below: any column
    e = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=t, bias=m, scale=1.0)
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=e)
    return out


def test_a_tile_with_two_readers_is_read_in_place_by_both():
    x = randn(128, 300)
    out, ref, last = run_both(two_readers, x)
    assert same_bytes(out, ref) and last["forwarded"] == 1, last
    np.testing.assert_allclose(out, np.exp(x + x.max(axis=1, keepdims=True)), rtol=1e-5)


@knit.jit
def read_by_bn_stats_too(x):
    """The loaded tile is also read by an instruction that does not take HBM rows (bn_stats):
    copied."""
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=s, data=t, op0=nl.multiply, operand0=2.0)
    st = nl.ndarray((x.shape[0], 6), nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(dst=st, data=t)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=s)
    stats = nl.ndarray((x.shape[0], 6), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=stats, src=st)
    return out, stats


def test_a_tile_with_a_reader_of_another_kind_is_copied():
    x = randn(64, 256)
    (out, stats), (ref, ref_stats), last = run_both(read_by_bn_stats_too, x)
    assert same_bytes(out, ref) and same_bytes(stats, ref_stats) and last["forwarded"] == 0, last
    np.testing.assert_array_equal(out, 2 * x)
    np.testing.assert_allclose(stats[:, 1], x[:, 0::2].mean(axis=1), rtol=1e-5, atol=1e-6)


@knit.jit
def forwarded_beside_never_written(x):
    """The forwarded load's reader also reads a tile no instruction wrote."""
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    junk = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    s = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=s, data1=t, data2=junk, op=nl.add)  # @read
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=s)
    return out


def test_a_never_written_operand_of_a_forwarded_reader_is_still_caught(monkeypatch):
    """The same error as the reference interpreter's, at the reader's line."""
    monkeypatch.setenv("KNIT_UNINITIALIZED", "error")
    x = randn(128, 512)
    ref, jit = errors_of_both(knit.compile(forwarded_beside_never_written, x), x)
    assert (jit.rule, jit.line, jit.message) == (ref.rule, ref.line, ref.message)
    with open(__file__) as f:
        line = next(n for n, text in enumerate(f, 1) if text.rstrip().endswith("# @read"))
    assert jit.rule == "uninitialized-read" and jit.line == line


def test_a_reader_that_falls_back_gets_the_copy_first(monkeypatch):
    """In warn mode the reader of a never-written operand runs on the reference executor, which
    reads the tile: the skipped copy runs first, and the poisoned output matches byte for byte."""
    monkeypatch.setenv("KNIT_UNINITIALIZED", "warn")
    x = randn(128, 512)
    c = knit.compile(forwarded_beside_never_written, x)
    ref = c.reference(x)
    out = c.run(x, backend="jit-strict")
    assert same_bytes(out, ref)
    assert c.last_run["forwarded"] == 0 and c.last_run["interpreted"] >= 1, c.last_run
